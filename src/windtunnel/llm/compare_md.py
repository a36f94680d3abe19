"""``summary.md`` of a comparison of language models, from its ``summary.json`` alone.

:func:`summary_markdown` writes the page; :func:`results_markdown` the part the docs show of a
committed comparison (the models, the headline table, the claims and the dissociation), so that a
docs table is rendered from data, never typed.
"""

from __future__ import annotations

import html
from typing import Any

from windtunnel.llm.report import CLAIM_TITLES, VERDICT_MARKS
from windtunnel.llm.report import claims_table as claim_rows
from windtunnel.tables import f, pct, table


def _e(text: Any) -> str:
    return html.escape(str(text), quote=False)


def _ci(x, lo, hi, fmt=pct) -> str:
    return "n/a" if x is None else f"{fmt(x)} [{fmt(lo)}, {fmt(hi)}]" if lo is not None else fmt(x)


def _paper(v) -> str:
    return f" (paper {v})" if v else ""


def _finished(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in summary["rows"] if r["status"] == "finished"]


def models_table(summary: dict[str, Any]) -> list[str]:
    body = []
    for r in summary["rows"]:
        if r["status"] != "finished":
            body.append([_e(r["model"]), r["status"], _e(r.get("error") or "not run yet"), "", "", "", "", "", ""])
            continue
        mem = (f"{f(r['peak_rss_mib'], '.0f')}, +{f(r.get('rss_growth_mib'), '.0f')} "
               f"(est. {f(r['memory_estimate_mib'], '.0f')})")
        body.append([_e(r["model"]) + (" (random weights)" if r["random_weights"] else ""), r["attention"], r["group"],
                     f"{r['n_parameters'] / 1e6:.2f}M", f"{r['n_layers']} x {r['d_model']}", f"{r['dtype']} {r['device']}",
                     f(r["seconds"], ".0f"), f(r.get("control_seconds"), ".0f"), mem])
    return table(["model", "attention", "group", "parameters", "layers x d_model", "dtype device", "seconds",
                  "control seconds", "peak RSS MiB, growth (estimate)"], body)


def headline_table(summary: dict[str, Any]) -> list[str]:
    body = []
    for r in _finished(summary):
        body.append([
            _e(r["model"]),
            _ci(r.get("mixed_pc1_pc2_boot"), r["mixed_pc1_pc2_lo"], r["mixed_pc1_pc2_hi"])
            + f" (null q95 {pct(r['mixed_perm_q95'])}){_paper(r.get('paper_mixed_pc1_pc2'))}",
            _ci(r.get("math_pc1_pc2_boot"), r["math_pc1_pc2_lo"], r["math_pc1_pc2_hi"])
            + _paper(r.get("paper_math_pc1_pc2")),
            f"{f(r['key_orth_early'], '.3f')} (init {f(r['key_null_init'], '.3f')}){_paper(r.get('paper_key_orth_early'))}",
            _ci(r["focusing"], r["focusing_lo"], r["focusing_hi"]) + _paper(r.get("paper_focusing")),
            _ci(r["monotone_fraction"], r["monotone_lo"], r["monotone_hi"], lambda x: f(x, ".2f")),
            _ci(r["focusing_slope"], r["focusing_slope_lo"], r["focusing_slope_hi"], lambda x: f(x, "+.2f")),
            f"{f(r['sula_rho_k_pc1'], '+.2f')} / {f(r['sula_spearman_pc1_h_bayes'], '+.2f')}",
            f"{f(r['sula_mae'], '.3f')} (constant {f(r.get('sula_constant_mae'), '.3f')}){_paper(r.get('paper_sula_mae'))}",
            f"{f(r['iv_true_dmae'], '+.4f')} / {f(r['iv_random_dmae'], '+.4f')}",
            f"{f(r['iv_true_dgeometry'], '+.3f')} / {f(r['iv_random_dgeometry'], '+.3f')}",
        ])
    return table(["model", "mixed PC1+PC2 (bootstrap mean [95% CI])", "math PC1+PC2 (bootstrap mean [95% CI])",
                  "key |cos| early", "focusing [95% CI]", "monotone steps", "slope (bits/depth)",
                  "SULA rho(k, PC1) / rho(PC1, H_Bayes)", "SULA MAE bits",
                  "cut ΔMAE true / random", "cut Δcorr downstream true / random"], body)


def claims_table(summary: dict[str, Any]) -> list[str]:
    """A verdict per model and claim (✓ holds, ~ partly, ✗ does not hold, – not testable), and the
    control each model's verdicts rest on."""
    order = summary["claim_order"]
    rows = {r["model"]: r for r in summary["rows"]}
    body = [[_e(name)] + [f"{VERDICT_MARKS[c['verdict']]} **{c['verdict']}**" for c in claims]
            + [_e(rows.get(name, {}).get("control") or "-")] for name, claims in summary["claims"].items()]
    return table(["model"] + [CLAIM_TITLES[c] for c in order] + ["control"], body)


def claims_detail(summary: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for name, claims in summary["claims"].items():
        rows = claim_rows([{k: (_e(v) if isinstance(v, str) else v) for k, v in c.items()} for c in claims], _e(name))
        lines += rows if not lines else rows[2:]
    return lines


def dissociation_lines(summary: dict[str, Any]) -> list[str]:
    d = summary["dissociation"]
    lines = ["**trained models** (random-weight models and the controls are never a side):", ""]
    for metric, t in d["trained"].items():
        star = " (the paper's measure)" if metric == d["primary"] else ""
        lines.append(f"- {t['meaning']}{star}: {_e(t['conclusion'])}.")
    return lines + [""]


def results_markdown(summary: dict[str, Any]) -> list[str]:
    """The models, headline numbers, claims and dissociation of a comparison (the docs' table)."""
    lines = models_table(summary) + [""] + headline_table(summary) + ["", "Paper III's claims per model, each judged "
                                                                     "against the model at initialisation (the control "
                                                                     "column; details in the comparison's summary.md):", ""]
    lines += claims_table(summary) + ["", "Dissociation, MHA against GQA/SW:", ""] + dissociation_lines(summary)
    return lines


def summary_markdown(summary: dict[str, Any]) -> str:
    s = summary
    lines = [f"# Comparison of language models: {_e(s['name'])}", "", _e(s["description"]), "",
             f"{len(s['finished'])} of {s['n_models']} models finished; analyses: {', '.join(s['analyses'])}."]
    if s["failed"]:
        lines += ["", "**Failed** (recorded, the others completed; run the comparison again to retry them):", ""]
        lines += [f"- {_e(k)}: {_e(v)}" for k, v in s["failed"].items()]
    if s["missing"]:
        lines += ["", f"**Missing** (not run yet): {_e(', '.join(s['missing']))}."]
    lines += ["", "## Models", "", "Attention type read from each config; group for the dissociation: MHA, or GQA/SW "
              "(shared key/value heads or a sliding window). Memory: the peak resident memory of the process while "
              "the model ran and its growth over the process before loading, beside the estimate made from the "
              "config before loading (weights, loading, activations; the growth is what it estimates).", ""] + models_table(s)
    if not s["finished"]:
        return "\n".join(lines + [""])
    lines += ["", "## Headline numbers", "", "Final layer, the run's primary PCA space; intervals are 95% bootstrap "
              "intervals over prompts; the paper's values in brackets where the model is one of the paper's. "
              f"Paper values: {_e(s['paper_source'])}", ""] + headline_table(s)
    lines += ["", "## Paper III's claims", "", "Each claim is judged against the model's control, the same architecture "
              "at initialisation analysed by the same code: holds = the control beaten (a 95% interval) and the paper's "
              "criterion met; partly = the control beaten alone; does not hold = the control not beaten; not testable = "
              "a precondition is missing (the reason is given). Rules in `windtunnel.llm.claims`.", ""]
    lines += [f"- {CLAIM_TITLES[k]}: {_e(v)}" for k, v in s["claim_text"].items()] + [""]
    lines += claims_table(s) + [""] + claims_detail(s)
    lines += ["", "## Dissociation: does focusing differ between MHA and GQA/SW models?", "",
              "Effect = mean of the MHA models minus mean of the GQA/SW models. Over prompts: each model's bootstrap "
              "replicates (these models only). Over models: an exact permutation test of the group labels (the "
              "architectures); it needs several models a side. See `windtunnel.llm.dissociation`.", ""]
    lines += dissociation_lines(s)
    if s["scaling"]:
        lines += ["## Scaling", "", "Families with several sizes: " + "; ".join(
            f"{_e(k)} ({', '.join(map(_e, v))})" for k, v in s["scaling"].items()) + ".", ""]
    figs = s.get("figures", [])
    if figs:
        lines += ["## Figures", ""] + [f"![{p.removesuffix('.png')}]({p})\n" for p in figs]
    return "\n".join(lines) + "\n"
