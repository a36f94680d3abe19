"""Calibration metrics: a model's predictive distribution against the exact posterior.

Everything here is a pure function of tensors, computed in float64 and in bits.
Metrics are taken per example and per position first (shape (B, P)) and aggregated after;
distributions are never averaged before an entropy is taken (Paper I's entropy MAE is a mean of
per-position gaps).

Aggregating the entropy gap ``dh = H_model - H_Bayes`` (B, P):

* ``how="mean_abs"`` (default): mean over every (example, position) of |dh|, the definition of
  the authors' HMM scripts; the natural one when the posterior entropy varies per sequence.
* ``how="abs_mean"``: per position |mean over examples of dh| (= |mean H_model - mean H_Bayes|),
  then the mean over positions, as in the authors' bijection script. It is <= ``mean_abs``.

KL divergences: with ``eps = 0`` they are exact, so KL(model || Bayes) is +inf wherever the model
puts any mass on an answer the Bayes posterior rules out (a softmax always does). ``eps > 0``
clips the second argument from below before taking the log, like the authors' scripts (1e-10 in
the HMM script; the bijection logit lens smooths Bayes with 1e-12). ``invalid_mass`` measures
that support mismatch directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from windtunnel.compat import legacy_group
from windtunnel.evaluate.record import METRICS
from windtunnel.infotheory import entropy_bits, gaussian_entropy_bits, gaussian_kl_bits, kl_bits
from windtunnel.tasks.base import Prediction

Positions = Sequence[int] | torch.Tensor | slice | None
#: the authors' clip for KL in the HMM length-generalisation script
AUTHORS_KL_EPS = 1e-10


# ---------------------------------------------------------------------------------------
# Model outputs -> Prediction
# ---------------------------------------------------------------------------------------
def model_prediction(outputs: torch.Tensor, kind: Literal["categorical", "gaussian"]) -> Prediction:
    """Turn raw model outputs at the scored positions into a float64 :class:`Prediction`.

    ``categorical``: logits (B, P, A) -> probs = softmax(logits) in float64.
    ``gaussian``: (B, P, 2) = (mean, log variance) -> mean, var = exp(log variance).
    """
    x = outputs.detach().to(torch.float64)
    if kind == "categorical":
        return Prediction(probs=torch.softmax(x, dim=-1))
    if kind == "gaussian":
        if x.shape[-1] != 2:
            raise ValueError(f"gaussian outputs must end in (mean, log_var), got shape {tuple(x.shape)}")
        return Prediction(mean=x[..., 0], var=x[..., 1].exp())
    raise ValueError(f"kind must be 'categorical' or 'gaussian', got {kind!r}")


def _kind(pred: Prediction) -> str:
    if pred.probs is not None:
        return "categorical"
    if pred.mean is not None and pred.var is not None:
        return "gaussian"
    raise ValueError("a Prediction needs probs (categorical) or mean and var (gaussian)")


# ---------------------------------------------------------------------------------------
# Per example, per position
# ---------------------------------------------------------------------------------------
def per_position(model: Prediction, bayes: Prediction, eps: float = 0.0) -> dict[str, torch.Tensor]:
    """Metrics at every (example, position), each a float64 tensor of shape (B, P).

    Keys: ``h_model``, ``h_bayes``, ``dh`` (= h_model - h_bayes), ``kl_bayes_model``
    (KL(Bayes || model)), ``kl_model_bayes`` (KL(model || Bayes)), all in bits, and for categorical
    predictions ``invalid_mass`` (model probability on answers with zero Bayes probability).
    Gaussian predictions give differential entropies and closed-form Gaussian KLs.

    ``eps`` (categorical only) clips the second KL argument from below; 0 gives exact KLs, where
    KL(model || Bayes) = +inf as soon as ``invalid_mass`` > 0. Use :data:`AUTHORS_KL_EPS` to match
    the authors' scripts.
    """
    kind = _kind(model)
    if _kind(bayes) != kind:
        raise ValueError(f"model prediction is {kind} but the Bayes one is {_kind(bayes)}")
    if kind == "categorical":
        p, q = model.probs.to(torch.float64), bayes.probs.to(torch.float64)
        if p.shape != q.shape:
            raise ValueError(f"model probs {tuple(p.shape)} and Bayes probs {tuple(q.shape)} differ in shape")
        h_model, h_bayes = entropy_bits(p), entropy_bits(q)
        return {
            "h_model": h_model,
            "h_bayes": h_bayes,
            "dh": h_model - h_bayes,
            "kl_bayes_model": kl_bits(q, p, eps=eps),
            "kl_model_bayes": kl_bits(p, q, eps=eps),
            "invalid_mass": torch.where(q > 0, torch.zeros_like(p), p).sum(-1),
        }
    mp, vp = model.mean.to(torch.float64), model.var.to(torch.float64)
    mq, vq = bayes.mean.to(torch.float64), bayes.var.to(torch.float64)
    if mp.shape != mq.shape:
        raise ValueError(f"model mean {tuple(mp.shape)} and Bayes mean {tuple(mq.shape)} differ in shape")
    h_model, h_bayes = gaussian_entropy_bits(vp), gaussian_entropy_bits(vq)
    return {
        "h_model": h_model,
        "h_bayes": h_bayes,
        "dh": h_model - h_bayes,
        "kl_bayes_model": gaussian_kl_bits(mq, vq, mp, vp),
        "kl_model_bayes": gaussian_kl_bits(mp, vp, mq, vq),
    }


def accuracy(model_probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B, P) float64: 1 where argmax of ``model_probs`` (B, P, A) equals ``target`` (B, P), else 0.

    Ties go to the lowest answer index (torch.argmax).
    """
    return (model_probs.argmax(-1) == target.to(model_probs.device)).to(torch.float64)


# ---------------------------------------------------------------------------------------
# Aggregation. Functions take (..., B, P) so they also serve as vectorised bootstrap stats.
# ---------------------------------------------------------------------------------------
def _select(x: torch.Tensor, positions: Positions) -> torch.Tensor:
    if positions is None:
        return x
    if not isinstance(positions, slice):
        positions = torch.as_tensor(positions, dtype=torch.long, device=x.device)
    return x[..., positions]


def entropy_error(dh: torch.Tensor, how: Literal["mean_abs", "abs_mean"] = "mean_abs",
                  positions: Positions = None) -> torch.Tensor:
    """Entropy error in bits from the gap ``dh`` (..., B, P); reduces the last two axes.

    ``mean_abs``: mean of |dh| over examples and positions. ``abs_mean``: per position
    |mean over examples of dh|, then the mean over positions. ``positions`` picks a subset.
    """
    dh = _select(dh, positions)
    if how == "mean_abs":
        return dh.abs().mean(dim=(-2, -1))
    if how == "abs_mean":
        return dh.mean(-2).abs().mean(-1)
    raise ValueError(f"how must be 'mean_abs' or 'abs_mean', got {how!r}")


def per_position_curve(x: torch.Tensor, positions: Positions = None) -> torch.Tensor:
    """Mean over examples at each position: (..., B, P) -> (..., P)."""
    return _select(x, positions).mean(-2)


def mean_stat(x: torch.Tensor) -> torch.Tensor:
    """Mean over every axis but the first (the resample axis): (n, B, ...) -> (n,)."""
    return x.reshape(x.shape[0], -1).mean(-1)


def _quantile(sorted_x: torch.Tensor, q: float) -> torch.Tensor:
    """Linear-interpolation quantile of sorted values along the last axis, safe with +-inf."""
    pos = q * (sorted_x.shape[-1] - 1)
    i = int(math.floor(pos))
    j = min(i + 1, sorted_x.shape[-1] - 1)
    a, b = sorted_x[..., i], sorted_x[..., j]
    frac = pos - i
    return torch.where(a == b, a, a + frac * (b - a))


def bootstrap_ci(values: torch.Tensor, stat: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 n_boot: int = 1000, level: float = 0.95,
                 generator: torch.Generator | int = 0,
                 max_elements: int = 1 << 24) -> tuple[float, float, float]:
    """Percentile bootstrap over sequences: ``(estimate, lo, hi)``.

    ``values`` is (B, P) or (B,); rows (sequences) are resampled with replacement, so the
    positions of one sequence stay together. ``stat`` maps (n, B, ...) to (n,) (default: mean of
    everything but the leading axis); :func:`entropy_error` and :func:`mean_stat` qualify.
    ``generator`` is a ``torch.Generator`` or an int seed; the same seed gives the same
    resamples for every ``values`` of the same B (paired CIs across metrics). Resamples are drawn
    in chunks of at most ``max_elements`` gathered values, never one at a time.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    stat = mean_stat if stat is None else stat
    values = values.to(torch.float64)
    n = values.shape[0]
    if n < 1:
        raise ValueError("bootstrap needs at least one sequence")
    if isinstance(generator, int):
        generator = torch.Generator().manual_seed(generator)
    estimate = float(stat(values.unsqueeze(0))[0])
    per_resample = max(1, values.numel())
    chunk = max(1, min(n_boot, max_elements // per_resample))
    stats = []
    for start in range(0, n_boot, chunk):
        m = min(chunk, n_boot - start)
        idx = torch.randint(n, (m, n), generator=generator, device=generator.device)
        stats.append(stat(values[idx.to(values.device)]).reshape(m))
    s = torch.cat(stats).sort().values
    alpha = (1.0 - level) / 2
    return estimate, float(_quantile(s, alpha)), float(_quantile(s, 1.0 - alpha))


# ---------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------
#: the key of the entropy error's other aggregation (per position |mean dH|, the authors' bijection script's)
ABS_MEAN_KEY = "entropy_error_abs_mean"
#: the key of the model's probability on answers the exact posterior rules out (categorical tasks)
INVALID_MASS_KEY = "invalid_mass"


@dataclass(frozen=True)
class Bootstrap:
    """The percentile bootstrap of :func:`summarize`'s intervals: ``n_boot`` resamples of the
    sequences, the interval's ``level``, and the ``seed`` of the resamples (one seed for every
    metric, so their intervals are paired)."""

    n_boot: int = 1000
    level: float = 0.95
    seed: int = 0


def _statistics(pp: dict[str, torch.Tensor], model: Prediction, target: torch.Tensor | None,
                positions: Positions) -> dict[str, tuple[torch.Tensor, Callable]]:
    """Each metric of a summary, by its key in ``eval.json`` (the headline ones' from
    :data:`~windtunnel.evaluate.record.METRICS`): its per-(example, position) values and the
    statistic that reduces them."""
    key = {name: spec.eval_key for name, spec in METRICS.items()}
    values: dict[str, tuple[torch.Tensor, Callable]] = {
        key["entropy_error"]: (pp["dh"], lambda x: entropy_error(x, "mean_abs")),
        ABS_MEAN_KEY: (pp["dh"], lambda x: entropy_error(x, "abs_mean")),
        key["kl_bayes_model"]: (pp["kl_bayes_model"], mean_stat),
        key["kl_model_bayes"]: (pp["kl_model_bayes"], mean_stat),
    }
    if "invalid_mass" in pp:
        values[INVALID_MASS_KEY] = (pp["invalid_mass"], mean_stat)
    if target is not None and model.probs is not None and not target.is_floating_point():
        values[key["accuracy"]] = (_select(accuracy(model.probs, target), positions), mean_stat)
    return values


def summarize(model: Prediction, bayes: Prediction, target: torch.Tensor | None = None,
              bootstrap: Bootstrap | None = None, eps: float = AUTHORS_KL_EPS, positions: Positions = None,
              **legacy: Any) -> dict:
    """All headline metrics with bootstrap CIs (sequences resampled), as plain floats and lists.

    Each metric is ``{"value", "lo", "hi"}``: entropy error in both aggregations, KL in both
    directions (with the ``eps`` clip, reported as ``kl_eps``; 0 gives exact KLs that may be inf,
    which ``json.dumps`` writes as ``Infinity``), ``invalid_mass`` (categorical) and ``accuracy``
    (fraction, when ``target`` is given as integer answers). Every metric's CI uses the same
    resampled sequences (:class:`Bootstrap`, default 1000 resamples at 95%, seed 0). ``curves``
    holds per-position means of h_model, h_bayes and |dh|. ``positions`` restricts everything to a
    subset of scored positions. (The keywords ``n_boot``, ``level`` and ``seed`` of earlier
    versions still work, deprecated: they build the :class:`Bootstrap`.)
    """
    boot = legacy_group("summarize", bootstrap, legacy, Bootstrap)
    pp = {k: _select(v, positions) for k, v in per_position(model, bayes, eps=eps).items()}
    values = _statistics(pp, model, target, positions)
    b, p = pp["dh"].shape
    out: dict = {"kind": _kind(model), "n_examples": int(b), "n_positions": int(p),
                 "n_boot": int(boot.n_boot), "level": float(boot.level), "seed": int(boot.seed),
                 "kl_eps": float(eps) if model.probs is not None else None,
                 "entropy_error_reported": METRICS["entropy_error"].eval_key}
    for name, (x, stat) in values.items():
        est, lo, hi = bootstrap_ci(x, stat, n_boot=boot.n_boot, level=boot.level, generator=boot.seed)
        out[name] = {"value": est, "lo": lo, "hi": hi}
    out["curves"] = {
        "h_model": per_position_curve(pp["h_model"]).tolist(),
        "h_bayes": per_position_curve(pp["h_bayes"]).tolist(),
        "abs_dh": per_position_curve(pp["dh"].abs()).tolist(),
    }
    return out
