"""The one job runner: training runs, search candidates and diagnoses all run through :func:`run_jobs`.

A :class:`Job` is a call, ``fn(*args)``, of a module-level function (so that a worker process or
a Ray task can import it). :func:`run_jobs` runs a list of them in this process one after
another (one worker), in spawned worker processes (several), or as Ray tasks (the Ray backend),
and returns one typed :class:`Outcome` per job: finished (with what ``fn`` returned), failed (with
its error), stopped or skipped. The three ways share one meaning:

- an exception in a job fails that job; the others go on;
- a full disk fails its job and stops the starting of new ones; :class:`~windtunnel.files.DiskFullError`
  is raised once the running ones have ended;
- ``more`` (optional) is asked, as each job ends, for the jobs its result makes due (a ladder's
  next rung); they start on the next free worker, beside what was waiting;
- a stop signal (the first SIGINT or SIGTERM) starts nothing new and is passed on to the running
  jobs, each of which finishes its step and writes a resumable checkpoint;
  :class:`~windtunnel.interrupt.Interrupted` is raised once they have ended. A second signal
  stops everything at once.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from windtunnel.engine.execution import Execution
from windtunnel.files import DiskFullError
from windtunnel.interrupt import Interrupted, StopFlag

Status = Literal["finished", "failed", "stopped", "skipped"]


@dataclass(frozen=True)
class Job:
    """One unit of work: ``fn(*args)``. ``label`` is how the log names it (default: ``name``);
    ``cost`` orders a pool of workers (costliest first, so that the last to finish are short);
    ``resources`` is what a Ray task asks for (``num_cpus``, ``num_gpus``); ``after`` is called
    here, in the process that runs the jobs, with what a finished job returned (a Ray task on
    another node returns what this machine's folders should keep)."""

    name: str
    fn: Callable[..., Any]
    args: tuple = ()
    label: str = ""
    cost: int = 0
    resources: dict[str, float] = field(default_factory=dict)
    after: Callable[[Any], None] | None = None

    def describe(self) -> str:
        return self.label or self.name


@dataclass
class Outcome:
    """What became of one job."""

    name: str
    status: Status
    error: str | None = None  #: one line, ``Type: message``, for a failed job
    value: Any = None  #: what a finished job returned (in this process, or from a Ray task)
    seconds: float = 0.0


def error_line(exc: BaseException) -> str:
    """``Type: message``, first line only: how a failed job's error is reported."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def failures(outcomes: dict[str, Outcome]) -> dict[str, str]:
    """The failed jobs' errors, by job name."""
    return {name: o.error or "" for name, o in outcomes.items() if o.status == "failed"}


#: what :func:`run_jobs` asks after each job that ends: the jobs that may start now (a chain of
#: work whose next step depends on the last one's result, e.g. a ladder's next rung)
More = Callable[[Outcome], Sequence[Job]]


def run_jobs(jobs: Sequence[Job], execution: Execution, stop: StopFlag | None = None,
             more: More | None = None) -> dict[str, Outcome]:
    """Run ``jobs`` as ``execution`` says (see the module doc); one :class:`Outcome` per job, by
    name. ``execution.workers`` is the number of jobs at once on the local backend (None: one).
    ``more``, called here with each job's outcome as it ends (finished or failed, after its
    ``after``), returns jobs to run as well: they join the waiting ones (costliest first), so a
    free worker takes them at once rather than after every job of ``jobs`` has ended."""
    stop = stop or StopFlag()
    n_jobs = len(jobs) if more is None else math.inf  # a chain may bring any number of jobs
    more = more or _nothing
    if execution.workers == "auto":  # jobs name no threads: one job per core
        execution = execution.resolved(1, ())
    if execution.backend == "ray":
        return _on_ray(list(jobs), execution.log, stop, more)
    if execution.in_this_process(n_jobs):
        return _here(list(jobs), execution.log, stop, more)
    return _in_processes(pool_order(jobs), int(execution.workers), execution.log, stop, more)


def _nothing(outcome: Outcome) -> Sequence[Job]:
    return ()


def pool_order(jobs: Sequence[Any], cost: Callable[[Any], float] = lambda job: job.cost) -> list:
    """The order in which a pool of workers starts ``jobs``, each on the first free worker: the
    costliest first, so that the last to finish are short (``cost``: a job's; default ``Job.cost``)."""
    return sorted(jobs, key=cost, reverse=True)


# ---------------------------------------------------------------------------------------
# In this process, one after another
# ---------------------------------------------------------------------------------------
def _here(jobs: list[Job], log: Callable[[str], None], stop: StopFlag, more: More) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    queue = list(jobs)
    while queue:
        job = queue.pop(0)
        stop.check()
        log(f"[{len(outcomes) + 1}/{len(outcomes) + 1 + len(queue)}] {job.describe()}")
        t0 = time.perf_counter()
        try:
            value = job.fn(*job.args)
        except DiskFullError:  # nothing else runs: the next jobs would fail the same way
            raise
        except Exception as exc:  # noqa: BLE001  one job's failure (NaN, OOM, a bad device) must not stop the others
            outcomes[job.name] = Outcome(job.name, "failed", error_line(exc), seconds=time.perf_counter() - t0)
            log(f"  failed: {outcomes[job.name].error}")
        else:
            outcomes[job.name] = Outcome(job.name, "finished", value=value, seconds=time.perf_counter() - t0)
            if job.after is not None:
                job.after(value)
        queue.extend(more(outcomes[job.name]))
    return outcomes


# ---------------------------------------------------------------------------------------
# In worker processes, ``workers`` at a time
# ---------------------------------------------------------------------------------------
def _job_main(fn: Callable[..., Any], args: tuple, conn) -> None:
    """A worker process: its own process group (a Ctrl-C in the terminal reaches only the parent,
    which passes one SIGTERM on), then ``fn(*args)``; sends ("finished", value), ("stopped", text),
    ("disk full", path) or ("failed", error line)."""
    os.setpgrp()
    try:
        value = fn(*args)
        try:
            conn.send(("finished", value))
        except Exception:  # noqa: BLE001  a value that does not pickle: the job itself finished
            conn.send(("finished", None))
    except Interrupted as exc:
        conn.send(("stopped", str(exc)))
    except DiskFullError as exc:
        conn.send(("disk full", str(exc.path)))
    except BaseException as exc:  # noqa: BLE001  reported to the parent, which goes on with the others
        conn.send(("failed", error_line(exc)))
    finally:
        conn.close()


def _in_processes(jobs: list[Job], workers: int, log: Callable[[str], None], stop: StopFlag,
                  more: More) -> dict[str, Outcome]:
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    queue, active, outcomes = list(jobs), {}, {}
    disk_full: str | None = None
    forwarded = False
    try:
        while queue or active:
            while queue and len(active) < workers and stop.signum is None and disk_full is None:
                job = queue.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_job_main, args=(job.fn, job.args, send), name=job.name, daemon=False)
                proc.start()
                send.close()
                active[proc.sentinel] = (job, proc, receive, time.perf_counter())
                log(f"started {job.describe()} ({len(active)} running, {len(queue)} waiting)")
            if not active:
                break
            if stop.signum is not None and not forwarded:
                for _, proc, _, _ in active.values():
                    proc.terminate()  # SIGTERM: finish the step, write a resumable checkpoint
                forwarded = True
            for sentinel in wait(list(active), timeout=1.0):
                job, proc, receive, t0 = active.pop(sentinel)
                kind, detail = receive.recv() if receive.poll() else ("failed", f"its process exited with code {proc.exitcode}")
                proc.join()
                receive.close()
                seconds = time.perf_counter() - t0
                where = f"[{len(outcomes) + 1}/{len(outcomes) + 1 + len(active) + len(queue)}] {job.describe()}"
                if kind == "finished":
                    outcomes[job.name] = Outcome(job.name, "finished", value=detail, seconds=seconds)
                    if job.after is not None:
                        job.after(detail)
                    log(f"{where} finished ({seconds:.0f} s)")
                elif kind == "stopped":
                    outcomes[job.name] = Outcome(job.name, "stopped", seconds=seconds)
                    log(f"{where} {detail}")
                else:
                    if kind == "disk full":
                        disk_full, detail = detail, str(DiskFullError(detail)).split(";")[0]
                    outcomes[job.name] = Outcome(job.name, "failed", detail, seconds=seconds)
                    log(f"{where} failed: {detail}")
                queue = pool_order([*queue, *more(outcomes[job.name])])
    finally:
        for _, proc, _, _ in active.values():  # stopped at once (a second signal): stop them at once too
            proc.terminate()
            proc.join()
    stop.check()
    if disk_full is not None:
        raise DiskFullError(disk_full)
    return outcomes


# ---------------------------------------------------------------------------------------
# As Ray tasks (inside Execution.session())
# ---------------------------------------------------------------------------------------
def _ray_task(fn: Callable[..., Any], args: tuple) -> tuple[str, Any, float]:
    """A Ray task: ``fn(*args)``, timed; returns ("finished", value, seconds), ("stopped", text,
    seconds) or ("disk full", path, seconds), as a worker process reports them. Any other error
    is raised, for Ray to report."""
    t0 = time.perf_counter()
    try:
        return "finished", fn(*args), time.perf_counter() - t0
    except Interrupted as exc:
        return "stopped", str(exc), time.perf_counter() - t0
    except DiskFullError as exc:
        return "disk full", str(exc.path), time.perf_counter() - t0


def _on_ray(jobs: list[Job], log: Callable[[str], None], stop: StopFlag, more: More) -> dict[str, Outcome]:
    """On a stop signal the waiting tasks are dropped and the running ones cancelled without
    force: Ray delivers that as a SIGINT in the task, so each finishes its step and writes a
    resumable checkpoint; a second signal cancels them at once. A full disk cancels the others
    the same way (the waiting ones do not start) and is raised once they have ended."""
    import ray

    task = ray.remote(_ray_task)
    pending: dict[Any, tuple[Job, float]] = {}

    def submit(batch: Sequence[Job]) -> None:
        for job in batch:
            pending[task.options(**job.resources, name=job.name).remote(job.fn, job.args)] = (job, time.perf_counter())

    submit(jobs)
    log(f"submitted {len(pending)} jobs to Ray ({ray.cluster_resources().get('CPU', 0):.0f} CPUs in the cluster)")
    outcomes: dict[str, Outcome] = {}
    cancelled, disk_full = False, None
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            if (stop.signum is not None or disk_full is not None) and not cancelled:
                for ref in pending:
                    ray.cancel(ref, force=False)
                cancelled = True
            if not done:
                continue
            job, t0 = pending.pop(done[0])
            o, full = _ray_outcome(job, done[0], time.perf_counter() - t0, cancelled)
            outcomes[job.name], disk_full = o, disk_full or full
            where = f"[{len(outcomes)}/{len(outcomes) + len(pending)}] {job.describe()}"
            if o.status == "finished":
                if job.after is not None:
                    job.after(o.value)
                log(f"{where} finished ({o.seconds:.0f} s)")
            else:
                log(f"{where} {o.status}" + (f": {o.error}" if o.error else ""))
            if not cancelled and disk_full is None and stop.signum is None:
                submit(more(o))
    except Interrupted:  # a second signal: stop the tasks at once too
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    stop.check()
    if disk_full is not None:
        raise DiskFullError(disk_full)
    return outcomes


def _ray_outcome(job: Job, ref: Any, waited: float, cancelled: bool) -> tuple[Outcome, str | None]:
    """The outcome of a finished Ray task (``waited``: seconds since it was submitted, its time
    when the task itself reported none), and the path of a full disk it met (else None)."""
    import ray

    try:
        kind, detail, seconds = ray.get(ref)
    except ray.exceptions.RayError as exc:  # task errors, crashed workers, lost nodes, OOM kills
        if cancelled:  # stopped (or not started); the rerun resumes or retries it
            return Outcome(job.name, "stopped", seconds=waited), None
        return Outcome(job.name, "failed", error_line(getattr(exc, "cause", None) or exc), seconds=waited), None
    if kind == "finished":
        return Outcome(job.name, "finished", value=detail, seconds=seconds), None
    if kind == "stopped":
        return Outcome(job.name, "stopped", seconds=seconds), None
    return Outcome(job.name, "failed", str(DiskFullError(detail)).split(";")[0], seconds=seconds), detail
