"""Train several architectures on one wind tunnel under the same conditions and compare them.

Same task, same data stream (one seed), same number of steps and batch size, and the same
parameter budget: every architecture except the reference is sized with
:func:`~windtunnel.models.match_capacity` to within 2% of the reference's parameter count.
This is the main job (`windtunnel run`): a one-experiment sweep (:mod:`windtunnel.sweep`), so
its folder is a sweep folder (``sweep.json``, ``table.csv``, ``summary.md``, ...) with a
calibration plot of every architecture added.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windtunnel.compat import OLD_SIGNATURES, legacy_call, legacy_execution
from windtunnel.config import ConfigError, Overrides, short_hash
from windtunnel.engine.execution import Execution
from windtunnel.evaluate.plots import calibration_plot
from windtunnel.evaluate.record import Evaluation
from windtunnel.sweep.config import SweepConfig
from windtunnel.sweep.expand import expand
from windtunnel.sweep.run import Stage, run_sweep
from windtunnel.train.rundir import RunDir


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` compares: the architectures ``models`` on the wind tunnel ``task``, at
    the ``profile``'s budget, every one but the ``reference`` sized to the reference's parameter count."""

    task: str = "bijection"
    models: tuple[str, ...] = ("transformer", "lstm", "mamba", "mlp")
    profile: str = "quick"
    reference: str = "transformer"


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


def compare(comparison: Comparison | None = None, *legacy_args: Any, overrides: Overrides | None = None,
            out: Path | str | None = None, execution: Execution | None = None, **legacy: Any) -> tuple[Path, dict[str, Any]]:
    """Train and evaluate every model of ``comparison`` (:class:`Comparison`; its defaults when
    None); write the sweep tables and ``calibration.png``.

    ``overrides``: ``{"train.steps": 500}`` or ``(key, value)`` pairs, for every run;
    ``execution``: how the runs train and what they report (:class:`~windtunnel.engine.execution.Execution`).
    (The positional form ``compare(task, models, profile, overrides, out, execution,
    reference=...)``, and its keywords ``progress`` and ``trackers`` still work, deprecated.)"""
    if isinstance(comparison, str) or legacy_args or legacy.keys() & set(OLD_SIGNATURES["compare"][0]):
        old = {"overrides": overrides, "out": out, "execution": execution}
        legacy.update({k: v for k, v in old.items() if v is not None})
        comparison, overrides, out, execution = _old_form((comparison, *legacy_args), legacy)
    execution = legacy_execution("compare", execution, legacy, Execution)
    if legacy.get("progress") is False:  # compare(progress=False) was silent
        execution = execution.but(log=Execution.quiet().log)
    comparison = comparison or Comparison()
    sweep = compare_sweep(comparison.task, comparison.models, comparison.profile, comparison.reference)
    runs = expand(sweep, overrides)
    if out is None:
        out = Path("runs") / f"compare-{comparison.task}-{short_hash(''.join(r.config.content_hash() for r in runs))}"
    outcome = run_sweep(sweep, out, execution, stage=Stage(runs))
    curves = {}
    for run in runs:
        ev = RunDir(outcome.out / run.name).eval()
        main = Evaluation(ev).main
        curves[f"{run.config.model} ({ev['n_params'] / 1e6:.2f}M)"] = {**main["curves"], "step": main["step"]}
    calibration_plot(curves, outcome.out / "calibration.png", title=f"{comparison.task}: model vs exact Bayes entropy")
    return outcome.out, outcome.summary


def _old_form(args: tuple[Any, ...], legacy: dict[str, Any]) -> tuple[Comparison, Any, Any, Any]:
    """A call in :func:`compare`'s earlier form (compat.legacy_call), as (comparison, overrides,
    out, execution); ``legacy`` keeps the keywords the execution shim reads."""
    names = OLD_SIGNATURES["compare"][0]
    given = legacy_call("compare", args, {k: legacy.pop(k) for k in list(legacy) if k in names},
                        "compare(Comparison(task, models, profile, reference), overrides=..., out=..., execution=...)",
                        stacklevel=5)
    what = {k: given[k] for k in ("task", "profile", "reference") if k in given}
    if "models" in given:
        what["models"] = tuple(given["models"])
    return Comparison(**what), given.get("overrides"), given.get("out"), given.get("execution")
