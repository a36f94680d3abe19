"""Pure statistics shared by the geometric diagnostics and the LLM analyses: no model code,
numpy/torch in, floats out.

Everything here works on plain arrays, so that :mod:`windtunnel.geometry` and
:mod:`windtunnel.llm` (Paper III) use the same functions without importing each other:
cosine frames, permutation and Monte Carlo tests, attention entropy and Jensen-Shannon
divergence between attention rows; and, from :mod:`windtunnel.pointcloud` (importable from here
too), PCA summaries with Spearman correlation, held-out linear probes, and k-means cluster
quality. Entropies and divergences are in bits.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch

from windtunnel.infotheory import entropy_bits, kl_bits
from windtunnel.pointcloud import (  # noqa: F401  (the point-cloud statistics, read from here by callers)
    KMeansFit,
    Split,
    category_mean_r2,
    dims_for,
    gaussian_cloud,
    kmeans_summary,
    participation_ratio,
    pca,
    pca_components,
    pca_summary,
    probe_r2,
    probe_summary,
    purity,
    r2_score,
    spearman,
    split_indices,
    standardise,
    to_numpy,
)

Alternative = Literal["two-sided", "less", "greater"]


# ---------------------------------------------------------------------------------------
# Cosine frames
# ---------------------------------------------------------------------------------------
def cosine_matrix(x) -> np.ndarray:
    """(n, n) cosine similarities between the rows of ``x`` (n, d); a zero row has cosine 0."""
    x = to_numpy(x)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    u = x / np.maximum(norm, 1e-12)
    return u @ np.swapaxes(u, -1, -2)


def offdiag_abs_cosines(x) -> np.ndarray:
    """|cos| of every unordered pair of distinct rows of ``x`` (..., n, d): (..., n(n-1)/2)."""
    c = np.abs(cosine_matrix(x))
    i, j = np.triu_indices(c.shape[-1], k=1)
    return c[..., i, j]


def mean_offdiag_abs_cosine(x) -> float | np.ndarray:
    """Mean |off-diagonal cosine| of the rows of ``x`` (..., n, d): 0 for orthogonal rows, 1 for
    collinear ones (the Paper I/III key-orthogonality statistic). Leading axes are kept."""
    x = to_numpy(x)
    if x.shape[-2] < 2:
        raise ValueError(f"need at least two vectors, got shape {x.shape}")
    out = offdiag_abs_cosines(x).mean(-1)
    return float(out) if np.ndim(out) == 0 else out


def mean_offdiag_cosine(x) -> float | np.ndarray:
    """Signed mean off-diagonal cosine (the authors' ``qkv_analysis.py`` reports this one)."""
    c = cosine_matrix(x)
    i, j = np.triu_indices(c.shape[-1], k=1)
    out = c[..., i, j].mean(-1)
    return float(out) if np.ndim(out) == 0 else out


def gaussian_abs_cosine(d: int) -> float:
    """E|cos| of two independent isotropic Gaussian vectors in R^d (exact, via the Beta law)."""
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def key_effective_dim(m: int, d: int) -> float:
    """The effective dimension tr(S)^2 / tr(S^2) of keys k = W e, S = W W^T, for an isotropic e in
    R^d and a random m x d W with iid entries: E tr(S) = m d s^2 and E tr(S^2) = m d (m + d + 1) s^4
    (the second moment of a Wishart matrix), so d_eff = m d / (m + d + 1), below min(m, d)."""
    if m < 1 or d < 1:
        raise ValueError(f"key dimensions must be positive integers, got m = {m}, d = {d}")
    return m * d / (m + d + 1)


def random_key_abs_cosine(m: int, d: int, n: int | None = None, centred: bool = False) -> float:
    """E|cos| between the keys E W^T of isotropic embeddings E (n x d) under a random m x d W: the
    cosine of two keys is about N(rho, sigma^2), sigma = (1 - rho^2) / sqrt(d_eff)
    (:func:`key_effective_dim`), rho = 0 for raw keys, giving sqrt(2 / (pi d_eff)); ``centred``
    (the keys minus their mean over the ``n`` tokens) gives rho = -1 / (n - 1) and the folded normal's
    mean. Checked against :func:`random_key_abs_cosine_mc` (tests/geometry/test_geometry_stats.py)."""
    if centred and (n is None or n < 2):
        raise ValueError(f"centred keys need n >= 2 tokens, got n = {n}")
    rho = -1.0 / (n - 1) if centred else 0.0
    sigma = (1 - rho * rho) / math.sqrt(key_effective_dim(m, d))
    if sigma == 0:  # two centred keys are opposite: |cos| = 1
        return 1.0
    z = abs(rho) / sigma
    return sigma * math.sqrt(2 / math.pi) * math.exp(-z * z / 2) + abs(rho) * math.erf(z / math.sqrt(2))


def random_key_abs_cosine_mc(m: int, d: int, n: int, centred: bool = False, draws: int = 300,
                             seed: int = 0) -> tuple[float, float]:
    """Monte Carlo of :func:`random_key_abs_cosine`: ``draws`` independent (E, W), E (n x d) and
    W (m x d) with iid N(0, 1) entries; the mean over draws of the mean |off-diagonal cosine| of
    the rows of E W^T (centred over the rows if ``centred``), and its standard error."""
    rng = np.random.default_rng(seed)
    out = np.empty(draws)
    for i in range(draws):
        keys = rng.standard_normal((n, d)) @ rng.standard_normal((m, d)).T
        if centred:
            keys = keys - keys.mean(0)
        out[i] = mean_offdiag_abs_cosine(keys)
    return float(out.mean()), float(out.std(ddof=1) / math.sqrt(draws))


# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------
def _p_from_counts(count: int | np.ndarray, n: int) -> float:
    return float((1 + count) / (1 + n))


def permutation_test(a, b, n_perm: int = 2000, seed: int = 0, alternative: Alternative = "two-sided",
                     max_n: int | None = 5000) -> dict:
    """Two-sample permutation test for the difference of means ``mean(a) - mean(b)``.

    ``alternative``: "less" tests mean(a) < mean(b), "greater" the reverse. The p-value counts the
    observed labelling as one of the permutations ((1 + #as extreme) / (1 + n_perm)), so it is
    never 0. A sample larger than ``max_n`` is first subsampled to ``max_n`` values (seeded) to
    bound the cost. Returns {"diff", "p", "n_perm", "alternative", "n_a", "n_b", "subsampled"}.
    """
    a, b = to_numpy(a).ravel(), to_numpy(b).ravel()
    if a.size < 1 or b.size < 1:
        raise ValueError("both samples need at least one value")
    obs = a.mean() - b.mean()
    rng = np.random.default_rng(seed)
    subsampled = max_n is not None and max(a.size, b.size) > max_n
    if subsampled:
        a = a[rng.permutation(a.size)[:max_n]]
        b = b[rng.permutation(b.size)[:max_n]]
    pooled = np.concatenate([a, b])
    chunk = max(1, min(n_perm, (1 << 22) // pooled.size))
    null = []
    for start in range(0, n_perm, chunk):
        m = min(chunk, n_perm - start)
        perm = rng.permuted(np.broadcast_to(pooled, (m, pooled.size)), axis=1)
        null.append(perm[:, : a.size].mean(1) - perm[:, a.size:].mean(1))
    null = np.concatenate(null)
    stat = a.mean() - b.mean()  # the observed difference on the (possibly subsampled) values
    return {"diff": float(obs), "p": _tail_p(stat, null, alternative), "n_perm": int(n_perm),
            "alternative": alternative, "n_a": int(a.size), "n_b": int(b.size), "subsampled": bool(subsampled)}


def _tail_p(obs: float, null: np.ndarray, alternative: Alternative) -> float:
    tol = 1e-12 * max(1.0, abs(obs))
    if alternative == "less":
        return _p_from_counts(int((null <= obs + tol).sum()), null.size)
    if alternative == "greater":
        return _p_from_counts(int((null >= obs - tol).sum()), null.size)
    if alternative == "two-sided":
        return _p_from_counts(int((np.abs(null) >= abs(obs) - tol).sum()), null.size)
    raise ValueError(f"alternative must be two-sided, less or greater, got {alternative!r}")


def monte_carlo_test(observed: float, null_samples, alternative: Alternative = "less") -> dict:
    """Where ``observed`` falls in a sampled null distribution (e.g. statistics of random weights).

    Returns the null mean, std and 5/95% quantiles, the z-score and the Monte Carlo p-value
    (1 + #null samples as extreme) / (1 + n); "less" asks whether observed is below the null.
    ``p_two_sided`` measures the distance from the null mean in either direction."""
    null = to_numpy(null_samples).ravel()
    if null.size < 1:
        raise ValueError("the null needs at least one sample")
    mean, std = float(null.mean()), float(null.std(ddof=1)) if null.size > 1 else 0.0
    centered = null - mean
    return {
        "observed": float(observed), "null_mean": mean, "null_std": std,
        "null_q05": float(np.quantile(null, 0.05)), "null_q95": float(np.quantile(null, 0.95)),
        "z": float((observed - mean) / std) if std > 0 else float("nan"),
        "p": _tail_p(observed - mean, centered, alternative),
        "p_two_sided": _tail_p(observed - mean, centered, "two-sided"), "n_null": int(null.size),
        "alternative": alternative,
    }


# ---------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------
def attention_entropy(pattern: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of every attention row: (..., T, S) -> (..., T)."""
    return entropy_bits(pattern.to(torch.float64))


def attendable_counts(T: int, rows=None) -> torch.Tensor:
    """Number of positions a causal query row t can attend to: t + 1, for ``rows`` (default all)."""
    rows = torch.arange(T) if rows is None else torch.as_tensor(rows)
    return (rows + 1).to(torch.float64)


def attention_entropy_summary(pattern: torch.Tensor, rows=None) -> dict:
    """Causal attention entropy of ``pattern`` (B, H, T, T) at query ``rows`` (default all).

    Entropies are taken per row first, then averaged (never the other way round). The
    normalised entropy divides row t by log2(t + 1), its maximum (1 = uniform attention); row 0
    (one attendable position, entropy 0 by necessity) is left out of the normalised mean.
    Returns per-head means ``bits`` and ``normalised`` (H,), their head means, the per-row curve
    (mean over batch and heads) and the uniform-attention reference ``uniform_bits``.
    """
    if pattern.dim() != 4:
        raise ValueError(f"pattern must be (B, H, T, T), got shape {tuple(pattern.shape)}")
    T = pattern.shape[-1]
    rows = torch.arange(T) if rows is None else torch.as_tensor(rows, dtype=torch.long)
    h = attention_entropy(pattern[:, :, rows])  # (B, H, R)
    n = attendable_counts(T, rows)
    keep = n > 1
    norm = h[..., keep] / torch.log2(n[keep])
    return {
        "bits_per_head": h.mean((0, 2)).tolist(),
        "normalised_per_head": norm.mean((0, 2)).tolist() if keep.any() else [float("nan")] * h.shape[1],
        "bits": float(h.mean()),
        "normalised": float(norm.mean()) if keep.any() else float("nan"),
        "uniform_bits": float(torch.log2(n).mean()),
        "curve_bits": h.mean((0, 1)).tolist(),
        "rows": rows.tolist(),
    }


def js_divergence_bits(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence in bits between distributions on the last axis (in [0, 1])."""
    p, q = p.to(torch.float64), q.to(torch.float64)
    m = 0.5 * (p + q)
    return 0.5 * kl_bits(p, m) + 0.5 * kl_bits(q, m)


def mass_by_group(pattern: torch.Tensor, labels: torch.Tensor, rows, n_groups: int) -> torch.Tensor:
    """Attention mass of query ``rows`` on each group of key positions.

    ``pattern`` (B, H, T, T), ``labels`` (B, T) or (T,) integer group of each key position (a
    negative label drops the position). Returns (B, H, R, n_groups); rows sum to the mass on
    labelled positions (1 when every attendable position is labelled)."""
    rows = torch.as_tensor(rows, dtype=torch.long)
    a = pattern[:, :, rows].to(torch.float64)  # (B, H, R, T)
    if labels.dim() == 1:
        labels = labels.expand(a.shape[0], -1)
    onehot = torch.zeros(*labels.shape, n_groups, dtype=torch.float64)
    valid = labels >= 0
    onehot[valid] = torch.nn.functional.one_hot(labels[valid], n_groups).to(torch.float64)
    return torch.einsum("bhrt,btg->bhrg", a, onehot)
