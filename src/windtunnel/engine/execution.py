"""How work runs: one validated :class:`Execution`, built once and passed down whole.

The command line builds it from its options (``--backend``, ``--address``, ``--jobs``,
``--log``, ``--reuse``, ``--quiet``); Python code builds it directly::

    from windtunnel.sweep import Execution, run_sweep
    run_sweep(sweep, "runs/my-sweep", Execution(workers=2, progress=False))

Every check happens when it is built (an unknown backend, a bad worker count, an unknown
tracker or one whose extra is missing, a ``--reuse`` folder that does not exist), so nothing is
written before bad input is named. The backends themselves (a local Ray instance, or a cluster
joined at ``address``) are entered with :meth:`Execution.session`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from windtunnel.config import ConfigError, require
from windtunnel.interrupt import stop_on_signals
from windtunnel.lock import folder_lock
from windtunnel.train.tracking import Trackers

BACKENDS = ("local", "ray")


def parse_jobs(value: Any) -> int | Literal["auto"]:
    """``jobs`` as a sweep file or ``--jobs`` gives it: ``'auto'`` or an integer from 1 to 1024."""
    if value == "auto":
        return "auto"
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if isinstance(value, (bool, float)) or not 1 <= n <= 1024:
        raise ConfigError(f"jobs = {value!r}; allowed: an integer from 1 to 1024, or 'auto'")
    return n


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ConfigError(f"backend = {backend!r}; allowed: {', '.join(BACKENDS)}")


def cpu_cores() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def resolve_workers(workers: int | str, threads: Iterable[int]) -> int:
    """How many jobs run at once: ``workers``, or for ``auto`` the cores divided by the most
    threads any job asks for (``train.threads = 0``, torch's default, counts as every core)."""
    n = parse_jobs(workers)
    if n != "auto":
        return n
    cores = cpu_cores()
    return max(1, cores // max((t or cores for t in threads), default=1))


def check_reuse(sources: Iterable[Path | str], out: Path | str | None = None) -> list[Path]:
    """The ``--reuse`` folders, each checked to be a folder (and, given ``out``, not ``out`` itself)."""
    sources = [Path(s) for s in sources]
    for src in sources:
        if not src.is_dir():
            raise ConfigError(f"--reuse {src}: not a folder (give a sweep or scorecard folder holding run folders)")
        if out is not None and src.resolve() == Path(out).resolve():
            raise ConfigError(f"--reuse {src}: the output folder itself")
    return sources


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


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Execution:
    """Where and how jobs run, and what they report. Immutable; :meth:`but` gives a changed copy.

    - ``backend``: ``local`` (this machine) or ``ray`` (a local Ray instance, or the cluster at
      ``address``: ``auto``, ``ray://host:10001``).
    - ``workers``: local backend, jobs at once, each in its own process (an integer, or ``auto``:
      the cores divided by the jobs' ``train.threads``); None: the sweep's own ``jobs``.
    - ``trackers``: experiment trackers every trained run logs to (``tensorboard``, ``mlflow``,
      ``wandb``; names or a comma-separated string), checked once here.
    - ``reuse``: folders whose runs, finished or paused, are copied in rather than trained again.
    - ``progress``: progress bars for runs trained in this process; ``log``: where progress lines go.
    """

    backend: str = "local"
    address: str | None = None
    workers: int | str | None = None
    trackers: Trackers | str | Iterable[str] = ()
    reuse: tuple[Path, ...] | list[Path | str] = ()
    progress: bool = True
    log: Callable[[str], None] = field(default=print, compare=False)

    def __post_init__(self) -> None:
        check_backend(self.backend)
        if self.workers is not None:
            object.__setattr__(self, "workers", parse_jobs(self.workers))
        object.__setattr__(self, "trackers", Trackers.parse(self.trackers))
        object.__setattr__(self, "reuse", tuple(check_reuse(self.reuse)))

    @classmethod
    def quiet(cls, **fields: Any) -> Execution:
        """No progress bars and no log lines (tests, notebooks)."""
        return cls(**{"progress": False, "log": _quiet, **fields})

    def but(self, **changes: Any) -> Execution:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)

    def resolved(self, default: int | str, threads: Iterable[int]) -> Execution:
        """A copy whose ``workers`` is a number: this one's, else ``default`` (a sweep's ``jobs``),
        ``auto`` resolved over the jobs' ``threads``; one on the Ray backend, where the cluster
        schedules."""
        workers = 1 if self.backend == "ray" else resolve_workers(self.workers or default, threads)
        return self.but(workers=workers)

    def local(self) -> Execution:
        """This execution on the local backend (work that reads its results from this machine's
        folders as it goes: a search's candidates, diagnoses after a Ray sweep)."""
        return self if self.backend == "local" else self.but(backend="local", address=None, workers=1)

    def in_this_process(self, n_jobs: int) -> bool:
        """Whether :func:`~windtunnel.engine.jobs.run_jobs` runs ``n_jobs`` jobs here, one after
        another (so a run may draw its progress bar)."""
        return self.backend == "local" and (self.workers in (None, 1) or n_jobs <= 1)

    def session(self):
        """The backend for a block: Ray started or joined (:func:`ray_session`) for ``ray``,
        nothing for ``local``. Entered before anything is written, so that a cluster that cannot
        be joined writes nothing (and before :func:`~windtunnel.interrupt.stop_on_signals`, whose
        handlers then replace the SIGTERM handler ``ray.init`` installs)."""
        return ray_session(self.address) if self.backend == "ray" else nullcontext()

    @contextmanager
    def workspace(self, out: Path | str, kind: str):
        """The set-up of every command that writes a folder of runs (a sweep, a search, a
        comparison), for the block: the ``reuse`` folders checked against ``out``, the backend
        entered (:meth:`session`), ``out`` locked against a second writer of ``kind``
        (:func:`~windtunnel.lock.folder_lock`) and stop signals caught
        (:func:`~windtunnel.interrupt.stop_on_signals`); yields the :class:`~windtunnel.interrupt.StopFlag`."""
        check_reuse(self.reuse, out)
        with self.session(), folder_lock(Path(out), kind), stop_on_signals() as stop:
            yield stop
