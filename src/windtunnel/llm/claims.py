"""Paper III's claims judged per model: holds, partly, or does not hold, each against its null.

Each rule reads one model's headline row (:func:`~windtunnel.llm.headline.headline`) and the
criteria its ``llm.json`` already judged; nothing is recomputed. A claim (:data:`CLAIMS`) has two
parts, the paper's criterion and a null the measurement must beat; both met = **holds**, one =
**partly**, neither = **does not hold**; an analysis that did not run = **not measured**. Per
claim, the criterion; the null:

- value manifold: Paper III §4.4, PC1 or PC1+PC2 > ``manifold_pc`` (0.30) on the mixed set;
  PC1+PC2 above the column-permutation null's 95th percentile.
- key orthogonality: §4.4, mean |cos| < ``key_orth_max`` in half the layers; the trained mean
  below the model at initialisation (``init_revision``, else the family's initialiser).
- focusing: §4.4, entropy drop first to last layer > ``focusing_min`` (0.30); its 95% interval > 0.
- domain restriction: math PC1+PC2 >= :data:`DR_COLLAPSE`; the gain math - mixed, 95% interval > 0.
- SULA: |Spearman(PC1, H_Bayes)| >= :data:`SULA_RHO` with p < 0.01; the entropy reads the labels:
  within-k Spearman(H_model, H_Bayes) > 0 with p < 0.01, and MAE below the best constant's (why:
  docs/llm.md, "Shipped comparisons").
- entropy axis: the axis cut lowers the downstream axis-entropy correlation by >= :data:`GEOMETRY_DROP`
  and more than a random cut does; the true cut's |ΔMAE| <= :data:`CALIBRATION_TOLERANCE` bits.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from windtunnel.tables import f, pct

#: the paper's "PC1+PC2 ~ 70-95%" after domain restriction: its lower end
DR_COLLAPSE = 0.70
#: |Spearman(PC1, H_Bayes)| the authors' config expects ("PC1-entropy correlation: > 0.5")
SULA_RHO = 0.5
#: drop in the downstream axis-entropy correlation that counts as destroying the local geometry
GEOMETRY_DROP = 0.10
#: |change of SULA calibration MAE| (bits) that counts as "barely moves"
CALIBRATION_TOLERANCE = 0.02

VERDICTS = ("holds", "partly", "does not hold", "not measured")
CLAIMS = ("value_manifold", "key_orthogonality", "focusing", "domain_restriction", "sula", "entropy_axis")


@lru_cache(maxsize=1)
def paper_values() -> dict[str, Any]:
    """``data/paper3_values.json``: the paper's numbers per model (by hub id) and its claims."""
    return json.loads((resources.files("windtunnel") / "data" / "paper3_values.json").read_text())


def paper_entry(model_name: str) -> dict[str, Any] | None:
    """The paper's values for a model named by its hub id (case-insensitive), else None."""
    models = {k.lower(): v for k, v in paper_values()["models"].items()}
    return models.get(model_name.strip().lower())


def paper_text(value: Any, share: bool = True) -> str:
    """A paper value as printed: a share as 99.7% (or a range 15.0%-20.0%), a number as 0.11-0.13,
    or the paper's word where it gives no number."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    fmt = pct if share else (lambda v: f"{v:g}")
    return "-".join(fmt(v) for v in value) if isinstance(value, list) else fmt(value)


def _verdict(criterion: bool | None, null: bool | None) -> str:
    if criterion is None and null is None:
        return "not measured"
    return {2: "holds", 1: "partly", 0: "does not hold"}[int(bool(criterion)) + int(bool(null))]


def _claim(name: str, criterion, null, measured: str, against: str, paper: str = "-") -> dict[str, Any]:
    return {"claim": name, "verdict": _verdict(criterion, null), "criterion_met": criterion, "null_beaten": null,
            "measured": measured, "null": against, "paper": paper}


def _ok(x) -> bool:
    return x is not None


def judge(row: dict[str, Any], criteria: dict[str, Any], model_name: str) -> list[dict[str, Any]]:
    """Every claim of :data:`CLAIMS` for one model (``row``: its headline; ``criteria``: its
    ``llm.json`` criteria)."""
    paper = paper_entry(model_name) or {}
    out = []
    r, c = row, criteria
    if _ok(r["mixed_pc1_pc2"]):
        out.append(_claim("value_manifold", c.get("value_manifold", {}).get("pass"), r["mixed_pc1_pc2"] > r["mixed_perm_q95"],
                          f"PC1 {pct(r['mixed_pc1'])}, PC1+PC2 {pct(r['mixed_pc1_pc2'])}",
                          f"permutation q95 {pct(r['mixed_perm_q95'])}", paper_text(paper.get("mixed_pc1_pc2"))))
    else:
        out.append(_claim("value_manifold", None, None, "-", "-"))
    if _ok(r["key_orth_mean"]):
        init = _ok(r["key_null_init"])
        ref, ref_name = (r["key_null_init"], "at init") if init else (r["key_null_gaussian_q05"], "Gaussian q05")
        out.append(_claim("key_orthogonality", c.get("key_orthogonality", {}).get("pass"), r["key_orth_mean"] < ref,
                          f"mean {f(r['key_orth_mean'], '.3f')} (early {f(r['key_orth_early'], '.3f')}); "
                          f"{pct(r['key_orth_frac_below'])} of layers < {r['key_orth_threshold']}",
                          f"{ref_name} {f(ref, '.3f')}", paper_text(paper.get("key_orth_early"), share=False)))
    else:
        out.append(_claim("key_orthogonality", None, None, "-", "-"))
    if _ok(r["focusing"]):
        out.append(_claim("focusing", c.get("attention_focusing", {}).get("pass"), _ok(r["focusing_lo"]) and r["focusing_lo"] > 0,
                          f"{pct(r['focusing'])} [{pct(r['focusing_lo'])}, {pct(r['focusing_hi'])}]; monotone steps "
                          f"{pct(r['monotone_fraction'])}", "no drop (interval above 0)", paper_text(paper.get("focusing"))))
    else:
        out.append(_claim("focusing", None, None, "-", "-"))
    if _ok(r["math_pc1_pc2"]) and _ok(r["dr_gain"]):
        out.append(_claim("domain_restriction", r["math_pc1_pc2"] >= DR_COLLAPSE, _ok(r["dr_gain_lo"]) and r["dr_gain_lo"] > 0,
                          f"math PC1+PC2 {pct(r['math_pc1_pc2'])}; gain {pct(r['dr_gain'])} "
                          f"[{pct(r['dr_gain_lo'])}, {pct(r['dr_gain_hi'])}]", "no gain (interval above 0)",
                          paper_text(paper.get("math_pc1_pc2"))))
    else:
        out.append(_claim("domain_restriction", None, None, "-", "-"))
    if _ok(r["sula_mae"]):
        rho, p = r["sula_spearman_pc1_h_bayes"], r["sula_spearman_p"]
        aligned = _ok(rho) and abs(rho) >= SULA_RHO and _ok(p) and p < 0.01
        const, wk, wk_p = r.get("sula_constant_mae"), r.get("sula_within_k_spearman"), r.get("sula_within_k_p")
        if _ok(const) and _ok(wk):
            null = wk > 0 and _ok(wk_p) and wk_p < 0.01 and r["sula_mae"] < const
            against = (f"within-k rho(H_model, H_Bayes) {f(wk, '+.2f')} (p {f(wk_p, '.1g')}); best constant MAE "
                       f"{f(const, '.3f')} (count-only {f(r.get('sula_count_mae'), '.3f')})")
        else:  # a headline without the prompts: the 1-bit predictor alone
            null, against = r["sula_mae"] < r["sula_uniform_mae"], f"1-bit predictor MAE {f(r['sula_uniform_mae'], '.3f')}"
        out.append(_claim("sula", aligned, null,
                          f"|rho(PC1, H_Bayes)| {f(abs(rho) if _ok(rho) else None, '.2f')}; MAE {f(r['sula_mae'], '.3f')} bits",
                          against,
                          f"MAE {paper_text(paper.get('sula_mae'), share=False)} bits" if paper.get("sula_mae") else "-"))
    else:
        out.append(_claim("sula", None, None, "-", "-"))
    if _ok(r["iv_true_dmae"]):
        tg, rg = r["iv_true_dgeometry"], r["iv_random_dgeometry"]
        geo = _ok(tg) and tg <= -GEOMETRY_DROP and (not _ok(rg) or tg < rg)
        out.append(_claim("entropy_axis", geo, abs(r["iv_true_dmae"]) <= CALIBRATION_TOLERANCE,
                          f"layers {r['iv_layers']}: Δcorr downstream true {f(tg, '+.3f')} vs random {f(rg, '+.3f')}; "
                          f"ΔMAE true {f(r['iv_true_dmae'], '+.4f')} vs random {f(r['iv_random_dmae'], '+.4f')} bits",
                          f"|ΔMAE| <= {CALIBRATION_TOLERANCE} bits", paper_text(paper.get("entropy_axis"))))
    else:
        out.append(_claim("entropy_axis", None, None, "-", "-"))
    return out
