"""Parameter counts without allocating weights, and capacity matching to a reference count."""

from __future__ import annotations

import functools
import json
from typing import Any

import torch

from windtunnel.config import ConfigError
from windtunnel.models.base import make_model, model_class
from windtunnel.tasks.base import TaskSpec


class CapacityError(ConfigError):
    """No value of the capacity knob lands within the tolerance: ``closest`` parameters at
    ``knob`` = ``value`` is the nearest to ``target``."""

    def __init__(self, message: str, *, target: int, closest: int, knob: str, value: int):
        super().__init__(message)
        self.target, self.closest, self.knob, self.value = target, closest, knob, value


def count_params(name: str, spec: TaskSpec, params: dict[str, Any] | None = None) -> int:
    """Trainable parameter count of a model, built on the meta device (no memory, no init).

    Counts are cached per (architecture class, task spec, params): a sweep matches the same
    models at every seed, and building a model, even on the meta device, costs milliseconds."""
    return _count(model_class(name), name, spec, json.dumps(params or {}, sort_keys=True))


@functools.lru_cache(maxsize=4096)
def _count(cls: type, name: str, spec: TaskSpec, params_json: str) -> int:
    with torch.device("meta"):
        return make_model(name, spec, json.loads(params_json)).n_params()


def match_capacity(name: str, spec: TaskSpec, target_params: int, params: dict[str, Any] | None = None,
                   knob: str | None = None, tol: float = 0.02) -> tuple[dict[str, Any], int]:
    """Set one integer field (``knob``; default per architecture, e.g. d_model) so that the model
    has ``target_params`` parameters within relative tolerance ``tol``.

    The other fields come from ``params`` (a value of the knob there is replaced). Returns the full
    params and the count reached; raises :class:`ConfigError` when no value of the knob lands within
    the tolerance (a :class:`CapacityError`, with the closest count)."""
    params = dict(params or {})
    config = model_class(name).Config.build(params, where=f"model '{name}'")
    knob = knob or config.capacity_knob()
    field = type(config).model_fields.get(knob)
    if field is None or int not in getattr(field.annotation, "__args__", (field.annotation,)):
        raise ConfigError(f"knob '{knob}' is not an integer field of model '{name}'")
    step = config.knob_step(knob)
    limit = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), 1 << 20) // step
    floor = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), 1)
    first = max(1, -(-floor // step))  # the smallest allowed multiple of step

    @functools.cache
    def count(k: int) -> int:
        return count_params(name, spec, {**params, knob: k * step})

    lo, hi = first - 1, first  # invariant: count(lo) < target <= count(hi), with count(first - 1) taken as 0
    while count(hi) < target_params:
        if hi == limit:
            break
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < target_params else (lo, mid)
    best = min((k for k in (lo, hi) if k >= first), key=lambda k: abs(count(k) - target_params))
    n = count(best)
    if abs(n - target_params) > tol * target_params:
        raise CapacityError(f"cannot match {target_params:,} parameters within {tol:.1%} by varying '{knob}' "
                            f"of model '{name}': the closest is {n:,} at {knob}={best * step}",
                            target=target_params, closest=n, knob=knob, value=best * step)
    return {**params, knob: best * step}, n
