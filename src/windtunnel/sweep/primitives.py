"""What the scorecard and the searches share: the inference primitives and the tunnels that score
them, the reference architecture, and the budget of each profile's scorecard (the shipped sweep
it takes its overrides and workers from), with the run configs a search starts from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from windtunnel.config import Overrides, as_overrides
from windtunnel.engine.execution import Execution
from windtunnel.sweep.config import load_sweep
from windtunnel.sweep.expand import matched_configs
from windtunnel.sweep.tunnels import PRIMITIVES, REFERENCE
from windtunnel.train.config import RunConfig

if TYPE_CHECKING:
    from windtunnel.sweep.shape import ModelSets

#: the shipped sweep whose budget (its overrides, e.g. one thread per run, and jobs) each profile's scorecard takes
BUDGET = {"quick": "paper1-quick", "paper": "paper1"}


def task_metric(task: str) -> str:
    """The metric a task's primitive is scored by (KL for a task outside the scorecard)."""
    return next((metric for t, metric in PRIMITIVES.values() if t == task), "kl_bayes_model")


def budget_overrides(profile: str, overrides: Overrides | None = None) -> list:
    """The overrides of the sweep whose budget a profile's scorecard takes (one thread per run for
    ``quick``), then ``overrides``."""
    budget = load_sweep(BUDGET[profile]) if profile in BUDGET else None
    return [*(budget.override_pairs if budget else []), *as_overrides(overrides)]


def budget_execution(profile: str, execution: Execution, configs: list[RunConfig]) -> Execution:
    """``execution`` with its workers resolved: its own, else the budget sweep's (``auto`` for
    ``quick``: the cores divided by the runs' threads)."""
    default = load_sweep(BUDGET[profile]).jobs if profile in BUDGET else 1
    return execution.resolved(default, [c.train.threads for c in configs])


def tune_configs(task: str, models: list[str], profile: str = "quick", overrides: Overrides | None = None,
                 model_sets: ModelSets | None = None) -> list[RunConfig]:
    """The run configs a search starts from: each model on ``task`` at the profile's own rung with
    the scorecard's budget, in the scorecard's shape (:mod:`~windtunnel.sweep.shape`: a user's model
    takes the transformer's, ``model_sets`` pins fields), capacity-matched to the reference (so the
    winner's run is the scorecard's)."""
    from windtunnel.sweep.shape import model_pairs

    both = [REFERENCE, *[m for m in models if m != REFERENCE]]
    budget = budget_overrides(profile)

    def ovr(model: str) -> list:
        mine = model_pairs(task, model, profile, model_sets) if model != REFERENCE else []  # the scored model's alone
        return [*budget, *mine, *as_overrides(overrides)]

    configs = matched_configs(task, both, profile, ovr, REFERENCE)
    return [c for c in configs if c.model in models]
