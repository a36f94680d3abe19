"""Run a sweep: every run in its own content-hashed folder, local or on a Ray cluster, then tables.

The sweep folder holds ``sweep.json`` (the sweep config and the resolved list of runs),
one run directory per run (``<task>-<model>-<hash>``, as ``windtunnel train`` makes them),
``results.csv`` (one row per run and evaluation length), ``table.csv`` (means and intervals
over seeds), ``summary.json`` and ``summary.md``. Running the same sweep again skips finished
runs and resumes interrupted ones from their last resumable checkpoint. The runs and their
diagnoses go through the one job runner (:func:`~windtunnel.engine.jobs.run_jobs`), as an
:class:`~windtunnel.engine.execution.Execution` says.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from windtunnel.compat import legacy_execution, legacy_group
from windtunnel.config import Overrides, as_overrides
from windtunnel.engine.execution import Execution
from windtunnel.engine.folders import is_finished, reuse_runs
from windtunnel.engine.jobs import Job, Outcome, failures, run_jobs
from windtunnel.files import atomic_write_text
from windtunnel.interrupt import Interrupted, StopFlag
from windtunnel.sweep.aggregate import aggregate, primitives, run_rows, write_csv
from windtunnel.sweep.config import SweepConfig
from windtunnel.sweep.expand import SweepRun, expand
from windtunnel.sweep.manifest import default_out, read_manifest, unique_runs, write_manifest
from windtunnel.train.config import RunConfig
from windtunnel.train.decide import Decision
from windtunnel.train.rundir import RunDir
from windtunnel.train.tracking import Trackers

__all__ = ["SweepError", "SweepOutcome", "default_out", "diagnose_runs", "is_finished", "read_manifest", "run_sweep",
           "train_one", "write_tables"]


class SweepError(RuntimeError):
    """Some runs of a sweep failed; the others finished and their results are written
    (``outcome``: what the sweep did, its ``failed`` runs with their errors)."""

    def __init__(self, message: str, outcome: SweepOutcome | None = None):
        super().__init__(message)
        self.outcome = outcome


@dataclass
class SweepOutcome:
    """What a sweep did: ``outcomes`` holds each run's (and diagnosis') :class:`~windtunnel.engine.jobs.Outcome`;
    ``trained``, ``skipped`` and ``failed`` (name -> error) list them by kind; ``summary`` is
    ``summary.json``."""

    out: Path
    runs: list[SweepRun]
    trained: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------
# The jobs of a sweep
# ---------------------------------------------------------------------------------------
def train_one(config: dict[str, Any], run_dir: str, progress: bool = False, trackers: Trackers | tuple = (),
              decide: Decision | None = None) -> dict:
    """Train (or resume) one run and return its evaluation: the job every backend runs."""
    from windtunnel.train.trainer import Until, train

    return train(RunConfig.build(config, where="run"), Path(run_dir), progress=progress, trackers=trackers,
                 until=Until(decide=decide)).eval


def decision_of(sweep: SweepConfig, run: SweepRun) -> Decision | None:
    """The early-decision rule of a run of a sweep that decides early: its experiment's primitive
    metric and the sweep's threshold of realised (None for a run of no primitive's experiment)."""
    if not sweep.decide_early or sweep.primitives is None:
        return None
    rule = next((r for r in sweep.primitives.rules.values() if run.experiment in r.experiments()), None)
    return None if rule is None else Decision(rule.metric, sweep.primitives.realised)


def tokens_to(task: str, task_params: dict[str, Any], batch_size: int, steps: int) -> int:
    """Tokens trained on by step ``steps`` (steps x batch x sequence length): the cost by which
    the worker pools start their longest jobs first."""
    from windtunnel.tasks import make_task

    return steps * batch_size * make_task(task, task_params).spec.seq_len


def run_cost(run: SweepRun) -> int:
    """Tokens a run trains on."""
    tc = run.config.train
    return tokens_to(run.config.task, run.config.task_params, tc.batch_size, tc.steps)


def ray_resources(run: SweepRun, sweep: SweepConfig) -> dict[str, float]:
    """What one run asks of the cluster: the sweep's ``resources``, CPUs defaulting to train.threads."""
    res = sweep.resources
    cpus = res.num_cpus if res.num_cpus is not None else float(max(1, run.config.train.threads))
    return {"num_cpus": cpus, "num_gpus": res.num_gpus}


def _keep_here(run: SweepRun, run_dir: Path):
    """What a finished run's job leaves in this machine's folder: a Ray task on another node wrote
    its own copy, so its config and evaluation are written here too."""
    def after(ev: dict[str, Any]) -> None:
        folder = RunDir(run_dir)
        if not folder.is_run():
            folder.write_config(run.config)
        if ev and not is_finished(run_dir, run.config, "decided" in ev):
            folder.write_eval(ev)
    return after


def training_jobs(runs: list[SweepRun], out: Path, sweep: SweepConfig, execution: Execution) -> list[Job]:
    """One job per run, each training it into ``out/<name>`` (with a progress bar only when the
    runs train here one after another)."""
    here = execution.in_this_process(len(runs)) and execution.progress
    trackers = Trackers.parse(execution.trackers, out) if execution.trackers else ()
    return [Job(run.name, train_one, (run.config.model_dump(mode="json"), str(out / run.name), here, trackers,
                                      decision_of(sweep, run)),
                label=f"{run.name} ({run.experiment})", cost=run_cost(run), resources=ray_resources(run, sweep),
                after=_keep_here(run, out / run.name) if execution.backend == "ray" else None)
            for run in runs]


def diagnose_one(run_dir: str, analyses: list[str] | None, n_sequences: int, threads: int = 0) -> None:
    """``windtunnel diagnose`` of one run (on ``threads`` torch threads when not 0)."""
    import torch

    from windtunnel.geometry.diagnose import run_diagnostics

    if threads:
        torch.set_num_threads(threads)
    run_diagnostics(Path(run_dir), analyses, n_sequences=n_sequences, progress=False, strict=False)


def diagnose_runs(out: Path, sweep: SweepConfig, runs: list[SweepRun], execution: Execution,
                  stop: StopFlag | None = None) -> dict[str, Outcome]:
    """Run ``sweep.diagnose`` on every finished run of its architectures that has no
    ``diagnostics.json`` newer than its ``eval.json``, here (they read this machine's folders),
    with ``execution.workers`` at once."""
    spec, todo = sweep.diagnose, []
    for run in runs:
        run_dir = out / run.name
        if run.config.model not in spec.models or not is_finished(run_dir, run.config, sweep.decide_early):
            continue
        done = run_dir / "diagnostics.json"
        if done.is_file() and done.stat().st_mtime >= RunDir(run_dir).eval_path.stat().st_mtime:
            continue
        todo.append(run)
    here = execution.local()
    threads = (lambda run: 0) if here.in_this_process(len(todo)) else (lambda run: run.config.train.threads)
    jobs = [Job(run.name, diagnose_one, (str(out / run.name), spec.analyses, spec.n_sequences, threads(run)),
                label=f"diagnose {run.name}") for run in todo]
    outcomes = run_jobs(jobs, here, stop)
    for o in outcomes.values():
        if o.status == "failed":
            o.error = f"diagnose: {o.error}"
    return outcomes


# ---------------------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stage:
    """The runs :func:`run_sweep` trains, given expanded already: ``runs`` (None: the sweep's own
    expansion) may be a stage of ``plan``, every run of a search (the manifest lists the plan;
    default: ``runs``), and ``retired`` names runs a search replaced, with why
    (:func:`~windtunnel.sweep.manifest.write_manifest`)."""

    runs: list[SweepRun] | None = None
    plan: list[SweepRun] | None = None
    retired: dict[str, str] | None = None


def run_sweep(sweep: SweepConfig, out: Path | str | None = None, execution: Execution | None = None, *,
              overrides: Overrides | None = None, grid: dict[str, list[Any]] | None = None,
              stage: Stage | None = None, **legacy: Any) -> SweepOutcome:
    """Expand ``sweep`` (unless a ``stage`` gives its runs), train what is not finished, write the tables.

    ``overrides`` (``{"train.steps": 500}`` or ``(key, value)`` pairs) and ``grid`` apply to every
    run as in :func:`~windtunnel.sweep.expand.expand`; ``out`` defaults to
    :func:`~windtunnel.sweep.manifest.default_out`. ``execution`` says where the runs train (this
    process, ``workers`` processes, or Ray), which trackers they log to, which folders' runs are
    reused rather than trained again (:func:`~windtunnel.engine.folders.reuse_runs`), and where
    progress goes. ``stage`` (a :class:`Stage`) gives the runs expanded already, as a stage of a
    search's plan. (The deprecated keywords ``backend``, ``address``, ``jobs``, ``trackers``,
    ``reuse``, ``progress`` and ``log`` still work: they build the execution; so do ``runs``,
    ``plan`` and ``retired``: they build the stage.)"""
    stage = legacy_group("run_sweep", stage, legacy, Stage, rest=True)
    execution = legacy_execution("run_sweep", execution, legacy, Execution)
    runs = stage.runs if stage.runs is not None else expand(sweep, overrides, grid)
    out = Path(out) if out is not None else default_out(sweep, as_overrides(overrides))
    distinct = unique_runs(runs)
    execution = execution.resolved(sweep.jobs, [r.config.train.threads for r in distinct])
    log = execution.log
    with execution.workspace(out, "sweep") as stop:
        write_manifest(out, sweep, runs, log, plan=stage.plan, retired=stage.retired)
        reuse_runs([r.config for r in distinct], out, execution.reuse, log, stop)
        todo = [r for r in distinct if not is_finished(out / r.name, r.config, sweep.decide_early)]
        outcome = SweepOutcome(out, runs, [r.name for r in todo], [r.name for r in distinct if r not in todo])
        outcome.outcomes = {name: Outcome(name, "skipped") for name in outcome.skipped}
        log(f"sweep {sweep.name}: {len(distinct)} runs in {out}; {len(outcome.skipped)} finished (skipped), "
            f"{len(todo)} to run")
        if execution.workers > 1:
            log(f"local backend: {execution.workers} runs at once, each in its own process")
        t0 = time.perf_counter()
        try:
            if todo:
                outcome.outcomes.update(run_jobs(training_jobs(todo, out.resolve(), sweep, execution), execution, stop))
            outcome.failed = failures(outcome.outcomes)
            outcome.trained = [n for n in outcome.trained if n not in outcome.failed]
            if sweep.diagnose is not None:
                outcome.failed.update(failures(diagnose_runs(out.resolve(), sweep, distinct, execution, stop)))
        except Interrupted as exc:
            raise _sweep_stopped(exc, out, sweep, runs) from None
        outcome.seconds = time.perf_counter() - t0
        outcome.summary = write_tables(out, sweep, runs, outcome.failed)
    if outcome.failed:
        raise SweepError(
            f"{len(outcome.failed)} of {len(distinct)} runs failed ({', '.join(outcome.failed)}); the others' results "
            f"are in {out}. Run the sweep again to retry them.", outcome)
    return outcome


def _sweep_stopped(exc: Interrupted, out: Path, sweep: SweepConfig, runs: list[SweepRun]) -> Interrupted:
    """The sweep-level message for a stop: which runs are done (their tables written), which are not."""
    distinct = unique_runs(runs)
    done = [r.name for r in distinct if is_finished(out / r.name, r.config, sweep.decide_early)]
    if exc.immediate:
        return Interrupted(exc.signum, f"{len(done)} of {len(distinct)} runs of the sweep in {out} are finished", True)
    write_tables(out, sweep, runs)
    left = [r.name for r in distinct if r.name not in done]
    return Interrupted(
        exc.signum,
        f"sweep {sweep.name}: {len(done)} of {len(distinct)} runs finished"
        + (f" ({', '.join(done)})" if done else "") + f", tables of those in {out}/summary.md; "
        f"{len(left)} to run" + (f" ({', '.join(left)}), each resuming from its newest checkpoint" if left else ""),
    )


def summarise(out: Path, sweep: SweepConfig, runs: list[SweepRun],
              failed: dict[str, str] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary of the finished runs of ``runs`` in ``out`` (what ``summary.json`` holds) and
    their rows (``results.csv``'s), written nowhere."""
    rows, missing = [], []
    for run in runs:  # a run shared by two experiments gives rows to both
        if is_finished(out / run.name, run.config, sweep.decide_early):
            rows.extend(run_rows(run, RunDir(out / run.name).eval()))
        elif run.name not in missing:
            missing.append(run.name)
    table = aggregate(rows, sweep.paper)
    n_runs = len(unique_runs(runs))
    failed = {k: v for k, v in (failed or {}).items() if k in missing}
    summary = {
        "sweep": sweep.name, "description": sweep.description, "paper": sweep.paper, "n_runs": n_runs,
        "finished": n_runs - len(missing), "missing": missing, "failed": failed,
        "table": table,
        "primitives": primitives(table, sweep.primitives) if sweep.primitives else None,
    }
    return summary, rows


def write_tables(out: Path, sweep: SweepConfig, runs: list[SweepRun], failed: dict[str, str] | None = None) -> dict:
    """``results.csv``, ``table.csv``, ``summary.json`` and ``summary.md`` from the finished runs."""
    from windtunnel.sweep.markdown import sweep_markdown

    summary, rows = summarise(out, sweep, runs, failed)
    table = summary["table"]
    if rows:
        write_csv(out / "results.csv", rows)
        write_csv(out / "table.csv", table)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1))
    atomic_write_text(out / "summary.md", sweep_markdown(summary, sweep))
    return summary
