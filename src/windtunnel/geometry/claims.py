"""Paper I's geometric claims, checked against the diagnostics of trained runs.

Each :class:`Claim` of :data:`CLAIMS` names the analysis and the run it reads (task, architecture),
what Paper I reports, and a rule that turns the measured numbers into a verdict: ``holds``,
``partly`` (the effect is there against its null but smaller than the paper's) or ``does not
hold``. :func:`check` maps (task, model) to the ``results`` of that run's ``diagnostics.json`` and
returns one row (claim, paper, run, measured, verdict) per claim whose run was diagnosed.

The rules, "holds; partly" (their sources: docs/geometry.md, "Paper I's geometric claims"):

* HMM value manifold: the most one-dimensional representation has standardised PC1 > 80% and
  |Spearman(PC1, H_Bayes)| >= 0.7; PC1 above its step-0 value and |Spearman| >= 0.5.
* attention focusing (HMM; bijection): the scored-row entropy falls >= 10% from the first to the
  last layer and the last layer is below step 0 (bootstrap 95% CI); some layer below step 0.
* Mamba's five clusters on HMM: k-means (k = S) purity >= 0.8; >= 0.1 above permuted labels.
* layer-0 key frame (Monte Carlo p < 0.05): raw keys <= :data:`PAPER_KEY_RATIO` x random; below random.
* frame head: the top head does >= 2x the runner-up's damage and doubles the error or more; >= 2x only.
* top-layer attention and length: removal's error factor at K = 50 >= 2x that at training length; larger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HOLDS, PARTLY, NO = "holds", "partly", "does not hold"


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str
    task: str
    model: str
    analysis: str
    judge: Callable[[dict[str, Any]], tuple[str, str]]  # analysis result -> (measured, verdict)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def value_manifold(r: dict[str, Any]) -> tuple[str, str]:
    b = r["most_one_dimensional"]
    pc1, rho, pc1_0 = b["pc1"], abs(b["spearman_pc1"]), b["init_pc1"]
    verdict = HOLDS if pc1 > 0.8 and rho >= 0.7 else PARTLY if pc1 > pc1_0 and rho >= 0.5 else NO
    return f"`{b['name']}`: PC1 {_pct(pc1)} (step 0 {_pct(pc1_0)}), |rho(PC1, H)| {rho:.2f}", verdict


def attention_focusing(r: dict[str, Any]) -> tuple[str, str]:
    layers = r["layers"]
    bits = [x["scored"]["bits"] for x in layers]
    below = [x["diff_vs_init"]["hi"] < 0 for x in layers]
    red = r["reduction_first_to_last"]
    verdict = HOLDS if red >= 0.1 and below[-1] else PARTLY if any(below) else NO
    path = " → ".join(f"{b:.2f}" for b in bits)
    return (f"scored-row entropy by layer {path} bits (uniform {r['uniform_bits_scored']:.2f}); "
            f"{sum(below)}/{len(below)} layers below step 0", verdict)


def mamba_clusters(r: dict[str, Any]) -> tuple[str, str]:
    c = r["trained"].get("clusters")
    if c is None:
        return "no clustering (labels missing)", NO
    p, p0, p_init = c["purity"], c["purity_null"], r["init"].get("clusters", {}).get("purity")
    verdict = HOLDS if p >= 0.8 else PARTLY if p >= p0 + 0.1 else NO
    init = f", step 0 {p_init:.2f}" if p_init is not None else ""
    return (f"k = {r['k']}: purity {p:.2f} (permuted labels {p0:.2f}{init}), "
            f"entropy probe R² {r['trained']['probe']['r2']:.2f}"), verdict


#: Paper I's layer-0 key statistic relative to random weights (0.052 against 0.082, summary C of v3)
PAPER_KEY_RATIO = 0.052 / 0.082
KEY_FRAME_STUDY = "docs/results/keyframe.md"


def key_frame(r: dict[str, Any]) -> tuple[str, str]:
    raw, centred = (r["variants"][v]["layers"][0] for v in ("tokens_raw", "tokens_centred"))
    m, rand, p = raw["mean"], raw["random_mean"], raw["test_vs_random"]["p"]
    c, c_rand = centred["mean"], centred["random_mean"]
    verdict = HOLDS if p < 0.05 and m <= PAPER_KEY_RATIO * rand else PARTLY if p < 0.05 else NO
    # collinear raw keys whose centred keys sit near their random value: one direction every key shares
    shared = m - rand >= 0.1 and c - c_rand < (m - rand) / 4
    reading = "; the excess is a direction all the keys share" if shared else ""
    return (f"layer-0 keys of {r['tokens']}: mean |cos| {m:.3f} (random {rand:.3f}, step 0 {raw['init_mean']:.3f}; "
            f"centred {c:.3f}, random {c_rand:.3f}{reading}); why: {KEY_FRAME_STUDY}"), verdict


def frame_head(r: dict[str, Any]) -> tuple[str, str]:
    fh = r["frame_head"]
    top = next(h for h in r["heads"] if h["name"] == fh["name"])
    single = fh["ratio_to_second"] >= 2
    verdict = HOLDS if single and top["ratio"] >= 2 else PARTLY if single else NO
    return (f"top head {fh['name']}: error ×{top['ratio']:.2f}, {fh['ratio_to_second']:.2f}× the runner-up's damage, "
            f"{fh['n_heads_at_least_half']} head(s) at half of it or more"), verdict


def top_attention_length(r: dict[str, Any]) -> tuple[str, str]:
    h = r.get("hmm_top_attention")
    if h is None:
        return "not measured (not an HMM run)", NO
    ratios = {int(K): x["ratio"] for K, x in h["lengths"].items() if "ratio" in x}
    if len(ratios) < 2:
        return "needs two lengths (train with eval.lengths including 50)", NO
    short, long = ratios[min(ratios)], ratios[max(ratios)]
    verdict = HOLDS if long >= 2 * short else PARTLY if long > short else NO
    parts = ", ".join(f"×{v:.1f} at K = {k}" for k, v in sorted(ratios.items()))
    return f"attention off in layers {h['layers']}: entropy error {parts}", verdict


CLAIMS = (
    Claim("HMM value manifold", "PC1 > 80% of the variance (84-90%), ordered by H_Bayes", "hmm", "transformer",
          "value_manifold", value_manifold),
    Claim("attention focusing", "attention entropy falls layer by layer", "hmm", "transformer", "attention",
          attention_focusing),
    Claim("attention focusing (bijection)", "attention entropy falls layer by layer", "bijection", "transformer",
          "attention", attention_focusing),
    Claim("layer-0 key frame (bijection)", "keys of the hypothesis tokens more orthogonal than random: |cos| 0.052 "
          "against 0.082", "bijection", "transformer", "key_frame", key_frame),
    Claim("frame head (bijection)", "removing one layer-0 head is catastrophic; no other head comes close",
          "bijection", "transformer", "ablation", frame_head),
    Claim("Mamba's five clusters on HMM", "5 clusters, one per hidden state; entropy R² 0.40", "hmm", "mamba",
          "recurrent", mamba_clusters),
    Claim("top-layer attention and length", "removing it: 0.0288 → 1.79 bits at K = 50 (×62)", "hmm", "transformer",
          "ablation", top_attention_length),
)


def check(diagnostics: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, str]]:
    """One row per claim whose run was diagnosed: ``diagnostics`` maps (task, model) to the
    ``results`` of that run's ``diagnostics.json``."""
    rows = []
    for c in CLAIMS:
        res = diagnostics.get((c.task, c.model), {}).get(c.analysis)
        if res is None:
            continue
        measured, verdict = c.judge(res)
        rows.append({"claim": c.name, "paper": c.paper, "run": f"{c.task} {c.model}", "measured": measured,
                     "verdict": verdict})
    return rows
