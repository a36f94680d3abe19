"""The intervals Paper III's claims are judged by (:mod:`windtunnel.llm.claims`): a model's bootstrap
replicates against its controls' (:func:`difference`), paired units such as heads
(:func:`paired_units`), and the SULA claim's control statistics on the same prompts resampled
within each k (:func:`sula_differences`). Every interval is the central 95%; every resample is
seeded (:data:`SEED`), so a verdict is the same on every machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from windtunnel.llm.headline import get
from windtunnel.llm.sula_prompts import within_k

#: seed of the pooling and pairing of bootstrap replicates
SEED = 0


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
        if cond in idx and f"{cond}_pc1" in s and "main_pc1" in s:
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
    # a condition is compared where the model and every control ran it (else its claim is not testable)
    full = {"main": np.arange(s["k"].size)} | {c: np.arange(s[f"{c}_k"].size) for c in ("shuffled", "ablation_labels")
                                               if all(f"{c}_k" in x and f"{c}_pc1" in x and "main_pc1" in x for x in (s, *cs))}
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
