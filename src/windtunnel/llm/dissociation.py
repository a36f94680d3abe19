"""Paper III's dissociation as a test: does attention focusing differ between the multi-head (MHA)
models of a comparison and the grouped-query or sliding-window (GQA/SW) ones?

The effect is the difference of the group means, MHA minus GQA/SW, of a focusing summary of each
model's ``llm.json`` (:data:`METRICS`; :data:`PRIMARY`, the relative entropy drop first to last
layer, is the paper's measure). Two uncertainties answer two questions:

- **Across prompts** (these models): each model's bootstrap replicates (kept in its ``llm.json``)
  give a replicate of the difference, each model's replicates put in an order drawn with
  :data:`SEED` before pairing; its 2.5-97.5 percentiles are the interval. It cannot separate attention type from
  everything else the models differ in (data, size, training).
- **Across models** (the architectures): an exact permutation test of the group labels (every
  split with the same group sizes; two-sided, |difference| at least the observed). Its p cannot go
  below ``p_min``, the share of splits at least as extreme as the most extreme one; when ``p_min`` is
  above ``alpha``, or a side has under :data:`MIN_PER_SIDE` models, it says: too few models to conclude.

Only trained models are sides: random-weight models, and every model's control at
initialisation, say nothing about what training on an architecture yields. Why the replicates
are paired: docs/llm.md, "The dissociation, as a test".
"""

from __future__ import annotations

import itertools
from math import comb
from typing import Any

import numpy as np

METRICS = {"relative_drop": "relative entropy drop, first to last layer",
           "monotone_fraction": "fraction of layer steps in which entropy falls",
           "slope_bits_per_depth": "slope of entropy on depth (bits per unit depth; negative = focusing)"}
PRIMARY = "relative_drop"
MIN_PER_SIDE = 2
ALPHA = 0.05
SEED = 0  # the pairing of replicates across models
MAX_EXACT = 200_000  # splits enumerated exactly; beyond, a seeded Monte Carlo sample of this many


def _permutation(values: np.ndarray, n_a: int, seed: int) -> dict[str, Any]:
    """Two-sided permutation test of mean(first n_a) - mean(rest) over every split of ``values``."""
    n = len(values)
    total = comb(n, n_a)
    obs = values[:n_a].mean() - values[n_a:].mean()
    if total <= MAX_EXACT:
        splits = itertools.combinations(range(n), n_a)
        exact = True
    else:
        rng = np.random.default_rng(seed)
        splits = (rng.choice(n, n_a, replace=False) for _ in range(MAX_EXACT))
        exact = False
    s = values.sum()
    diffs = []
    for a in splits:
        sa = values[list(a)].sum()
        diffs.append(sa / n_a - (s - sa) / (n - n_a))
    d = np.abs(np.array(diffs))
    tol = 1e-12 * max(1.0, float(np.abs(values).max()))
    return {"p": float((d >= abs(obs) - tol).mean()), "p_min": float((d >= d.max() - tol).mean()),
            "n_splits": int(total), "exact": exact}


def _prompt_interval(a: list[list[float]], b: list[list[float]], seed: int) -> list[float] | None:
    """2.5-97.5 percentiles of the replicate differences of group means (replicates of each model
    in a seeded order; the shortest model's count)."""
    reps = a + b
    if any(not r for r in reps):
        return None
    n = min(len(r) for r in reps)
    rng = np.random.default_rng(seed)
    shuffled = [np.array([np.nan if v is None else v for v in r[:n]], dtype=float)[rng.permutation(n)] for r in reps]
    diff = np.mean(shuffled[: len(a)], 0) - np.mean(shuffled[len(a):], 0)
    diff = diff[np.isfinite(diff)]
    return [float(np.quantile(diff, 0.025)), float(np.quantile(diff, 0.975))] if diff.size else None


def group_test(models: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """The test on one focusing summary. ``models``: ``name``, ``group`` (MHA or GQA/SW),
    ``focusing`` (the summaries) and ``bootstrap`` (their replicates) of each model."""
    have = [m for m in models if m["focusing"].get(metric) is not None]
    a = [m for m in have if m["group"] == "MHA"]
    b = [m for m in have if m["group"] != "MHA"]
    out: dict[str, Any] = {"metric": metric, "meaning": METRICS[metric], "mha": [m["name"] for m in a],
                           "gqa_sw": [m["name"] for m in b]}
    if not a or not b:
        out.update(status="no test", conclusion=f"no test: no {'MHA' if not a else 'GQA/SW'} model with this measure")
        return out
    va = np.array([m["focusing"][metric] for m in a])
    vb = np.array([m["focusing"][metric] for m in b])
    out.update(mha_mean=float(va.mean()), gqa_sw_mean=float(vb.mean()), effect=float(va.mean() - vb.mean()))
    out["prompt_interval"] = _prompt_interval([m["bootstrap"].get(metric) or [] for m in a],
                                              [m["bootstrap"].get(metric) or [] for m in b], SEED)
    perm = _permutation(np.concatenate([va, vb]), len(va), SEED)
    out["permutation"] = perm
    lo_hi = out["prompt_interval"]
    prompts = ("no prompt-level interval (a model lacks bootstrap replicates)" if lo_hi is None else
               f"over prompts, 95% interval [{lo_hi[0]:+.3g}, {lo_hi[1]:+.3g}] "
               + ("excludes 0: these models differ beyond prompt noise" if lo_hi[0] > 0 or lo_hi[1] < 0
                  else "includes 0: these models do not differ beyond prompt noise"))
    if len(a) < MIN_PER_SIDE or len(b) < MIN_PER_SIDE:
        out["status"] = "too few models"
        models_text = (f"too few models on one side for a conclusion about the architectures ({len(a)} MHA, {len(b)} "
                       f"GQA/SW; at least {MIN_PER_SIDE} a side are needed to see the spread between models of one type)")
    elif perm["p_min"] > ALPHA:
        out["status"] = "too few models"
        models_text = (f"too few models for a conclusion about the architectures: with {len(a)} + {len(b)} models even "
                       f"the most extreme split gives p = {perm['p_min']:.3f} > {ALPHA}")
    else:
        out["status"] = "differs" if perm["p"] <= ALPHA else "no difference shown"
        models_text = (f"across models, permutation p = {perm['p']:.3f} ({perm['n_splits']} splits): focusing "
                       + ("differs between the groups" if perm["p"] <= ALPHA else "does not differ detectably")
                       + f" at {ALPHA}")
    out["conclusion"] = (f"MHA {out['mha_mean']:+.3g} vs GQA/SW {out['gqa_sw_mean']:+.3g}: effect {out['effect']:+.3g}; "
                         f"{prompts}; {models_text}")
    return out


def dissociation(models: list[dict[str, Any]]) -> dict[str, Any]:
    """The test on every focusing summary over the trained models (the caller leaves out
    random-weight models; controls are never a side); ``primary`` names the paper's measure."""
    return {"primary": PRIMARY, "alpha": ALPHA, "min_per_side": MIN_PER_SIDE,
            "trained": {k: group_test(models, k) for k in METRICS}}


def focusing_inputs(name: str, group: str, doc: dict) -> dict[str, Any] | None:
    """What :func:`group_test` needs of one model, read from its ``llm.json`` (None without focusing)."""
    fo = doc.get("results", {}).get("attention_focusing", {}).get("focusing")
    if not fo:
        return None
    return {"name": name, "group": group, "focusing": {k: fo.get(k) for k in METRICS},
            "bootstrap": {k: (fo.get("bootstrap") or {}).get(k) for k in METRICS}}
