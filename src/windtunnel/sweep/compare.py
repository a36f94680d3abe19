"""Train several architectures on one wind tunnel under the same conditions and compare them.

Same task, same data stream (one seed), same number of steps and batch size, and the same
parameter budget: every architecture except the reference is sized with
:func:`~windtunnel.models.match_capacity` to within 2% of the reference's parameter count.
This is the main job (`windtunnel run`): a one-experiment sweep (:mod:`windtunnel.sweep`), so
its folder is a sweep folder (``sweep.json``, ``table.csv``, ``summary.md``, ...) with a
calibration plot of every architecture added.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from windtunnel.compat import legacy_execution
from windtunnel.config import ConfigError, Overrides, short_hash
from windtunnel.engine.execution import Execution
from windtunnel.evaluate.plots import calibration_plot
from windtunnel.evaluate.record import Evaluation
from windtunnel.sweep.config import SweepConfig
from windtunnel.sweep.expand import expand
from windtunnel.sweep.run import run_sweep
from windtunnel.train.rundir import RunDir


def compare_sweep(task: str, models: tuple[str, ...], profile: str, reference: str = "transformer") -> SweepConfig:
    """The one-experiment sweep of :func:`compare` (its overrides are applied at expansion, as
    given: they are in every run's config, not in the sweep's)."""
    if not models:
        raise ConfigError("models is empty; name at least one architecture, e.g. --models transformer,lstm")
    return SweepConfig.build(
        {
            "name": f"compare-{task}",
            "description": f"{task}: {', '.join(models)} on the same data stream, steps and optimiser; parameter "
                           f"counts matched to the {reference} within 2%.",
            "profile": profile,
            "experiments": [{"task": task, "models": list(models), "match_capacity": reference}],
            "paper": "paper1",
        },
        where="run",
    )


def compare(
    task: str = "bijection",
    models: tuple[str, ...] = ("transformer", "lstm", "mamba", "mlp"),
    profile: str = "quick",
    overrides: Overrides | None = None,
    out: Path | str | None = None,
    execution: Execution | None = None,
    *,
    reference: str = "transformer",
    **legacy: Any,
) -> tuple[Path, dict[str, Any]]:
    """Train and evaluate every model; write the sweep tables and ``calibration.png``.

    ``overrides``: ``{"train.steps": 500}`` or ``(key, value)`` pairs, for every run;
    ``execution``: how the runs train and what they report (:class:`~windtunnel.engine.execution.Execution`;
    the keywords ``progress`` and ``trackers`` of earlier versions still work, deprecated)."""
    execution = legacy_execution("compare", execution, legacy, Execution)
    if legacy.get("progress") is False:  # compare(progress=False) was silent
        execution = execution.but(log=Execution.quiet().log)
    sweep = compare_sweep(task, models, profile, reference)
    runs = expand(sweep, overrides)
    if out is None:
        out = Path("runs") / f"compare-{task}-{short_hash(''.join(r.config.content_hash() for r in runs))}"
    outcome = run_sweep(sweep, out, execution, runs=runs)
    curves = {}
    for run in runs:
        ev = RunDir(outcome.out / run.name).eval()
        main = Evaluation(ev).main
        curves[f"{run.config.model} ({ev['n_params'] / 1e6:.2f}M)"] = {**main["curves"], "step": main["step"]}
    calibration_plot(curves, outcome.out / "calibration.png", title=f"{task}: model vs exact Bayes entropy")
    return outcome.out, outcome.summary
