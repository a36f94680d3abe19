"""Statistics the LLM analyses need beyond :mod:`windtunnel.stats`.

Reused from windtunnel.stats: ``standardise``, ``participation_ratio``, ``spearman``,
``mean_offdiag_abs_cosine``, ``gaussian_abs_cosine``, ``monte_carlo_test``. Added here:
eigenvalue-only PCA for n << d via the Gram matrix (fast enough for 1,000 bootstrap refits),
bootstrap intervals of PC shares and of means, the matched-(n, d) empirical PCA nulls
(isotropic Gaussian and column permutation), Pearson correlation with NaN for constant input,
and per-coordinate variance concentration.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import numpy as np

from windtunnel.stats import participation_ratio, pca_components, spearman, standardise
from windtunnel.stats import to_numpy as _np


def single_threaded_blas():
    """A context limiting BLAS to one thread: the thousands of small (n x n, n ~ 75) products and
    eigen-decompositions of bootstraps and nulls run 10-30x faster without thread hand-offs,
    and do not fight the model's threads or other processes for cores."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def blas1(fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        with single_threaded_blas():
            return fn(*a, **kw)
    return wrapper


def pca_ratios(x, standardize: bool) -> np.ndarray:
    """Explained-variance ratios of all components of ``x`` (n, d), largest first.

    Uses the n x n Gram matrix when n < d (same nonzero eigenvalues as the covariance)."""
    x = _np(x)
    x = standardise(x) if standardize else x - x.mean(0)
    g = x @ x.T if x.shape[0] <= x.shape[1] else x.T @ x
    ev = np.clip(np.linalg.eigvalsh(g)[::-1], 0, None)
    total = ev.sum()
    return ev / total if total > 0 else np.zeros_like(ev)


def ci(samples, level: float = 0.95) -> list[float]:
    s = _np(samples)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return [float("nan"), float("nan")]
    a = (1 - level) / 2
    return [float(np.quantile(s, a)), float(np.quantile(s, 1 - a))]


@blas1
def bootstrap_pca(x, standardize: bool, n_boot: int, seed: int) -> dict:
    """Bootstrap over rows (prompts): each resample is re-standardized and refitted. Returns
    the resampled PC1, PC2 and PC1+PC2 arrays (for intervals and differences)."""
    x = _np(x)
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    out = np.zeros((n_boot, 2))
    for b in range(n_boot):
        r = pca_ratios(x[rng.integers(0, n, n)], standardize)
        out[b] = r[:2] if r.size >= 2 else (r[0], 0.0)
    return {"pc1": out[:, 0], "pc2": out[:, 1], "pc1_pc2": out.sum(1)}


@blas1
def pca_null(n: int, d: int, standardize: bool, n_draws: int, seed: int, x=None) -> dict:
    """Matched-(n, d) nulls through the same standardization and PCA: an isotropic Gaussian
    cloud and, when ``x`` is given, ``x`` with every column permuted independently across rows
    (keeps each coordinate's distribution, destroys their covariance)."""
    rng = np.random.default_rng(seed)
    res = {}
    gauss = np.array([pca_ratios(rng.standard_normal((n, d)), standardize)[:2] for _ in range(n_draws)])
    res["gaussian"] = _null_summary(gauss)
    if x is not None:
        x = _np(x)
        perm = []
        for _ in range(n_draws):
            xp = np.take_along_axis(x, rng.random(x.shape).argsort(0), 0)
            perm.append(pca_ratios(xp, standardize)[:2])
        res["column_permutation"] = _null_summary(np.array(perm))
    res["n_draws"] = int(n_draws)
    res["reference_1_over_n_minus_1"] = 1.0 / max(n - 1, 1)
    return res


def _null_summary(r: np.ndarray) -> dict:
    if r.shape[1] < 2:
        r = np.concatenate([r, np.zeros((r.shape[0], 1))], 1)
    s = r.sum(1)
    return {"pc1_mean": float(r[:, 0].mean()), "pc1_q95": float(np.quantile(r[:, 0], 0.95)),
            "pc1_pc2_mean": float(s.mean()), "pc1_pc2_q95": float(np.quantile(s, 0.95)),
            "pc1_samples": r[:, 0], "pc1_pc2_samples": s}


def pearson(x, y) -> float:
    x, y = _np(x).ravel(), _np(y).ravel()
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


@blas1
def bootstrap_mean(x, n_boot: int, seed: int, level: float = 0.95, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean over ``axis`` (prompts) of ``x`` and its bootstrap interval (2, ...)."""
    x = _np(x)
    rng = np.random.default_rng(seed)
    n = x.shape[axis]
    idx = rng.integers(0, n, (n_boot, n))
    boots = np.stack([np.take(x, i, axis=axis).mean(axis) for i in idx])
    a = (1 - level) / 2
    return x.mean(axis), np.quantile(boots, [a, 1 - a], axis=0)


def variance_concentration(x, ks=(1, 10)) -> dict:
    """Share of the total raw variance held by the top-k coordinates (massive activations)."""
    v = np.sort(_np(x).var(0))[::-1]
    total = v.sum()
    return {f"top{k}": float(v[:k].sum() / total) if total > 0 else float("nan") for k in ks}


@dataclass(frozen=True)
class Resampling:
    """How a PCA report resamples: ``n_boot`` bootstrap refits (seeded with ``seed``) for intervals
    at ``level``, and ``n_null`` draws of each matched null (seeded with ``seed + 1``)."""

    n_boot: int
    n_null: int
    seed: int
    level: float = 0.95


@blas1
def pca_report(x, y, standardize: bool, resampling: Resampling, keep_boot: bool = False) -> dict:
    """PC1, PC2, PC1+PC2 with bootstrap intervals, participation ratio, top-10 ratios, Spearman
    r(PC1, y) (signed, and |r|; PC signs are arbitrary), and the matched empirical nulls."""
    x = _np(x)
    seed, level = resampling.seed, resampling.level
    ratios, scores, _ = pca_components(x, standardize, n=2)
    boot = bootstrap_pca(x, standardize, resampling.n_boot, seed)
    rho, p = spearman(scores[:, 0], y)
    null = pca_null(x.shape[0], x.shape[1], standardize, resampling.n_null, seed + 1, x=x)
    pc2 = float(ratios[1]) if ratios.size > 1 else 0.0
    out = {
        "standardized": bool(standardize), "n": int(x.shape[0]), "d": int(x.shape[1]),
        "pc1": float(ratios[0]), "pc2": pc2, "pc1_pc2": float(ratios[0]) + pc2,
        "pc1_ci": ci(boot["pc1"], level), "pc2_ci": ci(boot["pc2"], level), "pc1_pc2_ci": ci(boot["pc1_pc2"], level),
        "pc1_boot_mean": float(boot["pc1"].mean()), "pc1_pc2_boot_mean": float(boot["pc1_pc2"].mean()),
        "participation_ratio": participation_ratio(ratios),
        "explained_variance_ratio": [float(r) for r in ratios[:10]],
        "spearman_pc1_entropy": rho, "spearman_p": p, "abs_spearman_pc1_entropy": abs(rho) if rho == rho else rho,
        "null": {k: ({kk: vv for kk, vv in v.items() if not kk.endswith("samples")} if isinstance(v, dict) else v)
                 for k, v in null.items()},
        "pc1_over_gaussian_null": float(ratios[0] / null["gaussian"]["pc1_mean"]),
        "pc1_pc2_above_null_q95": bool(float(ratios[0]) + pc2 > null["column_permutation"]["pc1_pc2_q95"]),
    }
    if keep_boot:
        out["_boot"] = boot
    return out
