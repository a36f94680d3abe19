"""Statistics of a point cloud (activations, labelled by a quantity such as the posterior entropy):
PCA summaries with Spearman correlation, held-out linear probes with their controls, and k-means
cluster quality. Pure: numpy/torch in, floats out; :mod:`windtunnel.stats` re-exports every name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from windtunnel.compat import legacy_group


def to_numpy(x) -> np.ndarray:
    """A float64 NumPy array from a tensor, array or list."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------------------------------
# PCA, correlation
# ---------------------------------------------------------------------------------------
def standardise(x, mean=None, std=None) -> np.ndarray:
    """Zero mean, unit variance per column (constant columns are only centred)."""
    x = to_numpy(x)
    mean = x.mean(0) if mean is None else mean
    std = x.std(0) if std is None else std
    return (x - mean) / np.where(std > 1e-12, std, 1.0)


def pca(x, standardize: bool = False, n_scores: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Explained-variance ratios (all components) and the first ``n_scores`` PC scores of ``x`` (n, d)."""
    ratios, scores, _ = pca_components(x, standardize, n_scores)
    return ratios, scores


def pca_components(x, standardize: bool = False, n: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ratios of all components, scores (N, n), components (n, d)) of ``x`` (N, d); the
    components live in the PCA space (standardised coordinates when ``standardize``)."""
    x = standardise(x) if standardize else to_numpy(x) - to_numpy(x).mean(0)
    rows, d = x.shape
    if rows < 2:
        raise ValueError("PCA needs at least two points")
    if rows >= d:  # eigenvectors of the d x d scatter matrix: much cheaper than an SVD of x for N >> d
        var, vecs = np.linalg.eigh(x.T @ x)
        var, vecs = np.clip(var[::-1], 0, None), vecs[:, ::-1]
    else:
        _, s, vt = np.linalg.svd(x, full_matrices=False)
        var, vecs = s**2, vt.T
    total = var.sum()
    ratios = var / total if total > 0 else np.zeros_like(var)
    return ratios, x @ vecs[:, :n], vecs[:, :n].T


def dims_for(ratios, threshold: float) -> int:
    """Number of leading components needed to explain ``threshold`` of the variance."""
    c = np.cumsum(to_numpy(ratios))
    return int(min(np.searchsorted(c, threshold - 1e-12) + 1, len(c)))


def participation_ratio(ratios) -> float:
    """(sum lambda)^2 / sum lambda^2: the effective number of dimensions."""
    r = to_numpy(ratios)
    return float(r.sum() ** 2 / (r**2).sum()) if (r**2).sum() > 0 else float("nan")


def spearman(x, y) -> tuple[float, float]:
    """Spearman rank correlation and its two-sided p-value (nan for a constant input)."""
    from scipy.stats import spearmanr

    x, y = to_numpy(x).ravel(), to_numpy(y).ravel()
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    r, p = spearmanr(x, y)
    return float(r), float(p)

def pca_summary(x, y, standardize: bool, n_top: int = 10) -> dict:
    """The value-manifold numbers of one point cloud ``x`` (n, d) labelled by ``y`` (n,).

    PC1 and PC1+PC2 explained variance, the top ``n_top`` ratios, dimensions for 90% and 95%,
    participation ratio, and Spearman r(PC1, y) with PC1's sign flipped so that it is >= 0
    (``pc1_sign`` records the flip; PC signs are arbitrary)."""
    x = to_numpy(x)
    ratios, scores = pca(x, standardize=standardize, n_scores=2)
    r, p = spearman(scores[:, 0], y)
    sign = -1.0 if (r == r and r < 0) else 1.0
    return {
        "standardized": bool(standardize),
        "n": int(x.shape[0]),
        "d": int(x.shape[1]),
        "explained_variance_ratio": [float(v) for v in ratios[:n_top]],
        "pc1": float(ratios[0]),
        "pc1_pc2": float(ratios[:2].sum()),
        "dims_90": dims_for(ratios, 0.90),
        "dims_95": dims_for(ratios, 0.95),
        "participation_ratio": participation_ratio(ratios),
        "spearman_pc1": abs(r) if r == r else r,
        "spearman_p": p,
        "pc1_sign": sign,
    }

def gaussian_cloud(n: int, d: int, seed: int = 0) -> np.ndarray:
    """An isotropic N(0, 1) cloud of n points in R^d: the matched-dimension PCA null."""
    return np.random.default_rng(seed).standard_normal((n, d))


# ---------------------------------------------------------------------------------------
# Held-out linear probes
# ---------------------------------------------------------------------------------------
def split_indices(n: int, test_frac: float = 0.2, seed: int = 0, groups=None) -> tuple[np.ndarray, np.ndarray]:
    """A seeded train/test split of ``n`` points; with ``groups`` whole groups (e.g. sequences)
    go to one side, so no sequence is both fitted and scored."""
    if not 0 < test_frac < 1:
        raise ValueError(f"test_frac must lie in (0, 1), got {test_frac}")
    rng = np.random.default_rng(seed)
    if groups is None:
        order = rng.permutation(n)
        n_test = max(1, int(round(test_frac * n)))
        return np.sort(order[n_test:]), np.sort(order[:n_test])
    groups = np.asarray(groups).ravel()
    uniq = rng.permutation(np.unique(groups))
    n_test = max(1, int(round(test_frac * uniq.size)))
    test = np.isin(groups, uniq[:n_test])
    return np.flatnonzero(~test), np.flatnonzero(test)


def r2_score(y, pred) -> float:
    y, pred = to_numpy(y), to_numpy(pred)
    ss_tot = ((y - y.mean()) ** 2).sum()
    return float(1 - ((y - pred) ** 2).sum() / ss_tot) if ss_tot > 0 else float("nan")


@dataclass(frozen=True)
class Split:
    """A seeded train/test split (:func:`split_indices`): ``test_frac`` of the points (of the
    ``groups``, e.g. sequences, when given: whole groups go to one side) held out, drawn from ``seed``."""

    seed: int = 0
    test_frac: float = 0.2
    groups: Any = None

    def indices(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(train, test) indices of ``n`` points."""
        return split_indices(n, self.test_frac, self.seed, self.groups)


def probe_r2(x, y, split: Split | None = None, alpha: float = 1e-3, shuffle_labels: bool = False, **legacy: Any) -> float:
    """Held-out R^2 of a ridge-regularised linear probe predicting ``y`` (n,) from ``x`` (n, d).

    Features are standardised with the training split's statistics; ``alpha`` is the ridge
    penalty per training point (so it does not grow with n). ``shuffle_labels`` permutes ``y``
    first (seeded by the split's seed): the control that a probe must beat. Split as ``split``
    says (:class:`Split`; None: seed 0, 20% held out). (The keywords ``seed``, ``test_frac`` and
    ``groups`` still work, deprecated: they build the split.)"""
    split = legacy_group("probe_r2", split, legacy, Split)
    x, y = to_numpy(x), to_numpy(y).ravel()
    if shuffle_labels:
        y = np.random.default_rng(split.seed + 1).permutation(y)
    tr, te = split.indices(len(y))
    mean, std = x[tr].mean(0), x[tr].std(0)
    xtr, xte = standardise(x[tr], mean, std), standardise(x[te], mean, std)
    ym = y[tr].mean()
    a = xtr.T @ xtr + alpha * len(tr) * np.eye(x.shape[1])
    w = np.linalg.solve(a, xtr.T @ (y[tr] - ym))
    return r2_score(y[te], xte @ w + ym)


def category_mean_r2(y, categories, seed: int = 0, test_frac: float = 0.2, groups=None) -> float:
    """Held-out R^2 of predicting ``y`` by its training-split mean within each category (e.g.
    the position in the sequence), on the same split as :func:`probe_r2`. When ``y`` is a
    function of the category alone this is 1: a probe cannot show more than that."""
    y, cat = to_numpy(y).ravel(), np.asarray(categories).ravel()
    tr, te = split_indices(len(y), test_frac, seed, groups)
    means = {c: y[tr][cat[tr] == c].mean() for c in np.unique(cat[tr])}
    fallback = y[tr].mean()
    return r2_score(y[te], np.array([means.get(c, fallback) for c in cat[te]]))


def probe_summary(x, y, seed: int = 0, groups=None, positions=None) -> dict:
    """Held-out linear-probe R^2 for ``y``, the shuffled-label control and, with ``positions``
    (the position index of every point), the position-only R^2 (:func:`category_mean_r2`)."""
    split = Split(seed, groups=groups)
    out = {"r2": probe_r2(x, y, split), "r2_shuffled": probe_r2(x, y, split, shuffle_labels=True)}
    if positions is not None:
        out["r2_position_only"] = category_mean_r2(y, positions, seed=seed, groups=groups)
    return out


# ---------------------------------------------------------------------------------------
# Clusters
# ---------------------------------------------------------------------------------------
def purity(clusters, labels) -> float:
    """Fraction of points whose label is the majority label of their cluster."""
    clusters, labels = np.asarray(clusters).ravel(), np.asarray(labels).ravel()
    total = 0
    for c in np.unique(clusters):
        _, counts = np.unique(labels[clusters == c], return_counts=True)
        total += counts.max()
    return float(total / len(labels))


@dataclass(frozen=True)
class KMeansFit:
    """How :func:`kmeans_summary` fits and scores: ``n_init`` seeded k-means starts (the best
    kept), the silhouette on at most ``silhouette_sample`` points."""

    n_init: int = 4
    silhouette_sample: int = 2000


def kmeans_summary(x, k: int, labels=None, seed: int = 0, standardize: bool = False, fit: KMeansFit | None = None,
                   **legacy: Any) -> dict:
    """k-means (scikit-learn, seeded) on ``x`` (n, d): silhouette (on at most
    ``fit.silhouette_sample`` seeded points), cluster sizes and, with ``labels``, the purity of the
    clusters and its null (the same clusters against permuted labels). (The keywords ``n_init``
    and ``silhouette_sample`` still work, deprecated: they build the
    :class:`KMeansFit`.)"""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score
    from threadpoolctl import threadpool_limits

    fit = legacy_group("kmeans_summary", fit, legacy, KMeansFit)
    x = standardise(x) if standardize else to_numpy(x)
    n = x.shape[0]
    if not 2 <= k < n:
        raise ValueError(f"k must lie in 2..{n - 1} for {n} points, got {k}")
    with threadpool_limits(1):  # small data; OpenMP/BLAS threads only stall on busy cores
        km = KMeans(n_clusters=k, n_init=fit.n_init, random_state=seed).fit(x)
    assign = km.labels_
    out = {"k": int(k), "sizes": np.bincount(assign, minlength=k).tolist(), "silhouette": float("nan")}
    if len(np.unique(assign)) > 1:
        out["silhouette"] = float(silhouette_score(x, assign, sample_size=min(n, fit.silhouette_sample),
                                                   random_state=seed))
    if labels is not None:
        labels = np.asarray(labels).ravel()
        out["purity"] = purity(assign, labels)
        out["purity_null"] = purity(assign, np.random.default_rng(seed).permutation(labels))
        out["majority_fraction"] = float(np.bincount(labels).max() / len(labels))
    return out
