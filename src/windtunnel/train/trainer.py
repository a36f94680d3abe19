"""Train one model on one wind tunnel: fresh batches every step, checkpoints, resume, evaluation.

A run lives in one directory (named by the content hash of its resolved config unless the
caller chooses), opened as a :class:`~windtunnel.train.rundir.RunDir`: ``config.json``,
``metrics.jsonl``, ``checkpoints/`` and ``eval.json`` (the command line adds ``plots/``, and
``windtunnel report`` a page). Calling :func:`train` again on the same directory resumes from
the newest resumable checkpoint (or returns at once when the run is finished); on the CPU a
resumed run ends with the same weights as an uninterrupted one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from windtunnel.compat import legacy_group, tracking_group
from windtunnel.evaluate.record import Evaluation
from windtunnel.interrupt import stop_on_signals
from windtunnel.lock import folder_lock
from windtunnel.train.build import build
from windtunnel.train.config import RunConfig
from windtunnel.train.decide import Decision, Race
from windtunnel.train.loop import (  # noqa: F401  (the step's pieces, read from here by callers)
    Loop,
    StepSetup,
    TrainingError,
    autocast_dtype,
    check_loss,
    evaluate_run,
    loss_fn,
    lr_at,
    make_optimizer,
    resolve_device,
    train_step,
)
from windtunnel.train.rundir import RunDir
from windtunnel.train.tracking import Trackers, Tracking


@dataclass
class RunResult:
    run_dir: Path
    config: RunConfig
    n_params: int
    steps: int
    train_seconds: float
    eval: dict[str, Any]


@dataclass(frozen=True)
class Until:
    """Where :func:`train` stops short of ``train.steps``: ``step`` pauses the run there (a pilot of
    the tuner's successive halving), ``decide`` (a :class:`~windtunnel.train.decide.Decision`)
    stops it once its primitive is shown realised, and ``race`` (with ``decide``) pauses it where a
    rival in the same race was decided first. Neither: the run trains to its end."""

    step: int | None = None
    decide: Decision | None = None
    race: Race | None = None  #: with ``decide``: the race it runs in (:class:`~windtunnel.train.decide.Race`)


# ---------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------
def train(config: RunConfig, run_dir: Path | str, progress: bool = True, evaluate_at_end: bool = True,
          trackers: Trackers | str | Sequence[str] = (), until: Until | None = None, **legacy: Any) -> RunResult:
    """Train (or resume, or just load a finished) run in ``run_dir`` and evaluate it.

    The run directory is locked while this runs (:mod:`windtunnel.lock`). A SIGINT or SIGTERM
    stops training after the current step with a resumable checkpoint and raises
    :class:`~windtunnel.interrupt.Interrupted`; calling ``train`` again continues exactly.

    ``until`` (an :class:`Until`) stops it early. ``Until(step=n)`` pauses the run at step ``n``:
    it trains the very run of ``config`` (same schedule, same data) up to ``n`` steps, writes a
    resumable checkpoint and returns without evaluating; a later call continues it exactly.
    ``Until(decide=rule)`` (a :class:`~windtunnel.train.decide.Decision`) stops the run as soon as
    its probe has shown its primitive realised and the full evaluation there agrees
    (:mod:`windtunnel.train.decide`); that evaluation is then the run's ``eval.json``. Without a
    rule, a run decided earlier trains on to its end.

    ``trackers`` (``"tensorboard"``, ``"mlflow"``, ``"wandb"``, or several; or
    :class:`~windtunnel.train.tracking.Trackers`, checked already, with the sweep folder as their
    group) logs the run to experiment trackers as well (:mod:`windtunnel.train.tracking`); the
    plots are then written to ``plots/`` and logged with the evaluation. (The keywords ``stop_at``,
    ``decide`` and ``tracking_group`` still work, deprecated.)
    """
    until = legacy_group("train", until, legacy, Until, rest=True)
    stop_at, decide = until.step, until.decide
    run_dir = Path(run_dir)
    trackers = Trackers.parse(trackers, tracking_group(legacy))  # unknown names and missing extras, before anything is written
    tc = config.train
    device = resolve_device(tc.device)
    if tc.threads:
        torch.set_num_threads(tc.threads)
    task, model = build(config)
    loss_kind = check_loss(tc.loss, task)
    with folder_lock(run_dir, "run"), stop_on_signals() as stop:
        run = RunDir(run_dir)
        run.write_config(config)
        model.to(device)
        end = tc.steps if stop_at is None else min(max(0, stop_at), tc.steps)
        tracking = Tracking(trackers, run_dir)
        loop = Loop(config, run, task, model, loss_kind, device, progress, stop, tracking)
        try:
            if decide is not None and stop_at is None:
                step, seconds, result_eval = loop.decide(decide, end, until.race)
            else:
                (step, seconds), result_eval = loop.to(end), {}
            if not result_eval and evaluate_at_end and step >= tc.steps:
                result_eval = _evaluate_at_end(loop, decide, step, seconds)
            if result_eval and tracking:
                tracking.finish(step, result_eval, [run.eval_path, *_plots_for_trackers(run_dir, result_eval)])
        finally:
            tracking.close()
        stop.check(f"{run_dir} finished its {step} steps")
    return RunResult(run_dir, config, model.n_params(), step, seconds, result_eval)


def _evaluate_at_end(loop: Loop, decide: Decision | None, step: int, seconds: float) -> dict[str, Any]:
    """A finished run's evaluation: its ``eval.json`` when that is of the last step, else a fresh
    one, written (under a ``decide`` rule, undecided: ``steps_to_realise`` says whether the end realised it)."""
    run, tc = loop.run, loop.config.train
    existing = run.eval()
    if existing is not None and existing.get("steps", -1) >= tc.steps:
        return existing
    ev = evaluate_run(loop.model, loop.task, loop.config, loop.progress)
    ev.update(n_params=loop.model.n_params(), steps=step, train_seconds=seconds)
    if decide is not None:  # under a rule, undecided: realised at the end, or not at all
        score = decide.eval_score(ev)
        ev["steps_to_realise"] = tc.steps if score is not None and score >= decide.threshold else None
    run.write_eval(ev)
    return ev


def write_run_plots(run_dir: Path | str, ev: dict[str, Any]) -> list[Path]:
    """``plots/calibration.png`` (and ``plots/lengths.png`` for several evaluation lengths) of a
    run's evaluation; returns the files written."""
    from windtunnel.evaluate.plots import calibration_plot, length_plot

    run_dir = Path(run_dir)
    main = Evaluation(ev).main
    config = run_dir / "config.json"
    run = "{task}: {model}".format(**json.loads(config.read_text())) if config.is_file() else "the run"
    paths = [calibration_plot({"model": {**main["curves"], "step": main["step"]}}, run_dir / "plots" / "calibration.png",
                              title=f"{run}: predictive entropy per position against the exact posterior")]
    if len(ev["lengths"]) > 1:
        paths.append(length_plot(ev["lengths"], run_dir / "plots" / "lengths.png",
                                 title=f"{run}: entropy error per position at each evaluation length"))
    return [Path(p) for p in paths]


def _plots_for_trackers(run_dir: Path, ev: dict[str, Any]) -> list[Path]:
    """The run's plots for its trackers; a plot that cannot be drawn is warned about, not raised."""
    try:
        return write_run_plots(run_dir, ev)
    except Exception as exc:  # noqa: BLE001  the trackers must never stop a run
        import warnings

        warnings.warn(f"{run_dir}: plots not written for the trackers ({type(exc).__name__}: {exc})", RuntimeWarning,
                      stacklevel=2)
        return []


def reevaluate(run_dir: Path | str, progress: bool = False) -> tuple[dict[str, Any], int | None]:
    """``windtunnel eval``: evaluate the newest checkpoint of the run in ``run_dir`` on the held-out
    stream, write ``eval.json`` and its plots; returns the evaluation and, when the run stopped
    before its end, its ``train.steps`` (None otherwise). ``progress``: a bar on stderr."""
    from windtunnel.train.checkpoint import CheckpointError

    run = RunDir.open(run_dir, not_a_run=CheckpointError)
    cfg = run.config
    step, _ = run.checkpoint(purpose="evaluate")
    task, model = run.load_model(step)
    result = evaluate_run(model, task, cfg, progress)
    result.update(n_params=model.n_params(), steps=step, train_seconds=run.state(step).get("train_seconds", 0.0))
    run.write_eval(result)
    write_run_plots(run_dir, result)
    return result, (cfg.train.steps if step < cfg.train.steps else None)
