"""The key-frame study, run: each job of its plan (:mod:`.keyframe_plan`) trains its run folder
(``<runs>/<job>``, resumed when it is there), diagnoses it (key_frame, ablation, dynamics on the
study's probe batch) and writes one record, ``<results>/<job>.json`` (:mod:`.keyframe_record`,
with its provenance: :func:`windtunnel.provenance.provenance`). The jobs go through the job runner
(:func:`~windtunnel.engine.jobs.run_jobs`) as an :class:`~windtunnel.engine.execution.Execution`
says: one after another here, or several at once in worker processes (every job trains on one
torch thread), a failed job reported while the others go on.

    from windtunnel.engine.execution import Execution
    from windtunnel.sweep.studies.keyframe import StudyOptions, run_study

    options = StudyOptions(Path("results/keyframe"), Path("runs/keyframe"))
    run_study(["transformer-1x-s0", "tinygpt-1x-*"], options, Execution(workers=2))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windtunnel.engine.execution import Execution
from windtunnel.engine.jobs import Job, Outcome, run_jobs
from windtunnel.files import atomic_write_text
from windtunnel.interrupt import stop_on_signals
from windtunnel.provenance import REPO, measuring, provenance
from windtunnel.sweep.studies.keyframe_plan import ANALYSES, CELLS, PROBE, PROFILE, TASK, job_name, job_overrides, selected
from windtunnel.sweep.studies.keyframe_record import summarise
from windtunnel.train.config import RunConfig, resolve_run

#: what a record's provenance says of its wall time
NOTE = "training resumes from its folder: wall_seconds covers this invocation only"

PlannedJob = tuple[str, int, int]  # (cell, budget multiple, seed)


@dataclass(frozen=True)
class StudyOptions:
    """Where the study writes and what its records say: ``results`` (one record per job),
    ``runs`` (one run folder per job); ``again`` runs jobs that have a record again (the record
    keeps the earlier run's commit, start and error in ``rerun_of``); ``steps`` replaces every
    job's budget and ``probe`` the diagnostics' probe batch (checks of the machinery, not the
    study: None keeps the plan's); ``command`` is the command a record names (``--only <job>``
    and the options above added); ``root`` the checkout (the command's paths, the commit)."""

    results: Path
    runs: Path
    again: bool = False
    steps: int | None = None
    probe: dict[str, int] | None = None
    command: str = "python scripts/keyframe_study.py run"
    root: Path = REPO

    def probe_batch(self) -> dict[str, int]:
        return dict(self.probe or PROBE)

    def record_path(self, job: PlannedJob) -> Path:
        return Path(self.results) / f"{job_name(*job)}.json"

    def job_command(self, job: PlannedJob) -> str:
        return (f"{self.command} --only {job_name(*job)}" + (" --again" if self.again else "")
                + (f" --steps {self.steps}" if self.steps is not None else ""))


def job_config(job: PlannedJob, options: StudyOptions) -> RunConfig:
    """The run config of ``job``: the quick bijection profile with the job's overrides."""
    cell, budget, seed = job
    overrides = job_overrides(cell, budget, seed)
    if options.steps is not None:
        overrides["train.steps"] = options.steps
    return resolve_run(TASK, CELLS[cell].model, PROFILE, overrides)


def record(run_dir: Path, diag: dict[str, Any], job: PlannedJob, probe: dict[str, int]) -> dict[str, Any]:
    """The record of ``job``'s run diagnosed on ``probe`` (no provenance yet)."""
    cell, budget, seed = job
    return summarise(run_dir, diag, job=job_name(*job), cell=cell, budget=budget, seed=seed,
                     factor=CELLS[cell].factor, what=CELLS[cell].what, probe=probe)


def run_job(job: PlannedJob, options: StudyOptions) -> dict[str, Any]:
    """Train (or resume) and diagnose ``job``'s run, write its record and return it: the job
    that :func:`run_jobs` runs, here or in a worker process."""
    from windtunnel.geometry.diagnose import run_diagnostics
    from windtunnel.train.trainer import train

    out = options.record_path(job)
    previous = json.loads(out.read_text()) if out.is_file() else None
    run_dir = Path(options.runs) / job_name(*job)
    cfg = job_config(job, options)
    with measuring() as measured:
        train(cfg, run_dir, progress=False)
        diag = run_diagnostics(run_dir, ANALYSES, progress=False, **options.probe_batch())
    doc = record(run_dir, diag, job, options.probe_batch())
    if previous is not None:  # a job run again: the same training, or the record says how it differs
        doc["rerun_of"] = {"commit": previous["provenance"]["commit"], "started": previous["provenance"]["started"],
                           "entropy_error": previous["entropy_error"]["value"]}
    doc["provenance"] = provenance(options.job_command(job), measured=measured, root=options.root, note=NOTE)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


def _reported(log, out: Path):
    """What the log says of a finished job: its layer-0 statistic and error, and its record."""
    def after(doc: dict[str, Any]) -> None:
        if doc:
            log(f"{doc['job']}: L0 raw {doc['key_frame']['tokens_raw']['mean'][0]:.3f}, "
                f"entropy error {doc['entropy_error']['value']:.4f} -> {out}")
    return after


def study_jobs(jobs: list[PlannedJob], options: StudyOptions, execution: Execution) -> list[Job]:
    """One :class:`~windtunnel.engine.jobs.Job` per planned job (the longest budgets first in a pool)."""
    out = []
    for job in jobs:
        name, steps = job_name(*job), job_config(job, options).train.steps
        out.append(Job(name, run_job, (job, options), label=f"{name}: training {steps} steps in {Path(options.runs) / name}",
                       cost=steps, resources={"num_cpus": 1.0},
                       after=_reported(execution.log, options.record_path(job))))
    return out


def todo(only: list[str] | None, options: StudyOptions) -> list[PlannedJob]:
    """The selected jobs to run: those without a record (every selected one with ``again``)."""
    return [j for j in selected(only) if options.again or not options.record_path(j).is_file()]


def run_study(only: list[str] | None, options: StudyOptions, execution: Execution) -> dict[str, Outcome]:
    """Run the selected jobs (names or globs; None: the whole plan) that :func:`todo` leaves, as
    ``execution`` says; one :class:`~windtunnel.engine.jobs.Outcome` per job, by name. Each run
    folder is locked while it trains, so that two invocations may run different jobs at once."""
    jobs = todo(only, options)
    execution = execution.resolved(1, [1] * len(jobs))  # every job trains on one torch thread
    with execution.session(), stop_on_signals() as stop:
        return run_jobs(study_jobs(jobs, options, execution), execution, stop)


def collect(only: list[str] | None, options: StudyOptions) -> list[str]:
    """Rebuild the data of every selected record from its run folder's config, evaluation and
    diagnostics (after a change to what :func:`~.keyframe_record.summarise` keeps), keeping its
    provenance (and ``rerun_of``); returns the jobs rebuilt."""
    done = []
    for job in selected(only):
        out, run_dir = options.record_path(job), Path(options.runs) / job_name(*job)
        if not out.is_file() or not (run_dir / "diagnostics.json").is_file():
            continue
        old = json.loads(out.read_text())
        doc = record(run_dir, json.loads((run_dir / "diagnostics.json").read_text()), job, old.get("probe", PROBE))
        doc |= {k: old[k] for k in ("rerun_of", "provenance") if k in old}
        atomic_write_text(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        done.append(job_name(*job))
    return done
