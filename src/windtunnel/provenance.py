"""Where a recorded measurement ran: the one helper behind every record the project commits
(``results/``, the shipped reference data, the key-frame study's records).

:func:`provenance` gives a record's ``provenance`` object: the command made portable (a path inside
the checkout relative to it, any other path of one machine by its last name: :func:`portable`),
the checkout's commit, then one of two forms:

- a record shown on the results pages (``scripts/render_results.py`` requires these keys): the
  ``date``, the ``machine`` in words (:func:`machine_line`) and what ran beside it
  (``concurrent``, as the person who ran it says);
- a measurement timed here (``measured``, from :func:`measuring`): whether the checkout's code
  differed from its commit (``dirty``), when it ``started``, its ``wall_seconds``, the ``machine``
  as data (:func:`machine_info`) and what ran beside it as sampled while it ran
  (``load_while_running``: :class:`BesideMonitor`).

A key given to :func:`provenance` replaces its default (a commit the runs were trained at, the date
of a file); one given as None keeps it; any other is added.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

#: the checkout that holds the package (in a source tree; a record made elsewhere names its own ``root``)
REPO = Path(__file__).resolve().parents[2]

#: the start of an absolute path of one machine (a checkout, a home, a scratch folder): no record
#: holds one (system programs such as /usr/bin/time are the same everywhere and may stay)
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|tmp|Users|mnt|opt|scratch|var|private)/")
_INTERPRETER = re.compile(r"python[\d.]*$")


def portable(command: str, root: Path = REPO) -> str:
    """``command`` as a record keeps it: a path inside the repository relative to it, and any other
    path of this machine by its last name (``--out /work/runs/x`` -> ``--out x``)."""
    def word(w: str) -> str:
        key, eq, value = w.rpartition("=") if w.startswith("-") and "=" in w else ("", "", w)
        if not value.startswith("/"):
            return w
        path = Path(value)
        if path.is_relative_to(root):  # the checkout may lie anywhere (a CI's /check/...)
            return key + eq + (path.relative_to(root).as_posix() or ".")
        return key + eq + path.name if MACHINE_PATH.match(value) else w
    return " ".join(word(w) for w in command.split(" "))


def program(cmdline: str | list[str]) -> str:
    """Another process by its program's name (never its paths): the executable's name, for an
    interpreter the script's name or ``-m`` module, and the subcommand where one follows
    (``/x/.venv/bin/python -m pytest -q tests`` -> ``python -m pytest``)."""
    words = cmdline.split() if isinstance(cmdline, str) else [w for a in cmdline for w in a.split()]
    if not words:
        return "?"
    name, rest = words[0].rsplit("/", 1)[-1], words[1:]
    if _INTERPRETER.match(name):
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("-m", "-c"):
            i += 2 if rest[i] in ("-W", "-X") else 1  # an option that takes the next word
        if i < len(rest) and rest[i] == "-c":
            return f"{name} -c"
        if i + 1 < len(rest) and rest[i] == "-m":
            name, rest = f"{name} -m {rest[i + 1]}", rest[i + 2:]
        elif i < len(rest):
            name, rest = f"{name} {rest[i].rsplit('/', 1)[-1]}", rest[i + 1:]
    if rest and re.fullmatch(r"[a-z][a-z0-9_-]*", rest[0]):
        name += f" {rest[0]}"
    return name


# ---------------------------------------------------------------------------------------
# The checkout and the machine
# ---------------------------------------------------------------------------------------
def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout.strip()


def head_commit(root: Path = REPO) -> str:
    """The checkout's commit (asked in the checkout ``root``, wherever the program was started from)."""
    return _git(root, "rev-parse", "HEAD")


def is_dirty(root: Path = REPO, paths: tuple[str, ...] = ("src", "scripts")) -> bool:
    """Whether the checkout's ``paths`` differ from its commit (changed or untracked files)."""
    return bool(_git(root, "status", "--porcelain", "--", *paths))


def machine_line() -> str:
    """The machine in words: system, architecture, CPU model and cores."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores"


def machine_info() -> dict[str, Any]:
    """The machine as data: platform, Python, cores, torch and its threads in this process."""
    import torch

    return {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}


# ---------------------------------------------------------------------------------------
# What ran beside a measurement
# ---------------------------------------------------------------------------------------
class BesideMonitor:
    """Samples the load average and the other processes busy on the CPU (above 20% of one core),
    each by its program's name (:func:`program`), every ``every`` seconds while a measurement
    runs: what else was running during it. Without ``psutil``, the load average alone."""

    def __init__(self, every: float = 60.0):
        self.every, self.samples, self.others = every, [], {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        self.samples.append(os.getloadavg()[0])
        try:
            import psutil
        except ImportError:  # the load average alone
            return
        me = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
        procs = [p for p in psutil.process_iter(["pid", "name", "cmdline"]) if p.info["pid"] not in me]
        for p in procs:
            try:
                p.cpu_percent(None)
            except psutil.Error:
                pass
        time.sleep(1.0)
        for p in procs:
            try:
                cpu = p.cpu_percent(None)
            except psutil.Error:
                continue
            if cpu > 20:
                cmd = program(p.info["cmdline"] or [p.info["name"] or "?"])  # by its name, never its paths
                self.others[cmd] = max(self.others.get(cmd, 0.0), round(cpu))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every)

    def __enter__(self) -> BesideMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        s = self.samples or [float("nan")]
        return {"load1_min": min(s), "load1_mean": sum(s) / len(s), "load1_max": max(s), "n_samples": len(self.samples),
                "other_busy_processes": dict(sorted(self.others.items(), key=lambda kv: -kv[1])[:8])}


@dataclass
class Measurement:
    """A measurement under way (:func:`measuring`): when it started, its clock, what ran beside it."""

    started: str
    t0: float
    beside: BesideMonitor

    def wall_seconds(self) -> float:
        """Seconds since it started, to a tenth."""
        return round(time.perf_counter() - self.t0, 1)


@contextmanager
def measuring(every: float = 60.0) -> Iterator[Measurement]:
    """Time the block and sample what runs beside it every ``every`` seconds; pass the
    :class:`Measurement` to :func:`provenance` (in the block or after it: the wall time runs to that call)."""
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with BesideMonitor(every) as beside:
        yield Measurement(started, time.perf_counter(), beside)


# ---------------------------------------------------------------------------------------
# The record's provenance
# ---------------------------------------------------------------------------------------
def provenance(command: str, *, concurrent: str | None = None, measured: Measurement | None = None,
               root: Path = REPO, **given: Any) -> dict[str, Any]:
    """A record's provenance for ``command``, run in the checkout ``root`` on this machine (the two
    forms: the module doc). Without ``measured``, ``concurrent`` (what ran beside it) is required."""
    base: dict[str, Any] = {"command": portable(command, root), "commit": head_commit(root)}
    if measured is None:
        if not concurrent:
            raise ValueError("provenance: say what ran beside the measurement (concurrent)")
        base |= {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine_line(),
                 "concurrent": concurrent}
    else:
        base |= {"dirty": is_dirty(root), "started": measured.started, "wall_seconds": measured.wall_seconds(),
                 "machine": machine_info(), "load_while_running": measured.beside.summary()}
    return base | {k: v for k, v in given.items() if v is not None}
