"""``llm.md``: the headline numbers of ``llm.json`` beside their nulls and the paper's criteria.

One section renderer per analysis (``(result, doc) -> lines``, the
:class:`~windtunnel.analysis.Markdown` protocol), named by the analysis' record in
:mod:`windtunnel.llm.analyses`; :func:`render` writes the sections numbered in the registry's order."""

from __future__ import annotations

from windtunnel.analysis import AnalysisRegistry
from windtunnel.tables import f, pct, table


def _ci(x) -> str:
    return "n/a" if not x or x[0] is None else f"[{pct(x[0])}, {pct(x[1])}]"


def _pca_rows(name: str, layer: dict) -> list[list[str]]:
    rows = []
    for space in ("standardized", "raw"):
        r = layer[space]
        g = r["null"]["gaussian"]
        rows.append([name, space, pct(r["pc1"]), f"{pct(r['pc1_boot_mean'])} {_ci(r['pc1_ci'])}", pct(r["pc1_pc2"]),
                     f"{pct(r['pc1_pc2_boot_mean'])} {_ci(r['pc1_pc2_ci'])}",
                     f(r["participation_ratio"], ".2f"), f(r["spearman_pc1_entropy"], ".2f"),
                     pct(g["pc1_mean"]), pct(g["pc1_pc2_mean"]), pct(r["null"]["column_permutation"]["pc1_pc2_q95"])])
    return rows


PCA_HEADER = ["set", "PCA", "PC1", "bootstrap mean [95% CI]", "PC1+PC2", "bootstrap mean [95% CI]", "PR", "Spearman(PC1,H)",
              "null PC1", "null PC1+PC2", "perm. q95"]


def value_manifold(r: dict, doc: dict) -> list[str]:
    sel = r["selection"]
    out = [f"{sel['n_selected']} prompts from {sel['n_candidates']} candidates ({sel['pool']}), stratified by the "
           f"model's next-token entropy; domains {sel['domains']}; prompt tokens {f(sel['prompt_tokens']['mean'], '.1f')} "
           f"on average; BOS added to {pct(sel['bos_added_fraction'])}. Nulls: isotropic Gaussian with matched n and d "
           "and column permutation, through the same PCA. Bootstrap: prompts resampled with replacement and refitted "
           "(the paper's protocol); duplicated prompts bias PC shares upward, so the interval can lie above the "
           "point estimate.", ""]
    rows = []
    for layer, x in r["layers"].items():
        rows += [[f"L{layer}"] + row[1:] for row in _pca_rows("mixed", x)]
        vc = x["variance_concentration"]
        rows[-1][1] += f" (top-1 coord {pct(vc['top1'])})"
    return out + table(["layer"] + PCA_HEADER[1:], rows)


def key_orthogonality(r: dict, doc: dict) -> list[str]:
    s, n = r["summary"], r["null"]
    g = n["gaussian_empirical"]
    out = [f"W_K columns per key/value head ({r['n_kv_heads']} heads, d_head {r['d_head']}, d_model {r['d_model']}). "
           f"Mean over layers **{f(s['mean'], '.4f')}** (early third {f(s['early_mean'], '.4f')}, range "
           f"{f(s['min'], '.4f')}-{f(s['max'], '.4f')}); Gaussian null {f(g['layer_mean'], '.4f')} "
           f"(q05-q95 {f(g['layer_q05'], '.4f')}-{f(g['layer_q95'], '.4f')}; analytic {f(n['gaussian_analytic'], '.4f')}); "
           f"ratio to Gaussian {f(s['ratio_to_gaussian'], '.2f')}x; layers outside the null band: "
           f"{pct(s['fraction_layers_outside_gaussian_q05_q95'])}; layers below {s['threshold']}: "
           f"{pct(s['fraction_layers_below_threshold'])}."]
    if "init_from_config" in n:
        out[-1] += f" Family initialiser: {f(n['init_from_config']['mean'], '.4f')}."
    if "init_revision" in n:
        out[-1] += f" Revision {n['init_revision']['revision']}: {f(n['init_revision']['mean'], '.4f')}."
    rows = [[str(x["layer"]), f(x["mean"], ".4f"), f(x["median"], ".4f"), f(x["p10"], ".4f"), f(x["p90"], ".4f"),
             f(x["test_vs_gaussian"]["p"], ".3f")] for x in r["layers"]]
    return out + [""] + table(["layer", "mean", "median", "p10", "p90", "p vs Gaussian"], rows)


def attention_focusing(r: dict, doc: dict) -> list[str]:
    fo = r["focusing"]
    out = [f"{r['n_prompts']} prompts, {r['n_query_heads']} query heads, {r['positions']} query position; entropy "
           f"per head, then averaged. Focusing (first to last layer): **{pct(fo['relative_drop'])}** "
           f"{_ci(fo['ci'])}; normalised by log2(#keys): {pct(fo['normalised_relative_drop'])} {_ci(fo['normalised_ci'])}; "
           f"slope {f(fo.get('slope_bits_per_depth'), '+.3f')} bits per unit depth "
           f"[{f((fo.get('slope_ci') or [None])[0], '+.3f')}, {f((fo.get('slope_ci') or [None, None])[1], '+.3f')}]; "
           f"monotone steps {pct(fo.get('monotone_fraction'))} {_ci(fo.get('monotone_ci'))}; "
           f"largest drop at layer {fo['min_layer']} ({pct(fo['min_layer_relative_drop'])}); paired t p = "
           f"{f(fo['paired_t_p'], '.2g')}, Wilcoxon p = {f(fo['wilcoxon_p'], '.2g')}. Uniform attention: "
           f"{f(r['uniform_bits_mean'], '.2f')} bits.", ""]
    rows = [[str(x["layer"]), f(x["entropy_bits"]), f"[{f(x['entropy_ci'][0])}, {f(x['entropy_ci'][1])}]",
             f(x["normalised"]), f(x["sink_mass"])] for x in r["layers"]]
    return out + table(["layer", "entropy (bits)", "95% CI", "normalised", "sink mass"], rows)


def domain_restriction(r: dict, doc: dict) -> list[str]:
    mixed = doc["results"]["value_manifold"] if r["mixed"].get("same_as") else r["mixed"]
    layer = str(r["final_layer"])
    rows = _pca_rows("mixed", mixed["layers"][layer]) + _pca_rows("math", r["math"]["layers"][layer])
    g = r["gain"][layer]
    return table(PCA_HEADER, rows) + ["", f"Gain in PC1+PC2 (math - mixed), layer {layer}: standardized "
                                          f"**{pct(g['standardized']['pc1_pc2_gain'])}** {_ci(g['standardized']['ci'])}, "
                                          f"raw {pct(g['raw']['pc1_pc2_gain'])} {_ci(g['raw']['ci'])}. {r['note']}."]


def sula(r: dict, doc: dict) -> list[str]:
    c, a = r["calibration"], r["alignment"]
    out = [f"Labels {r['labels']}, alpha {r['alpha']}, {r['n_prompts']} prompts (k in {r['ks']}, {r['n_per_k']} per k). "
           f"Example (k={r['ks'][-1]}): `{r['example_prompts'][str(r['ks'][-1])]}`. Label mass p(L1)+p(L2): mean "
           f"{f(r['label_mass']['mean'])}.",
           f"Calibration: MAE **{f(c['mae'])} bits**, corr(H_model, H_Bayes) {f(c['corr'])}, accuracy "
           f"{pct(c.get('accuracy'))}. Shared {a['pca']} PCA at layer {a['layer']}: PC1 {pct(a['pc1'])}; "
           f"corr(PC1, H_Bayes) {f(a['pearson_pc1_h_bayes'])}; rho(k, PC1) {f(r['trajectory']['spearman_k_pc1'])}.", ""]
    rows = [[k, str(v["n"]), f(v["mean_h_bayes"]), f(v["mean_h_model"]), f(v["mae"]), f(v["corr"]),
             f(r["trajectory"]["per_k"][k]["mean"], ".3g")] for k, v in c["per_k"].items()]
    out += table(["k", "n", "H_Bayes", "H_model", "MAE", "corr", "mean PC1"], rows)
    if r.get("controls"):
        rows = [[n, ", ".join(x["labels"]), x["posterior"], f(x["calibration"]["mae"]),
                 f(x["calibration"]["spearman_k_h_model"]), f(x["shared_pc1"]["spearman_k_pc1"])]
                for n, x in r["controls"].items()]
        out += ["", f"Controls ({r['controls_basis']}):", ""] + table(
            ["condition", "labels", "posterior", "MAE", "rho(k, H_model)", "rho(k, PC1)"], rows)
    return out


def interventions(r: dict, doc: dict) -> list[str]:
    b = r["baseline"]
    out = [f"Axis: {r['axis']['definition']}; sign {r['axis']['sign']}. Random axis: {r['random_axis']['seed']}, "
           f"orthogonalised: {r['random_axis']['orthogonalised']}. Applied to the {r['applied_to']}. Baseline MAE "
           f"{f(b['calibration']['mae'])} bits, corr {f(b['calibration']['corr'])}. 'at cut' is measured on the "
           "perturbed values at the (last) cut layer and is ~0 for a true cut by construction; 'downstream' uses the "
           "unperturbed axes at every later layer.", ""]
    rows = [[",".join(map(str, x["layers"])), x["condition"], f(x["delta_mae"], "+.4f"), f(x["delta_corr"], "+.4f"),
             f(x["mean_abs_change_h_model"], ".4f"), f(x["axis_corr_at_cut"]), f(x["axis_corr_downstream_mean"]),
             f(x["axis_corr_final_layer"]), f(x["baseline_axis_corr_final_layer"])] for x in r["runs"]]
    return out + table(["layers", "condition", "ΔMAE", "Δcorr", "mean |ΔH_model|", "corr at cut", "corr downstream",
                        "corr final layer", "baseline final"], rows)


CLAIM_TITLES = {"value_manifold": "value manifold", "key_orthogonality": "key orthogonality", "focusing": "focusing",
                "domain_restriction": "domain restriction", "sula": "SULA", "entropy_axis": "entropy axis"}
VERDICT_MARKS = {"holds": "✓", "partly": "~", "does not hold": "✗", "not testable": "–", "not measured": " "}


def verdict_text(c: dict) -> str:
    """A claim's verdict as shown: the mark, the word and, where not testable, the reason."""
    text = f"{VERDICT_MARKS[c['verdict']]} **{c['verdict']}**"
    return text + (f" ({c['reason']})" if c.get("reason") else "")


def claims_table(claims: list[dict], model: str | None = None) -> list[str]:
    """One row per claim: verdict, what was measured, the control and what it rests on, the paper's value."""
    head = (["model"] if model is not None else []) + ["claim", "verdict", "measured", "against the control", "rests on",
                                                       "paper"]
    body = [([model] if model is not None else []) + [CLAIM_TITLES[c["claim"]], verdict_text(c), c["measured"],
                                                      c["control"], c["rests_on"], c["paper"]]
            for c in claims if c["verdict"] != "not measured"]
    return table(head, body)


def render(doc: dict, analyses: AnalysisRegistry) -> str:
    m = doc["model"]
    lines = [f"# windtunnel llm: {m['name']}", "",
             f"{m['class']} ({m['adapter']} adapter), {m['n_layers']} layers, {m['n_heads']} query heads, "
             f"{m['n_kv_heads']} key/value heads x {m['head_dim']}, d_model {m['d_model']}, "
             f"{m['n_parameters'] / 1e6:.1f}M parameters; {m['dtype']} on {m['device'] or m['device_map']}; "
             f"source {m['source']}" + (f" ({m['gguf_file']})" if m.get("gguf_file") else "") + ".", ""]
    c = doc.get("criteria", {})
    if c:
        lines += ["## Paper III criteria", ""]
        rows = [[k, "pass" if v["pass"] else "fail",
                 ", ".join(f"{kk} {f(vv, '.3f') if isinstance(vv, float) else vv}" for kk, vv in v.items() if kk != "pass")]
                for k, v in c.items() if isinstance(v, dict) and "pass" in v]
        lines += table(["criterion", "result", "values"], rows) + ["", f"Verdict: **{c['verdict']}**.", ""]
    if doc.get("claims"):
        lines += ["## Paper III's claims against the control", "",
                  f"Control: {doc['control']['rests_on']} (rules: `windtunnel.llm.claims`; holds = the control beaten "
                  "and the paper's criterion met, partly = the control beaten alone).", ""]
        lines += claims_table(doc["claims"]) + [""]
    for i, a in enumerate(analyses, 1):
        if a.name not in doc["results"]:
            continue
        lines += [f"## {i}. {a.title}", ""] + a.markdown(doc["results"][a.name], doc) + [""]
        if f"{a.name}.png" in doc.get("plots", []):
            lines += [f"![{a.name}]({a.name}.png)", ""]
    t = doc["timing"]
    lines += ["## Cost", "", f"Load {f(t['load_s'], '.1f')} s, total {f(t['total_s'], '.1f')} s, {t['prompts_run']} "
              f"prompts at {f(t.get('prompts_per_s'), '.1f')} prompts/s."]
    mem = m.get("memory")
    if t.get("peak_rss_mib") is not None:
        est = "" if not mem else f" (estimated before loading: {mem['estimate']['total'] / 1024 ** 2:.0f} MiB)"
        lines[-1] += (f" Peak resident memory {t['peak_rss_mib']:.0f} MiB, {t['rss_growth_mib']:.0f} MiB above the "
                      f"process before loading{est}.")
    lines.append("")
    return "\n".join(lines)
