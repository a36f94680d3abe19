"""A sweep config -> a plain list of validated run configs (one per experiment x model x grid point).

Capacity matching happens here: at every grid point, each model of an experiment (except the
reference named by ``match_capacity``) is resized to within 2% of the reference's parameter
count, counted as the trained model will have it (position tables sized for the longest
evaluation length included).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from windtunnel.config import Overrides, as_overrides
from windtunnel.models import match_capacity, model_class
from windtunnel.sweep.config import Experiment, SweepConfig
from windtunnel.tasks import make_task
from windtunnel.train.build import build, sized_model_params
from windtunnel.train.config import RunConfig, resolve_run


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its config, and where in the sweep it sits."""

    config: RunConfig
    experiment: str
    labels: dict[str, Any] = field(default_factory=dict)  # grid point: section.field -> value

    @property
    def name(self) -> str:
        return self.config.run_name()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "experiment": self.experiment, "labels": self.labels,
                "config": self.config.model_dump(mode="json")}


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of the grid axes, in the order given (one empty point if no axes)."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def reference_config(task: str, reference: str, profile: str | None,
                     overrides_for: Callable[[str], Overrides | None]) -> RunConfig:
    """The reference's run config, trained or not: a reference that is not trained gets the task,
    train and eval overrides, and only those ``model_params`` overrides its own config has (they
    address the trained models)."""
    ref_fields = model_class(reference).Config.model_fields
    return resolve_run(task, reference, profile, [
        (k, v) for k, v in as_overrides(overrides_for(reference))
        if not k.startswith("model_params.") or k.removeprefix("model_params.") in ref_fields])


def matched_configs(task: str, models: list[str], profile: str | None,
                    overrides: Overrides | Callable[[str], Overrides] | None,
                    reference: str | None, tol: float = 0.02) -> list[RunConfig]:
    """One run config per model; all but ``reference`` matched to its parameter count.

    ``overrides`` apply to every model, or, given as a function of the model's name, to each its
    own. A reference that is not trained gets the task, train and eval overrides, and only those
    ``model_params`` overrides its own config has (e.g. ``model_params.init``; the per-position
    MLP's ``model_params.variant`` is the trained model's alone)."""
    overrides_for = overrides if callable(overrides) else (lambda name: overrides)
    configs = [resolve_run(task, name, profile, overrides_for(name)) for name in models]
    if reference is None:
        return configs
    ref_cfg = reference_config(task, reference, profile, overrides_for)
    _, ref_model = build(ref_cfg)
    target = ref_model.n_params()
    task_obj = make_task(ref_cfg.task, ref_cfg.task_params)
    out = []
    for cfg in configs:
        if cfg.model != reference:
            params, _ = match_capacity(cfg.model, task_obj.spec, target, sized_model_params(cfg, task_obj), tol=tol)
            cfg = cfg.replace(model_params=params)
        out.append(cfg)
    return out


def run_overrides(sweep: SweepConfig, exp: Experiment, point: dict[str, Any],
                  overrides: Overrides | None = None) -> Callable[[str], list]:
    """The overrides of each model's run of ``exp`` at grid ``point``, lowest first (see :func:`expand`)."""
    def ovr(model: str) -> list:
        return [*sweep.override_pairs, *exp.override_pairs, *exp.model_override_pairs(model), *point.items(),
                *as_overrides(overrides)]
    return ovr


def expand(sweep: SweepConfig, overrides: Overrides | None = None,
           grid: dict[str, list[Any]] | None = None) -> list[SweepRun]:
    """Every run of ``sweep``: one entry per experiment and run config (a config that two
    experiments share appears under both and is trained once).

    ``overrides`` (``{"train.steps": 500}`` or ``(key, value)`` pairs) apply to every run after
    the sweep's and the experiment's own; ``grid`` axes replace or extend the sweep's (e.g. from
    ``windtunnel sweep --grid train.seed=0,1,2``). Grid values reach the run configs as they are
    (no text in between).
    The order of overrides, lowest first: profile (with the settings it commits per model),
    sweep overrides, experiment overrides, the experiment's overrides of this model, grid point,
    ``overrides``.
    """
    runs: list[SweepRun] = []
    seen: set[tuple[str, str]] = set()
    for exp in sweep.experiments:
        axes = {**sweep.grid, **exp.grid, **(grid or {})}
        for task in exp.tasks():
            for point in grid_points(axes):
                ovr = run_overrides(sweep, exp, point, overrides)
                for cfg in matched_configs(task, exp.models, exp.profile or sweep.profile, ovr, exp.match_capacity):
                    run = SweepRun(cfg, exp.label(task), dict(point))
                    if (run.name, run.experiment) not in seen:
                        seen.add((run.name, run.experiment))
                        runs.append(run)
    return runs
