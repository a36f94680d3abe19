"""Run a sweep: every run in its own content-hashed folder, local or on a Ray cluster, then tables.

The sweep folder holds ``sweep.json`` (the sweep config and the resolved list of runs),
one run directory per run (``<task>-<model>-<hash>``, as ``windtunnel train`` makes them),
``results.csv`` (one row per run and evaluation length), ``table.csv`` (means and intervals
over seeds), ``summary.json`` and ``summary.md``. Running the same sweep again skips finished
runs and resumes interrupted ones from their last resumable checkpoint.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from windtunnel.config import ConfigError, Override, Overrides, as_overrides, require
from windtunnel.files import DiskFullError, atomic_write_text
from windtunnel.interrupt import Interrupted, StopFlag, stop_on_signals
from windtunnel.lock import folder_lock
from windtunnel.sweep.aggregate import aggregate, primitives, run_rows, write_csv
from windtunnel.sweep.config import SweepConfig, parse_jobs
from windtunnel.sweep.expand import SweepRun, expand
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir
from windtunnel.train.tracking import parse_trackers


class SweepError(RuntimeError):
    """Some runs of a sweep failed; the others finished and their results are written."""


@dataclass
class SweepOutcome:
    out: Path
    runs: list[SweepRun]
    trained: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)


def default_out(sweep: SweepConfig, overrides: Iterable[str | Override] | Mapping[str, Any] | None = None) -> Path:
    """``runs/sweep-<name>-<hash>``, the hash of the sweep config and the ``--set`` overrides (not
    the ``--grid`` axes, so adding seeds to a sweep lands in the same folder and extends it).

    The command line passes the ``--set`` text as typed (the folder names of earlier versions
    are kept); an override given as a ``(key, value)`` pair counts as ``key=<value as JSON>``."""
    import hashlib

    items = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides or [])
    texts = [o if isinstance(o, str) else f"{o[0]}={json.dumps(o[1])}" for o in items]
    digest = hashlib.sha256(f"{sweep.content_hash()} {json.dumps(texts)}".encode()).hexdigest()[:10]
    return Path("runs") / f"sweep-{sweep.name}-{digest}"


def _write_manifest(out: Path, sweep: SweepConfig, runs: list[SweepRun], log: Callable[[str], None]) -> None:
    """Write ``sweep.json``; an existing one must hold a subset of these runs (then it is extended)."""
    path = out / "sweep.json"
    if path.exists():
        try:
            old = {r["name"] for r in json.loads(path.read_text())["runs"]}
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"{path} is unreadable ({exc}); choose another --out (nothing was overwritten)") from None
        new = {r.name for r in runs}
        if not old <= new:
            raise ConfigError(
                f"{out} holds a different sweep ({len(old - new)} of its runs are not in this one); choose another "
                "--out (nothing was overwritten)"
            )
        if new - old:
            log(f"extending the sweep in {out} with {len(new - old)} new runs")
    out.mkdir(parents=True, exist_ok=True)
    doc = {"sweep": sweep.model_dump(mode="json"), "runs": [r.describe() for r in runs]}
    atomic_write_text(path, json.dumps(doc, indent=1))


def read_manifest(out: Path) -> tuple[SweepConfig, list[SweepRun]]:
    """The sweep config and runs recorded in ``out/sweep.json``."""
    path = Path(out) / "sweep.json"
    if not path.is_file():
        raise ConfigError(f"{out} is not a sweep folder (no sweep.json)")
    doc = json.loads(path.read_text())
    sweep = SweepConfig.build(doc["sweep"], where=f"sweep ({path})")
    runs = [SweepRun(RunConfig.build(r["config"], where=f"run {r['name']}"), r["experiment"], r["labels"])
            for r in doc["runs"]]
    return sweep, runs


def is_finished(run_dir: Path, config: RunConfig) -> bool:
    """The run has been evaluated after all of its training steps (an ``eval.json`` that
    `windtunnel eval` wrote for an interrupted run does not count)."""
    try:
        ev = RunDir(run_dir).eval()
    except (OSError, ValueError):
        return False
    return ev is not None and ev.get("steps", -1) >= config.train.steps


def check_reuse(sources: Iterable[Path | str], out: Path | str) -> list[Path]:
    """The ``--reuse`` folders, each checked to be a folder other than ``out``."""
    sources = [Path(s) for s in sources]
    for src in sources:
        if not src.is_dir():
            raise ConfigError(f"--reuse {src}: not a folder (give a sweep or scorecard folder holding run folders)")
        if src.resolve() == Path(out).resolve():
            raise ConfigError(f"--reuse {src}: the output folder itself")
    return sources


def reuse_runs(configs: Iterable[RunConfig], out: Path, sources: Iterable[Path | str],
               log: Callable[[str], None] = print, stop: StopFlag | None = None) -> list[str]:
    """Copy into ``out`` each run of ``configs`` that ``out`` does not hold at all and a folder of
    ``sources`` holds, finished or paused at a resumable checkpoint (its folder under the same
    name, its ``config.json`` the same config, no writer's lock in it; where several folders hold it, a
    finished copy wins over a paused one, whatever their order); returns the names copied.
    A run ``out`` already has is left as it is; the source's diagnoses are not copied (this
    sweep's diagnose settings may differ); each copy lands under a temporary name and is renamed
    into place, so an interrupted copy leaves no half run folder behind."""
    import shutil

    from windtunnel.lock import LOCK_NAME

    sources = check_reuse(sources, out)

    def same(src: Path, config: RunConfig) -> bool:
        try:
            found = RunConfig.build(json.loads((src / "config.json").read_text()), where=f"run {src}")
        except (OSError, ValueError, ConfigError):
            return False
        return found == config and not (src / LOCK_NAME).exists()

    copied = []
    for config in configs:
        name = config.run_name()
        dest = Path(out) / name
        if dest.exists():
            continue
        found = [s / name for s in sources if same(s / name, config)]
        if not found:
            continue
        # a finished copy wins over a paused one, whatever the order of the folders
        src = next((f for f in found if is_finished(f, config)), found[0])
        if stop is not None:
            stop.check()
        tmp = Path(out) / f".{name}.reusing"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(f"{LOCK_NAME}*", "diagnostics*"))
            tmp.rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        copied.append(name)
    if copied:
        log(f"reused {len(copied)} run(s) (finished or paused) from {', '.join(str(s) for s in sources)}")
    return copied


def unique_runs(runs: list[SweepRun]) -> list[SweepRun]:
    """One entry per run folder (a run shared by two experiments is trained once)."""
    first: dict[str, SweepRun] = {}
    for r in runs:
        first.setdefault(r.name, r)
    return list(first.values())


# ---------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------
def train_one(config: dict[str, Any], run_dir: str, progress: bool = False, trackers: tuple[str, ...] = (),
              tracking_group: str | None = None) -> dict[str, Any]:
    """Train (or resume) one run and return its evaluation; what every backend calls (``trackers``:
    the names of the experiment trackers it logs to, ``tracking_group`` the sweep folder)."""
    from windtunnel.train.trainer import train

    res = train(RunConfig.build(config, where="run"), Path(run_dir), progress=progress, trackers=trackers,
                tracking_group=tracking_group)
    return res.eval


def _tracking_args(logging: dict[str, Any]) -> tuple:
    """:func:`train_one`'s positional arguments after the run folder when it logs to trackers
    (none otherwise, so that a plain run is called as before)."""
    return (False, logging["trackers"], logging["tracking_group"]) if logging else ()


def _run_local(runs: list[SweepRun], out: Path, progress: bool, log, stop: StopFlag, jobs: int = 1,
               trackers: tuple[str, ...] = ()) -> dict[str, str]:
    logging = dict(trackers=trackers, tracking_group=str(out)) if trackers else {}
    if jobs > 1:
        work = [Job(run.name, train_one, (run.config.model_dump(mode="json"), str(out / run.name), *_tracking_args(logging)))
                for run in sorted(runs, key=run_cost, reverse=True)]
        return in_processes(work, jobs, log, stop)
    failed = {}
    for i, run in enumerate(runs, 1):
        stop.check()
        log(f"[{i}/{len(runs)}] {run.name} ({run.experiment})")
        try:
            train_one(run.config.model_dump(mode="json"), str(out / run.name), progress=progress, **logging)
        except DiskFullError:
            raise  # the next runs would fail the same way
        except Exception as exc:  # noqa: BLE001  one run's failure (NaN, OOM, a bad device) must not stop the others
            failed[run.name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            log(f"  failed: {failed[run.name]}")
    return failed


# ---------------------------------------------------------------------------------------
# Several runs at once on one machine (--jobs)
# ---------------------------------------------------------------------------------------
def cpu_cores() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def resolve_jobs(jobs: int | str, runs: list[SweepRun]) -> int:
    """How many runs train at once: ``jobs``, or for ``auto`` the cores divided by the most
    threads any run asks for (``train.threads = 0``, torch's default, counts as every core)."""
    n = parse_jobs(jobs)
    if n != "auto":
        return n
    cores = cpu_cores()
    threads = max((r.config.train.threads or cores for r in runs), default=1)
    return max(1, cores // threads)


def tokens_to(task: str, task_params: dict[str, Any], batch_size: int, steps: int) -> int:
    """Tokens trained on by step ``steps`` (steps x batch x sequence length): the cost by which
    the local pools start their longest jobs first."""
    from windtunnel.tasks import make_task

    return steps * batch_size * make_task(task, task_params).spec.seq_len


def run_cost(run: SweepRun) -> int:
    """Tokens a run trains on: the local scheduler starts the most expensive runs first, so that
    the last ones to finish are short."""
    tc = run.config.train
    return tokens_to(run.config.task, run.config.task_params, tc.batch_size, tc.steps)


@dataclass
class Job:
    """One unit of work for :func:`in_processes`: ``fn(*args)`` in a fresh process."""

    name: str
    fn: Callable[..., Any]
    args: tuple


def _job_main(fn: Callable[..., Any], args: tuple, conn) -> None:
    """A job's process: its own process group (a Ctrl-C in the terminal reaches only the sweep,
    which passes one SIGTERM on), then ``fn(*args)``; sends None, or (kind, message)."""
    os.setpgrp()
    try:
        fn(*args)
        conn.send(None)
    except Interrupted as exc:
        conn.send(("stopped", str(exc)))
    except DiskFullError as exc:
        conn.send(("disk full", str(exc.path)))
    except BaseException as exc:  # noqa: BLE001  reported to the sweep, which goes on with the others
        conn.send((type(exc).__name__, f"{type(exc).__name__}: {exc}".splitlines()[0]))
    finally:
        conn.close()


def in_processes(jobs: list[Job], n: int, log, stop: StopFlag) -> dict[str, str]:
    """Run ``jobs`` in order, ``n`` at a time, each in its own (spawned) process; returns the
    failures by job name. On a stop signal no job is started, the running ones get one SIGTERM
    (each writes a resumable checkpoint), and :class:`Interrupted` is raised once they have
    exited. A full disk stops the starting of new jobs and is raised at the end."""
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    queue, active, failed = list(jobs), {}, {}
    disk_full: str | None = None
    done, forwarded = 0, False
    try:
        while queue or active:
            while queue and len(active) < n and stop.signum is None and disk_full is None:
                job = queue.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_job_main, args=(job.fn, job.args, send), name=job.name, daemon=False)
                proc.start()
                send.close()
                active[proc.sentinel] = (job, proc, receive, time.perf_counter())
                log(f"started {job.name} ({len(active)} running, {len(queue)} waiting)")
            if not active:
                break
            if stop.signum is not None and not forwarded:
                for _, proc, _, _ in active.values():
                    proc.terminate()  # SIGTERM: finish the step, write a resumable checkpoint
                forwarded = True
            for sentinel in wait(list(active), timeout=1.0):
                job, proc, receive, t0 = active.pop(sentinel)
                outcome = receive.recv() if receive.poll() else ("exit", f"its process exited with code {proc.exitcode}")
                proc.join()
                receive.close()
                done += 1
                if outcome is None:
                    log(f"[{done}/{len(jobs)}] {job.name} finished ({time.perf_counter() - t0:.0f} s)")
                elif outcome[0] == "stopped":
                    log(f"[{done}/{len(jobs)}] {job.name} {outcome[1]}")
                else:
                    if outcome[0] == "disk full":
                        disk_full = outcome[1]
                        outcome = (outcome[0], str(DiskFullError(disk_full)).split(";")[0])
                    failed[job.name] = outcome[1]
                    log(f"[{done}/{len(jobs)}] {job.name} failed: {outcome[1]}")
    finally:
        for _, proc, _, _ in active.values():  # stopped at once (a second signal): stop them at once too
            proc.terminate()
            proc.join()
    stop.check()
    if disk_full is not None:
        raise DiskFullError(disk_full)
    return failed


def ray_resources(run: SweepRun, sweep: SweepConfig) -> dict[str, float]:
    """What one run asks of the cluster: the sweep's ``resources``, CPUs defaulting to train.threads."""
    res = sweep.resources
    cpus = res.num_cpus if res.num_cpus is not None else float(max(1, run.config.train.threads))
    return {"num_cpus": cpus, "num_gpus": res.num_gpus}


BACKENDS = ("local", "ray")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ConfigError(f"backend = {backend!r}; allowed: {', '.join(BACKENDS)}")


@contextmanager
def ray_session(address: str | None = None):
    """Ray for the block: a local instance started (``address`` None) or the cluster at
    ``address`` joined, then shut down; nothing is done when this process has Ray already.
    One that cannot be started or joined is a :class:`ConfigError` naming ``--address``."""
    ray = require("ray", "ray", "--backend ray")
    if ray.is_initialized():
        yield ray
        return
    try:
        ray.init(address=address, include_dashboard=False, logging_level="warning", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"--address {address}: cannot start or join a Ray cluster ({exc})") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def backend_session(backend: str, address: str | None = None):
    """``backend`` checked and, for Ray, started or joined (:func:`ray_session`): what a sweep
    enters before it writes anything, so that a bad ``--backend`` or ``--address`` writes nothing.
    (Entered before :func:`~windtunnel.interrupt.stop_on_signals`, whose handlers then replace
    the SIGTERM handler ``ray.init`` installs.)"""
    check_backend(backend)
    return ray_session(address) if backend == "ray" else nullcontext()


def _run_ray(runs: list[SweepRun], out: Path, sweep: SweepConfig, log, stop: StopFlag,
             trackers: tuple[str, ...] = ()) -> dict[str, str]:
    """Train ``runs`` as Ray tasks (inside :func:`ray_session`). On a stop signal the waiting
    tasks are dropped and the running ones cancelled without force: Ray delivers that as a SIGINT
    in the task, so each finishes its step and writes a resumable checkpoint, as the local
    backend's runs do; :class:`Interrupted` is raised once they have returned. A second signal
    kills them at once (they resume from their newest resumable checkpoint)."""
    import ray

    failed: dict[str, str] = {}
    remote = ray.remote(train_one)
    pending = {
        remote.options(**ray_resources(run, sweep), name=run.name).remote(
            run.config.model_dump(mode="json"), str(out / run.name),
            *_tracking_args(dict(trackers=trackers, tracking_group=str(out)) if trackers else {})
        ): run
        for run in runs
    }
    log(f"submitted {len(pending)} runs to Ray ({ray.cluster_resources().get('CPU', 0):.0f} CPUs in the cluster)")
    done_count, cancelled = 0, False
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            if stop.signum is not None and not cancelled:
                for ref in pending:
                    ray.cancel(ref, force=False)
                cancelled = True
            if not done:
                continue
            run = pending.pop(done[0])
            done_count += 1
            try:
                ev = ray.get(done[0])
            except ray.exceptions.RayError as exc:  # task errors, crashed workers, lost nodes, OOM kills
                if cancelled:  # stopped (or not started); the rerun resumes or retries it
                    log(f"[{done_count}/{len(runs)}] {run.name} stopped")
                    continue
                cause = getattr(exc, "cause", None) or exc
                failed[run.name] = f"{type(cause).__name__}: {cause}".splitlines()[0]
                log(f"[{done_count}/{len(runs)}] {run.name} failed: {failed[run.name]}")
                continue
            run_dir = RunDir(out / run.name)  # a worker on another node wrote its own copy: keep the results here too
            if not run_dir.is_run():
                run_dir.write_config(run.config)
            if not is_finished(run_dir.path, run.config):
                run_dir.write_eval(ev)
            log(f"[{done_count}/{len(runs)}] {run.name} finished")
    except Interrupted:  # a second signal: stop the runs at once too
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    stop.check()
    return failed


# ---------------------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------------------
def run_sweep(
    sweep: SweepConfig,
    out: Path | str | None = None,
    backend: Literal["local", "ray"] = "local",
    address: str | None = None,
    overrides: Overrides | None = None,
    grid: dict[str, list[Any]] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    runs: list[SweepRun] | None = None,
    jobs: int | str | None = None,
    trackers: str | Iterable[str] = (),
    reuse: Iterable[Path | str] = (),
) -> SweepOutcome:
    """Expand ``sweep`` (unless ``runs`` is given), train what is not finished, write the tables.

    ``overrides`` (``{"train.steps": 500}`` or ``(key, value)`` pairs) and ``grid`` apply to every
    run as in :func:`~windtunnel.sweep.expand.expand`. ``jobs`` (default: the sweep's ``jobs``)
    is how many runs the local backend trains at once, each in its own process. ``trackers``
    (``"tensorboard"``, ``"mlflow"``, ``"wandb"``) logs every run it trains to those experiment
    trackers, grouped by the sweep folder (:mod:`windtunnel.train.tracking`); runs finished
    before are not logged again. ``reuse`` names folders (other sweeps, scorecards) whose runs of
    this sweep, finished or paused, are copied in first instead of trained again (:func:`reuse_runs`)."""
    # every argument is checked before anything is written: the backend, the runs, jobs, trackers
    check_backend(backend)
    trackers = parse_trackers(trackers)
    runs = runs if runs is not None else expand(sweep, overrides, grid)
    out = Path(out) if out is not None else default_out(sweep, as_overrides(overrides))
    reuse = check_reuse(reuse, out)
    distinct = unique_runs(runs)
    n_jobs = resolve_jobs(sweep.jobs if jobs is None else jobs, distinct)
    if backend == "ray":
        n_jobs = 1  # Ray schedules the runs; diagnoses run here, one at a time
    with backend_session(backend, address), folder_lock(out, "sweep"), stop_on_signals() as stop:
        _write_manifest(out, sweep, runs, log)
        reuse_runs([r.config for r in distinct], out, reuse, log, stop)
        todo = [r for r in distinct if not is_finished(out / r.name, r.config)]
        outcome = SweepOutcome(out, runs, [r.name for r in todo], [r.name for r in distinct if r not in todo])
        log(f"sweep {sweep.name}: {len(distinct)} runs in {out}; {len(outcome.skipped)} finished (skipped), "
            f"{len(todo)} to run")
        if n_jobs > 1:
            log(f"local backend: {n_jobs} runs at once, each in its own process")
        t0 = time.perf_counter()
        try:
            if todo:
                if backend == "local":
                    outcome.failed = _run_local(todo, out.resolve(), progress, log, stop, n_jobs, trackers)
                else:
                    outcome.failed = _run_ray(todo, out.resolve(), sweep, log, stop, trackers)
            outcome.trained = [n for n in outcome.trained if n not in outcome.failed]
            if sweep.diagnose is not None:
                outcome.failed.update(diagnose_runs(outcome.out.resolve(), sweep, distinct, log, n_jobs, stop))
        except Interrupted as exc:
            raise _sweep_stopped(exc, out, sweep, runs) from None
        outcome.seconds = time.perf_counter() - t0
        outcome.summary = write_tables(outcome.out, sweep, runs, outcome.failed)
    if outcome.failed:
        raise SweepError(
            f"{len(outcome.failed)} of {len(distinct)} runs failed ({', '.join(outcome.failed)}); the others' results "
            f"are in {outcome.out}. Run the sweep again to retry them."
        )
    return outcome


def _sweep_stopped(exc: Interrupted, out: Path, sweep: SweepConfig, runs: list[SweepRun]) -> Interrupted:
    """The sweep-level message for a stop: which runs are done (their tables written), which are not."""
    distinct = unique_runs(runs)
    done = [r.name for r in distinct if is_finished(out / r.name, r.config)]
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


def diagnose_one(run_dir: str, analyses: list[str] | None, n_sequences: int, threads: int = 0) -> None:
    """``windtunnel diagnose`` of one run (on ``threads`` torch threads when not 0)."""
    import torch

    from windtunnel.geometry.diagnose import run_diagnostics

    if threads:
        torch.set_num_threads(threads)
    run_diagnostics(Path(run_dir), analyses, n_sequences=n_sequences, progress=False, strict=False)


def diagnose_runs(out: Path, sweep: SweepConfig, runs: list[SweepRun], log, jobs: int = 1,
                  stop: StopFlag | None = None) -> dict[str, str]:
    """Run ``sweep.diagnose`` on every finished run of its architectures that has no
    ``diagnostics.json`` newer than its ``eval.json`` (``jobs`` at once, each in its own process,
    when more than one); returns the failures by run name."""
    spec, todo = sweep.diagnose, []
    for run in runs:
        run_dir = out / run.name
        if run.config.model not in spec.models or not is_finished(run_dir, run.config):
            continue
        done = run_dir / "diagnostics.json"
        if done.is_file() and done.stat().st_mtime >= RunDir(run_dir).eval_path.stat().st_mtime:
            continue
        todo.append(run)
    if jobs > 1 and len(todo) > 1:
        work = [Job(f"diagnose {run.name}", diagnose_one,
                    (str(out / run.name), spec.analyses, spec.n_sequences, run.config.train.threads)) for run in todo]
        return {k.removeprefix("diagnose "): f"diagnose: {v}"
                for k, v in in_processes(work, jobs, log, stop or StopFlag()).items()}
    failed = {}
    for run in todo:
        log(f"diagnose {run.name}")
        try:
            diagnose_one(str(out / run.name), spec.analyses, spec.n_sequences)
        except Exception as exc:  # noqa: BLE001  a failed diagnosis is reported like a failed run
            failed[run.name] = f"diagnose: {type(exc).__name__}: {exc}".splitlines()[0]
            log(f"  failed: {failed[run.name]}")
    return failed


def write_tables(out: Path, sweep: SweepConfig, runs: list[SweepRun], failed: dict[str, str] | None = None) -> dict:
    """``results.csv``, ``table.csv``, ``summary.json`` and ``summary.md`` from the finished runs."""
    from windtunnel.sweep.markdown import sweep_markdown

    rows, missing = [], []
    for run in runs:  # a run shared by two experiments gives rows to both
        if is_finished(out / run.name, run.config):
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
    if rows:
        write_csv(out / "results.csv", rows)
        write_csv(out / "table.csv", table)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1))
    atomic_write_text(out / "summary.md", sweep_markdown(summary, sweep))
    return summary
