"""``diagnostics.md``: short tables of every analysis' headline numbers beside their nulls.

One section renderer per analysis (``(result, doc) -> lines``, the
:class:`~windtunnel.analysis.Markdown` protocol; these read only their result), named by the
analysis' record (:class:`~windtunnel.analysis.Analysis`); :func:`render` writes the sections in
the order of the results, each under its record's title."""

from __future__ import annotations

from windtunnel.analysis import AnalysisRegistry
from windtunnel.tables import f, pct, table


def key_frame(r: dict, doc: dict) -> list[str]:
    out = [f"Hypothesis tokens: {r['tokens']}. Null: step 0 ({r['null_init']}) and {r['n_null']} draws of "
           f"{r['null_random']}. p (random): Monte Carlo, one-sided (trained below random), then two-sided; p (init): "
           "permutation test over token pairs, two-sided.", ""]
    rows = []
    for variant, v in r["variants"].items():
        for layer in v["layers"]:
            mc = layer["test_vs_random"]
            rows.append([variant, str(layer["layer"]), f(layer["mean"]), f(layer["init_mean"]), f(layer["random_mean"]),
                         f(layer["mean"] / layer["random_mean"] if layer["random_mean"] else None, ".2f"),
                         f"{f(mc['p'], '.3f')} / {f(mc['p_two_sided'], '.3f')}", f(layer["test_vs_init"]["p"], ".4f")])
    return out + table(["variant", "layer", "trained", "step 0", "random", "trained / random", "p (random)",
                        "p (init)"], rows)


def attention(r: dict, doc: dict) -> list[str]:
    rows = []
    for layer in r["layers"]:
        s, s0, d = layer["scored"], layer["init_scored"], layer["diff_vs_init"]
        rows.append([str(layer["layer"]), f(s["bits"]), f(s["normalised"]), f(s0["bits"]), f(s["uniform_bits"]),
                     f"{f(d['value'])} [{f(d['lo'])}, {f(d['hi'])}]", f(layer["qk_alignment_mean"]),
                     f(layer["qk_alignment_mean_init"])])
    out = table(["layer", "entropy (bits)", "normalised", "step 0", "uniform", "trained - step 0 (95% CI)",
                 "QK align", "QK align step 0"], rows)
    out += ["", f"Entropy reduction from the first to the last layer: {pct(r['reduction_first_to_last'])}."]
    if "bijection_mass" in r:
        bm = r["bijection_mass"]
        out += ["", f"Attention mass at key positions k >= 2 ({bm['operationalisation']}):", ""]
        u = bm["uniform"]
        rows = [[str(x["layer"]), f(x["mean"]["self"]), f(x["mean"]["keys"]), f(x["mean"]["values"]),
                 f(x["init_mean"]["values"])] for x in bm["layers"]]
        rows.append(["uniform", f(u["self"]), f(u["keys"]), f(u["values"]), ""])
        out += table(["layer", "self", "earlier keys", "earlier values (eliminated)", "values at step 0"], rows)
    return out


def value_manifold(r: dict, doc: dict) -> list[str]:
    rows = []
    for name, rep in r["representations"].items():
        t, i, g = rep["trained"], rep["init"], rep["gaussian"]
        rows.append([name, pct(t["standardized"]["pc1"]), pct(t["standardized"]["pc1_pc2"]), pct(t["raw"]["pc1"]),
                     f(t["standardized"]["spearman_pc1"], ".2f"), str(t["standardized"]["dims_90"]),
                     str(t["standardized"]["dims_95"]), f(t["probe"]["r2"]), f(t["probe"]["r2_shuffled"]),
                     f(t["probe"].get("r2_position_only")),
                     pct(i["standardized"]["pc1"]), f(i["probe"]["r2"]), pct(g["standardized"]["pc1"])])
    b = r["most_one_dimensional"]
    return [f"{r['n_points']} points labelled by {r['label']}; probe split {r['split']}. Most one-dimensional: "
            f"`{b['name']}`, PC1 {pct(b['pc1'])} (step 0 {pct(b['init_pc1'])}), |rho(PC1, H)| "
            f"{f(b['spearman_pc1'], '.2f')}.", ""] + table(
        ["representation", "PC1 (std)", "PC1+2 (std)", "PC1 (raw)", "|rho(PC1,H)|", "dims 90%", "dims 95%",
         "probe R²", "shuffled R²", "position-only R²", "PC1 step 0", "R² step 0", "PC1 Gaussian"], rows)


def ablation(r: dict, doc: dict) -> list[str]:
    b = r["baseline"]
    fh = r["frame_head"]
    out = [f"Baseline entropy error {f(b['entropy_error'], '.4f')} bits, KL(Bayes||model) {f(b['kl'], '.4f')} bits. "
           f"Frame head (largest single-head damage): **{fh['name']}**, Δ {f(fh['delta_entropy_error'], '.4f')} bits, "
           f"{f(fh['ratio_to_second'], '.2f')}× the runner-up; {fh['n_heads_at_least_half']} head(s) reach half its "
           f"effect. Smallest whole-block error ratio: {f(r['min_block_ratio'], '.1f')}×.", ""]
    by_name = {x["name"]: x for x in r["heads"] + r["blocks"]}
    rows = []
    for name in r["ranked"][:12]:
        x = by_name[name]
        rows.append([name, f(x["entropy_error"], ".4f"), f"{f(x['delta_entropy_error'], '.4f')} "
                     f"[{f(x['delta_lo'], '.4f')}, {f(x['delta_hi'], '.4f')}]", f(x["ratio"], ".1f"),
                     f(x["delta_kl"], ".4f")])
    out += table(["ablation", "entropy error", "Δ (95% CI)", "ratio", "Δ KL"], rows)
    if "hmm_top_attention" in r:
        h = r["hmm_top_attention"]
        out += ["", f"HMM, attention off in layers {h['layers']}:", ""]
        rows = []
        for K, x in h["lengths"].items():
            if "skipped" in x:
                rows.append([K, x["skipped"], "", ""])
            else:
                rows.append([K, f(x["baseline_entropy_error"], ".4f"), f(x["entropy_error"], ".4f"),
                             f(x["ratio"], ".1f")])
        out += table(["K", "intact", "ablated", "ratio"], rows)
    return out


def logit_lens(r: dict, doc: dict) -> list[str]:
    init = {x["name"]: x for x in r["init_layers"]}
    rows = [[x["name"], f(x["kl_model_bayes"], ".4f"), f(x["kl_bayes_model"], ".4f"), f(x["entropy_error"], ".4f"),
             f(init.get(x["name"], {}).get("kl_bayes_model"), ".4f")] for x in r["layers"]]
    base = "; ".join(f"{k}: KL(Bayes||.) {f(v['kl_bayes_model'], '.4f')}" for k, v in r["baselines"].items())
    return table(["layer", "KL(lens||Bayes)", "KL(Bayes||lens)", "entropy error", "KL(Bayes||lens) step 0"], rows) + [
        "", f"Model output: KL(Bayes||model) {f(r['model_output']['kl_bayes_model'], '.4f')}. Baselines: {base}."]


def dynamics(r: dict, doc: dict) -> list[str]:
    keys = list(r["series"])
    rows = [[str(c["step"])] + [f(c.get(k), ".4f") for k in keys] for c in r["checkpoints"]]
    out = table(["step"] + keys, rows)
    settle = ", ".join(f"{k} {v}" for k, v in r["settle_step"].items())
    out += ["", f"Settle step (within 10% of the final value for good): {settle}."]
    if "attention_settles_before_error" in r:
        out += [f"Attention settles before the error: {f(r['attention_settles_before_error'])}; the error improves "
                f"{f(r['error_improvement_after_attention_settles'], '.1f')}× after the attention has settled."]
    frames = [c["key_frame_variants_layer0"] for c in r["checkpoints"] if "key_frame_variants_layer0" in c]
    if frames:
        keys = list(frames[0])
        out += ["", "Layer-0 key frame (mean |cos|) by variant across the checkpoints:", ""]
        out += table(["step"] + keys, [[str(c["step"])] + [f(c["key_frame_variants_layer0"][k], ".3f") for k in keys]
                                       for c in r["checkpoints"]])
    return out


def recurrent(r: dict, doc: dict) -> list[str]:
    t, i, g = r["trained"], r["init"], r["gaussian"]
    rows = [["PC1 (raw)", pct(t["pca"]["pc1"]), pct(i["pca"]["pc1"]), pct(g["pca"]["pc1"])],
            ["PC1+PC2 (raw)", pct(t["pca"]["pc1_pc2"]), pct(i["pca"]["pc1_pc2"]), pct(g["pca"]["pc1_pc2"])],
            ["|rho(PC1, H)|", f(t["pca"]["spearman_pc1"], ".2f"), f(i["pca"]["spearman_pc1"], ".2f"), ""],
            ["entropy probe R²", f(t["probe"]["r2"]), f(i["probe"]["r2"]),
             f"shuffled {f(t['probe']['r2_shuffled'])}, position-only {f(t['probe'].get('r2_position_only'))}"]]
    if "clusters" in t:
        rows += [["silhouette", f(t["clusters"]["silhouette"]), f(i.get("clusters", {}).get("silhouette")),
                  f(g.get("clusters", {}).get("silhouette"))],
                 ["purity", f(t["clusters"]["purity"]), f(i.get("clusters", {}).get("purity")),
                  f"permuted {f(t['clusters']['purity_null'])}"]]
    out = [f"States: {r['representation']}; labels: {r['labels']}; k = {r['k']}.", ""]
    out += table(["statistic", "trained", "step 0", "null"], rows)
    if t.get("probe_per_layer"):
        out += ["", "Entropy probe R² per layer: " + ", ".join(f"{k} {f(v)}" for k, v in t["probe_per_layer"].items())]
    return out


def render(doc: dict, analyses: AnalysisRegistry) -> str:
    p = doc["probe"]
    lines = [f"# Geometric diagnostics: {doc['run_name']}", "",
             f"Task `{doc['task']}`, model `{doc['model']}` ({doc['n_params']:,} parameters) at step {doc['step']}; "
             f"probe batch: {p['n_sequences']} sequences ({p['n_points']} scored points) from the probe stream of "
             f"seed {p['seed']}. Nulls at initialisation use: {doc.get('init_weights') or 'n/a'}.", ""]
    for name, res in doc["results"].items():
        a = analyses.get(name)
        lines += [f"## {a.title}", ""] + a.markdown(res, doc) + [""]
    if doc["skipped"]:
        lines += ["## Skipped", ""] + [f"- `{k}`: {v}" for k, v in doc["skipped"].items()] + [""]
    if doc.get("plots"):
        lines += ["## Plots", ""] + [f"- [{p}]({p})" for p in doc["plots"]] + [""]
    return "\n".join(lines)
