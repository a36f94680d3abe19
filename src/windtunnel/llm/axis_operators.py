"""Entropy-axis interventions on the value projection (Paper III §4.6).

Axis: for each layer, PC1 of the final-token values (concatenated over key/value heads) of the
unperturbed SULA prompts: of the centred raw values (``axis_space="raw"``, default: ``v - (v.u)u``
removes exactly the data's PC1 direction), or of the standardized values, mapped to raw space as
u ∝ D^-1 w (D = per-coordinate std) and renormalised (``"standardized"``). The sign makes
corr(v.u, H_model) >= 0 (``axis_sign="positive"``, §4.5) or <= 0 (``"negative"``, §4.6).

Operators, applied by a forward hook on the value projection output at **all positions** of
every layer in a set (explicit 0-based indices; -1 and out-of-range indices are rejected): cut
v - (v.u)u (paper lambda = 1, the authors' lambda_scale = 0), only (v.u)u, shift v + delta sigma u
(delta = +-shift_sigma, sigma = std of v.u over the SULA prompts), and ``random_*``: the same
with a seeded Gaussian unit axis r (seed + layer), optionally orthogonalised against u.

Outcomes: SULA calibration deltas against the unperturbed run, and the axis-entropy correlation
corr(v.u, H_model) with the unperturbed axes at the cut layer and **downstream** at every later
layer, plus PC1 of the perturbed values re-estimated at each layer and PC1 of the final residual
stream. Where the paper and the authors' code differ: docs/llm.md, "6. interventions".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from windtunnel.config import ConfigError
from windtunnel.llm.stats import pearson
from windtunnel.stats import pca_components, standardise


@dataclass
class Axis:
    u: np.ndarray  # (D,) unit, raw value space
    sigma: float  # std of v.u over the prompts
    corr: float  # Pearson corr(v.u, H_model) after orientation
    space: str


def estimate_axis(values, h_model, space: str = "raw", sign: str = "positive") -> Axis:
    x = np.asarray(values, dtype=np.float64)
    if space == "raw":
        _, _, comps = pca_components(x, standardize=False, n=1)
        u = comps[0]
    elif space == "standardized":
        _, _, comps = pca_components(x, standardize=True, n=1)
        std = x.std(0)
        u = comps[0] / np.where(std > 1e-12, std, 1.0)
    else:
        raise ConfigError(f"field 'axis_space' = {space!r}; allowed: raw, standardized")
    u = u / np.linalg.norm(u)
    c = pearson(x @ u, h_model)
    if (sign == "positive" and c < 0) or (sign == "negative" and c > 0):
        u, c = -u, -c
    return Axis(u=u, sigma=float((x @ u).std()), corr=c, space=space)


def random_axis(d: int, seed: int, orthogonal_to: np.ndarray | None = None) -> np.ndarray:
    r = np.random.default_rng(seed).standard_normal(d)
    if orthogonal_to is not None:
        u = orthogonal_to / np.linalg.norm(orthogonal_to)
        r = r - (r @ u) * u
    return r / np.linalg.norm(r)


def operator(kind: str, u: np.ndarray, sigma: float = 1.0, delta: float = 0.0):
    """A function of values v (..., D) implementing one operator along unit axis u."""
    ut = torch.as_tensor(u, dtype=torch.float32)

    def fn(v: torch.Tensor) -> torch.Tensor:
        a = ut.to(v.device)
        proj = v @ a
        if kind == "cut":
            return v - proj[..., None] * a
        if kind == "only":
            return proj[..., None] * a
        if kind == "shift":
            return v + (delta * sigma) * a
        raise ValueError(kind)
    return fn


@dataclass(frozen=True)
class Axes:
    """The unperturbed axis of each layer (``per_layer``) and how the operators use them: random
    axes are drawn in the ``d``-dimensional value space (orthogonalised against the layer's axis
    when ``orthogonal``); a shift moves ``shift_sigma`` times the axis' sigma."""

    per_layer: dict[int, Axis]
    d: int
    shift_sigma: float = 1.0
    orthogonal: bool = False


def condition_ops(condition: str, layers, axes: Axes, seed: int) -> dict[int, callable]:
    """{layer: value function} for one named condition, e.g. 'random_shift_minus' (random axes
    seeded with ``seed + layer``)."""
    which, kind, *rest = condition.split("_")
    delta = {"plus": axes.shift_sigma, "minus": -axes.shift_sigma}.get(rest[0], 0.0) if rest else 0.0
    ops = {}
    for i in layers:
        ax = axes.per_layer[i]
        u = ax.u if which == "true" else random_axis(axes.d, seed + i, ax.u if axes.orthogonal else None)
        ops[i] = operator(kind, u, ax.sigma, delta)
    return ops


def default_layer_sets(n_layers: int) -> list[list[int]]:
    """[[n//2], [n-1], {n//3, n//2, 2n//3, 5n//6, n-1}]; for 24 layers: [12], [23], [8, 12, 16, 20, 23]
    (Paper III's Pythia-410M layers)."""
    n = n_layers
    multi = sorted({n // 3, n // 2, (2 * n) // 3, (5 * n) // 6, n - 1})
    sets = [[n // 2], [n - 1], multi]
    out = []
    for s in sets:
        if s not in out:
            out.append(s)
    return out


def check_layer_sets(sets, n_layers: int) -> list[list[int]]:
    for s in sets:
        bad = [i for i in s if not 0 <= i < n_layers]
        if bad:
            raise ConfigError(f"field 'intervention_layers': layers {bad} out of range; allowed: 0 <= layer <= "
                              f"{n_layers - 1} (explicit 0-based indices; -1 is rejected)")
    return [sorted(set(s)) for s in sets]


def axis_correlations(values: dict[int, np.ndarray], h_model, axes: dict[int, Axis], layers) -> dict[str, dict]:
    """Per layer: corr(v.u_baseline, H_model), |corr(PC1 re-estimated, H_model)| and std(v.u) relative
    to the unperturbed std (the correlation is NaN when that ratio is below 1e-3: nothing left on u)."""
    out = {}
    for i in layers:
        v = np.asarray(values[i], dtype=np.float64)
        proj = v @ axes[i].u
        ratio = float(proj.std() / axes[i].sigma) if axes[i].sigma > 0 else float("nan")
        # after a true cut v.u is float rounding noise: its correlation means nothing, report NaN
        fixed = pearson(proj, h_model) if not ratio < 1e-3 else float("nan")
        if np.allclose(v.std(0), 0):
            re = float("nan")
        else:
            _, sc, _ = pca_components(v, standardize=False, n=1)
            re = abs(pearson(sc[:, 0], h_model))
        out[str(i)] = {"fixed_axis": fixed, "reestimated_abs": re, "projection_std_ratio": ratio}
    return out


def residual_pc1_corr(residual, h_model) -> float:
    r = np.asarray(residual, dtype=np.float64)
    _, sc, _ = pca_components(standardise(r), standardize=False, n=1)
    return abs(pearson(sc[:, 0], h_model))
