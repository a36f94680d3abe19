"""Paper III's claims judged per model against the same architecture at initialisation.

A claim is about learned geometry, so a verdict must separate a trained model from an untrained
one. Each rule reads the model's ``llm.json`` and its controls' (:mod:`windtunnel.llm.control`:
the ``init_revision`` checkpoint, else re-initialisations from the model's own config), and judges
two parts:

- **the control**: the trained value beyond the control's: the 95% interval of the difference
  clears the smallest difference that counts (``Thresholds.control_share`` for shares, ``control_cos``
  for |cos|, ``control_rho`` for SULA's correlations; a difference below it, however certain, is
  no learned geometry: a random network's attention is uniform to a few millionths);
- **the paper's criterion** (§4.4, or the authors' config where the paper gives none).

Verdicts: **holds** (control beaten and criterion met), **partly** (control beaten, criterion not
met), **does not hold** (control not beaten: whatever the criterion says, an untrained network
does as well), **not testable** (with the reason: no control, or a precondition such as a
calibrated model), **not measured** (the analysis did not run). Per claim:

- value manifold: PC1 and PC1+PC2 of the mixed set's final-layer values, each above the control's
  (bootstrap replicates over prompts, the controls' pooled, so the value dimension cancels);
  criterion PC1 or PC1+PC2 > ``manifold_pc`` (0.30).
- key orthogonality: mean |cos| of the W_K columns below the control's, paired by layer and head
  (bootstrap over the heads of every layer); criterion: below ``key_orth_max`` in half the layers.
- focusing: the relative entropy drop first to last layer above the control's (replicates over
  prompts); criterion > ``focusing_min`` (0.30).
- domain restriction: the gain math - mixed of PC1+PC2 above the control's (the two sets resampled
  independently); criterion math PC1+PC2 >= :data:`DR_COLLAPSE`.
- SULA: only for a model whose entropy reads the labels (MAE below the best constant's and a
  positive within-k Spearman(H_model, H_Bayes), p < 0.01), else it does not hold. Control: the
  within-k (partial) Spearman of PC1 with -H_Bayes, and PC1's separation of the main prompts from
  the shuffled and label-ablation prompts at equal k, each above the control's (paired bootstrap
  over the same prompts). Criterion: |Spearman(PC1, H_Bayes)| >= :data:`SULA_RHO`, p < 0.01.
- entropy axis: testable only where the model is calibrated beyond the best constant predictor.
  Control: the true-axis cut's change of the downstream axis-entropy correlation below the 5%
  quantile of ``n_random_axes`` random-axis cuts; criterion: that change <= -:data:`GEOMETRY_DROP`
  and the calibration barely moves (|ΔMAE| <= :data:`CALIBRATION_TOLERANCE` bits).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from windtunnel.llm.config import Thresholds
from windtunnel.llm.headline import get, headline
from windtunnel.llm.sula import within_k
from windtunnel.tables import f, pct

#: the paper's "PC1+PC2 ~ 70-95%" after domain restriction: its lower end
DR_COLLAPSE = 0.70
#: |Spearman(PC1, H_Bayes)| the authors' config expects ("PC1-entropy correlation: > 0.5")
SULA_RHO = 0.5
#: drop in the downstream axis-entropy correlation that counts as destroying the local geometry
GEOMETRY_DROP = 0.10
#: |change of SULA calibration MAE| (bits) that counts as "barely moves"
CALIBRATION_TOLERANCE = 0.02
#: the random-cut quantile the true cut must fall below
RANDOM_AXIS_QUANTILE = 0.05
#: seed of the pooling and pairing of bootstrap replicates
SEED = 0

VERDICTS = ("holds", "partly", "does not hold", "not testable", "not measured")
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


# --- intervals ---------------------------------------------------------------------------------

def _q(x: np.ndarray) -> list[float]:
    return [float(np.quantile(x, 0.025)), float(np.quantile(x, 0.975))]


def difference(trained: list[float], controls: list[list[float]], seed: int = SEED) -> list[float] | None:
    """95% interval of trained - control from bootstrap replicates drawn independently: the
    trained replicates in a seeded order against replicates pooled over the controls (one control
    after another, each in its own seeded order), so that the controls' spread joins the interval."""
    a = np.asarray([np.nan if v is None else v for v in trained or []], dtype=float)
    cs = [np.asarray([np.nan if v is None else v for v in c], dtype=float) for c in controls if c]
    if a.size == 0 or not cs:
        return None
    rng = np.random.default_rng(seed)
    n = min(a.size, min(c.size for c in cs))
    pooled = np.stack([c[rng.permutation(c.size)[:n]] for c in cs], 1).reshape(-1)  # c0 c1 .. c0 c1 ..
    d = a[rng.permutation(a.size)[:n]] - pooled[rng.permutation(pooled.size)[:n]]
    d = d[np.isfinite(d)]
    return _q(d) if d.size else None


def paired_units(trained: np.ndarray, control: np.ndarray, n_boot: int, seed: int = SEED) -> list[float]:
    """95% bootstrap interval of the mean of ``trained - control`` over paired units (resampled whole)."""
    d = np.asarray(trained, dtype=float) - np.asarray(control, dtype=float)
    rng = np.random.default_rng(seed)
    return _q(d[rng.integers(0, d.size, (n_boot, d.size))].mean(1))


def _separation(main: np.ndarray, mk: np.ndarray, other: np.ndarray, ok: np.ndarray) -> float:
    """Mean over k > 0 of (mean main - mean other at that k) / the pooled SD at that k."""
    vals = []
    for k in np.unique(mk[mk > 0]):
        a, b = main[mk == k], other[ok == k]
        sd = np.concatenate([a, b]).std()
        if a.size and b.size and sd > 0:
            vals.append((a.mean() - b.mean()) / sd)
    return float(np.mean(vals)) if vals else float("nan")


# --- the two parts and the verdict ---------------------------------------------------------------

def _verdict(beaten: bool | None, criterion: bool | None, why: str | None = None) -> str:
    if why:
        return "not testable"
    return "holds" if beaten and criterion else "partly" if beaten else "does not hold"


def _claim(name: str, beaten, criterion, measured: str, control: str, paper: str = "-", rests_on: str = "-",
           why: str | None = None, verdict: str | None = None, **numbers) -> dict[str, Any]:
    return {"claim": name, "verdict": verdict or _verdict(beaten, criterion, why), "control_beaten": beaten,
            "criterion_met": criterion, "measured": measured, "control": control, "rests_on": rests_on,
            "reason": why, "paper": paper, **numbers}


def _not_measured(name: str) -> dict[str, Any]:
    return _claim(name, None, None, "-", "-", verdict="not measured")


def _no_control(name: str, criterion, measured: str, paper: str) -> dict[str, Any]:
    return _claim(name, None, criterion, measured, "-", paper,
                  why="no control: the model was run with control off (the model at initialisation is its reference)")


def control_description(controls: list[dict]) -> str:
    """Which control a verdict rests on, in words."""
    if not controls:
        return "-"
    m = controls[0]["model"]
    if m.get("revision") is not None and m.get("reinit_seed") is None:
        return f"checkpoint {m['revision']}"
    seeds = [c["model"].get("reinit_seed") for c in controls]
    return f"re-initialised from its config ({len(seeds)} seed{'s' if len(seeds) > 1 else ''}: {', '.join(map(str, seeds))})"


def _boot(doc: dict, which: str, key: str) -> list[float] | None:
    r = doc.get("results", {})
    vm = r.get("value_manifold") if which == "mixed" else get(r, "domain_restriction", "math")
    if vm is None and which == "mixed":
        vm = get(r, "domain_restriction", "mixed")
    return get(vm, "final_bootstrap", key)


def _value_manifold(doc, row, controls, c_rows, crit, paper, on, margin) -> dict[str, Any]:
    if row["mixed_pc1_pc2"] is None:
        return _not_measured("value_manifold")
    measured = (f"PC1 {pct(row['mixed_pc1'])}, PC1+PC2 {pct(row['mixed_pc1_pc2'])} "
                f"(bootstrap mean {pct(row['mixed_pc1_pc2_boot'])})")
    criterion = get(crit, "value_manifold", "pass")
    p = paper_text(paper.get("mixed_pc1_pc2"))
    if not controls:
        return _no_control("value_manifold", criterion, measured, p)
    ci1 = difference(_boot(doc, "mixed", "pc1"), [_boot(c, "mixed", "pc1") for c in controls])
    ci12 = difference(_boot(doc, "mixed", "pc1_pc2"), [_boot(c, "mixed", "pc1_pc2") for c in controls])
    if ci1 is None or ci12 is None:
        return _claim("value_manifold", None, criterion, measured, "-", p, on, why="no bootstrap replicates recorded")
    beaten = ci1[0] > margin and ci12[0] > margin
    text = (f"control PC1+PC2 {pct(np.mean([r['mixed_pc1_pc2'] for r in c_rows]))}; trained - control: PC1 "
            f"[{pct(ci1[0])}, {pct(ci1[1])}], PC1+PC2 [{pct(ci12[0])}, {pct(ci12[1])}]")
    return _claim("value_manifold", beaten, criterion, measured, text, p, on, diff_pc1_ci=ci1, diff_pc1_pc2_ci=ci12)


def _key_orthogonality(doc, row, controls, crit, paper, on, n_boot, margin) -> dict[str, Any]:
    if row["key_orth_mean"] is None:
        return _not_measured("key_orthogonality")
    measured = (f"mean {f(row['key_orth_mean'], '.3f')} (early {f(row['key_orth_early'], '.3f')}); "
                f"{pct(row['key_orth_frac_below'])} of layers < {row['key_orth_threshold']}")
    criterion = get(crit, "key_orthogonality", "pass")
    p = paper_text(paper.get("key_orth_early"), share=False)
    if not controls:
        return _no_control("key_orthogonality", criterion, measured, p)

    def heads(d):
        return np.concatenate([np.atleast_1d(x["per_head"]) for x in d["results"]["key_orthogonality"]["layers"]])

    t = heads(doc)
    cs = [heads(c) for c in controls]
    if any(c.shape != t.shape for c in cs):
        return _claim("key_orthogonality", None, criterion, measured, "-", p, on,
                      why="the control has another number of heads")
    c = np.mean(cs, 0)
    ci = paired_units(t, c, n_boot)
    text = (f"control mean {f(float(c.mean()), '.3f')}; trained - control over {t.size} heads "
            f"[{f(ci[0], '+.4f')}, {f(ci[1], '+.4f')}]")
    return _claim("key_orthogonality", ci[1] < -margin, criterion, measured, text, p, on, diff_ci=ci)


def _focusing(doc, row, controls, c_rows, crit, paper, on, margin) -> dict[str, Any]:
    if row["focusing"] is None:
        return _not_measured("focusing")
    measured = f"{pct(row['focusing'])} [{pct(row['focusing_lo'])}, {pct(row['focusing_hi'])}]"
    criterion = get(crit, "attention_focusing", "pass")
    p = paper_text(paper.get("focusing"))
    if not controls:
        return _no_control("focusing", criterion, measured, p)
    key = ("results", "attention_focusing", "focusing", "bootstrap", "relative_drop")
    ci = difference(get(doc, *key), [get(c, *key) for c in controls])
    if ci is None:
        return _claim("focusing", None, criterion, measured, "-", p, on, why="no bootstrap replicates recorded")
    ctl = np.mean([r["focusing"] for r in c_rows])
    text = f"control {pct(ctl)}; trained - control [{pct(ci[0])}, {pct(ci[1])}]"
    return _claim("focusing", ci[0] > margin, criterion, measured, text, p, on, diff_ci=ci)


def _gain_reps(doc: dict, seed: int = SEED) -> list[float] | None:
    a, b = _boot(doc, "mixed", "pc1_pc2"), _boot(doc, "math", "pc1_pc2")
    if not a or not b:
        return None
    rng = np.random.default_rng(seed)
    n = min(len(a), len(b))
    return (np.asarray(b)[rng.permutation(len(b))[:n]] - np.asarray(a)[rng.permutation(len(a))[:n]]).tolist()


def _domain_restriction(doc, row, controls, c_rows, paper, on, margin) -> dict[str, Any]:
    if row["math_pc1_pc2"] is None or row["dr_gain"] is None:
        return _not_measured("domain_restriction")
    measured = (f"math PC1+PC2 {pct(row['math_pc1_pc2'])}; gain {pct(row['dr_gain'])} "
                f"[{pct(row['dr_gain_lo'])}, {pct(row['dr_gain_hi'])}]")
    criterion = row["math_pc1_pc2"] >= DR_COLLAPSE
    p = paper_text(paper.get("math_pc1_pc2"))
    if not controls:
        return _no_control("domain_restriction", criterion, measured, p)
    ci = difference(_gain_reps(doc), [_gain_reps(c) for c in controls])
    if ci is None:
        return _claim("domain_restriction", None, criterion, measured, "-", p, on, why="no bootstrap replicates recorded")
    ctl = np.mean([r["dr_gain"] for r in c_rows])
    text = f"control gain {pct(ctl)}; trained - control [{pct(ci[0])}, {pct(ci[1])}]"
    return _claim("domain_restriction", ci[0] > margin, criterion, measured, text, p, on, diff_ci=ci)


def calibrated(row: dict[str, Any]) -> tuple[bool, str]:
    """Does the model's SULA entropy read the labels: MAE below the best constant predictor's and a
    positive within-k Spearman(H_model, H_Bayes) with p < 0.01. (The answer, and why.)"""
    from windtunnel.llm.sula import reads_labels

    mae, const, wk, wk_p = (row.get(k) for k in ("sula_mae", "sula_constant_mae", "sula_within_k_spearman",
                                                  "sula_within_k_p"))
    if mae is None or const is None:
        return False, "no SULA calibration measured"
    ok = reads_labels(mae, const, wk, wk_p)
    why = (f"MAE {f(mae, '.3f')} against the best constant's {f(const, '.3f')}; within-k rho(H_model, H_Bayes) "
           f"{f(wk, '+.2f')} (p {f(wk_p, '.1g')})")
    return ok, why


def sula_statistics(doc: dict) -> dict[str, np.ndarray] | None:
    """What the SULA claim reads per prompt: k, H_Bayes, PC1 (own basis) and, in the shared basis of
    every condition, the main prompts' PC1 and the shuffled and label-ablation prompts' (with k)."""
    su = get(doc, "results", "sula")
    pp = get(su, "per_prompt") or {}
    if not pp.get("pc1"):
        return None
    out = {k: np.asarray(pp[k], dtype=float) for k in ("k", "h_bayes", "pc1")}
    shared = get(su, "shared_per_prompt") or {}
    for cond in ("main", "shuffled", "ablation_labels"):
        if cond in shared:
            out[f"{cond}_pc1"], out[f"{cond}_k"] = (np.asarray(shared[cond][x], dtype=float) for x in ("pc1", "k"))
    return out


def _sula_values(s: dict[str, np.ndarray], idx: dict[str, np.ndarray]) -> dict[str, float]:
    """The SULA control statistics on one resample (``idx``: the rows of each condition)."""
    i = idx["main"]
    out = {"within_k": within_k(s["pc1"][i], -s["h_bayes"][i], s["k"][i])[0]}
    for cond in ("shuffled", "ablation_labels"):
        if f"{cond}_pc1" in s and "main_pc1" in s:
            j = idx[cond]
            out[cond] = _separation(s["main_pc1"][i], s["main_k"][i], s[f"{cond}_pc1"][j], s[f"{cond}_k"][j])
    return out


def _strata(ks: np.ndarray, rng) -> np.ndarray:
    return np.concatenate([rng.choice(np.flatnonzero(ks == k), (ks == k).sum()) for k in np.unique(ks)])


def sula_differences(doc: dict, controls: list[dict], n_boot: int, seed: int = SEED) -> dict[str, Any] | None:
    """Trained - control of each SULA control statistic, with 95% intervals: the same prompts
    resampled within each k for the model and every control (the prompts are identical: same
    tokenizer, seed and labels), the controls' values averaged."""
    s = sula_statistics(doc)
    cs = [sula_statistics(c) for c in controls]
    if s is None or any(c is None for c in cs):
        return None
    if any(c["h_bayes"].shape != s["h_bayes"].shape or not np.allclose(c["h_bayes"], s["h_bayes"]) for c in cs):
        return None
    full = {"main": np.arange(s["k"].size)} | {c: np.arange(s[f"{c}_k"].size) for c in ("shuffled", "ablation_labels")
                                               if f"{c}_k" in s}
    point_t = _sula_values(s, full)
    point_c = [_sula_values(c, full) for c in cs]
    rng = np.random.default_rng(seed)
    reps: dict[str, list[float]] = {k: [] for k in point_t}
    for _ in range(n_boot):
        idx = {"main": _strata(s["k"], rng)} | {c: _strata(s[f"{c}_k"], rng) for c in full if c != "main"}
        t = _sula_values(s, idx)
        cv = [_sula_values(c, idx) for c in cs]
        for k in reps:
            reps[k].append(t[k] - np.mean([v[k] for v in cv]))
    out = {}
    for k in reps:
        r = np.asarray(reps[k])
        r = r[np.isfinite(r)]
        out[k] = {"trained": point_t[k], "control": float(np.mean([v[k] for v in point_c])),
                  "ci": _q(r) if r.size else None}
    return out


def _sula(doc, row, controls, paper, on, n_boot, margin) -> dict[str, Any]:
    if row["sula_mae"] is None:
        return _not_measured("sula")
    rho, p_rho = row["sula_spearman_pc1_h_bayes"], row["sula_spearman_p"]
    criterion = rho is not None and abs(rho) >= SULA_RHO and p_rho is not None and p_rho < 0.01
    measured = (f"|rho(PC1, H_Bayes)| {f(abs(rho) if rho is not None else None, '.2f')}; rho(k, PC1) "
                f"{f(row['sula_rho_k_pc1'], '+.2f')}; MAE {f(row['sula_mae'], '.3f')} bits")
    p = f"MAE {paper_text(paper.get('sula_mae'), share=False)} bits" if paper.get("sula_mae") else "-"
    ok, why = calibrated(row)
    if not ok:
        return _claim("sula", None, criterion, measured, f"the entropy does not read the labels: {why}", p, on,
                      verdict="does not hold")
    if not controls:
        return _no_control("sula", criterion, measured, p)
    d = sula_differences(doc, controls, n_boot)
    if d is None or any(v["ci"] is None for v in d.values()) or len(d) < 3:
        return _claim("sula", None, criterion, measured, "-", p, on,
                      why="the control's SULA prompts or its shuffled and label-ablation conditions are missing")
    beaten = all(v["ci"][0] > margin for v in d.values())
    names = {"within_k": "within-k rho(PC1, -H_Bayes)", "shuffled": "separation from shuffled",
             "ablation_labels": "separation from label ablation"}
    text = "; ".join(f"{names[k]} {f(v['trained'], '+.2f')} vs control {f(v['control'], '+.2f')} "
                     f"[{f(v['ci'][0], '+.2f')}, {f(v['ci'][1], '+.2f')}]" for k, v in d.items())
    return _claim("sula", beaten, criterion, measured, f"{why}; {text}", p, on, differences=d)


def _entropy_axis(doc, row, paper) -> dict[str, Any]:
    if row["iv_true_dmae"] is None:
        return _not_measured("entropy_axis")
    tg = row["iv_true_dgeometry"]
    measured = (f"layers {row['iv_layers']}: Δcorr downstream true {f(tg, '+.3f')}; ΔMAE true "
                f"{f(row['iv_true_dmae'], '+.4f')} bits")
    criterion = tg is not None and tg <= -GEOMETRY_DROP and abs(row["iv_true_dmae"]) <= CALIBRATION_TOLERANCE
    p = paper_text(paper.get("entropy_axis"))
    ok, why = calibrated(row)
    if not ok:
        return _claim("entropy_axis", None, criterion, measured, "-", p, "-",
                      why=f"the model is not calibrated beyond the best constant predictor ({why}): cutting its "
                          "entropy axis cannot show that calibration survives")
    dist = [v for v in (row.get("iv_random_dgeometry_all") or []) if v is not None]
    if tg is None or not dist:
        return _claim("entropy_axis", None, criterion, measured, "-", p, "-",
                      why="no random-axis distribution at a layer set with layers downstream (n_random_axes = 0, "
                          "or every layer set ends at the last layer)")
    q = float(np.mean(np.asarray(dist) <= tg))
    text = (f"true cut at quantile {q:.2f} of {len(dist)} random cuts (Δcorr {f(float(np.min(dist)), '+.3f')} to "
            f"{f(float(np.max(dist)), '+.3f')})")
    return _claim("entropy_axis", q < RANDOM_AXIS_QUANTILE, criterion, measured, text, p,
                  f"{len(dist)} random axes", quantile=q)


def judge(doc: dict, controls: list[dict]) -> list[dict[str, Any]]:
    """Every claim of :data:`CLAIMS` for one model's ``llm.json`` (``doc``) against its controls'."""
    row = headline(doc)
    crit = doc.get("criteria", {})
    paper = paper_entry(doc["model"]["name"]) or {}
    on = control_description(controls)
    n_boot = doc.get("options", {}).get("n_bootstrap", 1000)
    t = {**Thresholds().model_dump(), **doc.get("options", {}).get("thresholds", {})}
    share, cos, rho = t["control_share"], t["control_cos"], t["control_rho"]
    c_rows = [headline(c) for c in controls]
    return [_value_manifold(doc, row, controls, c_rows, crit, paper, on, share),
            _key_orthogonality(doc, row, controls, crit, paper, on, n_boot, cos),
            _focusing(doc, row, controls, c_rows, crit, paper, on, share),
            _domain_restriction(doc, row, controls, c_rows, paper, on, share),
            _sula(doc, row, controls, paper, on, n_boot, rho),
            _entropy_axis(doc, row, paper)]
