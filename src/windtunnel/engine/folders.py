"""A folder of runs: which runs in it are finished, and runs copied in from other folders
(``--reuse``). A sweep's own files (its name, ``sweep.json``) are :mod:`windtunnel.sweep.manifest`'s."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from windtunnel.config import ConfigError
from windtunnel.interrupt import StopFlag
from windtunnel.lock import LOCK_NAME
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir


def is_finished(run_dir: Path, config: RunConfig, decided: bool = True) -> bool:
    """The run has been evaluated after all of its training steps, or (``decided``) where an early
    decision stopped it (:mod:`windtunnel.train.decide`); an ``eval.json`` that `windtunnel eval`
    wrote for an interrupted run does not count, nor, without ``decided``, an early decision (a
    sweep that does not decide early trains such a run on to its end)."""
    try:
        ev = RunDir(run_dir).eval()
    except (OSError, ValueError):
        return False
    return ev is not None and (ev.get("steps", -1) >= config.train.steps or (decided and "decided" in ev))


def _same_run(src: Path, config: RunConfig) -> bool:
    """``src`` holds the run of ``config`` (its ``config.json``), and no writer holds it."""
    try:
        found = RunConfig.build(json.loads((src / "config.json").read_text()), where=f"run {src}")
    except (OSError, ValueError, ConfigError):
        return False
    return found == config and not (src / LOCK_NAME).exists()


def reuse_runs(configs: Iterable[RunConfig], out: Path, sources: Iterable[Path | str],
               log: Callable[[str], None] = print, stop: StopFlag | None = None) -> list[str]:
    """Copy into ``out`` each run of ``configs`` that ``out`` does not hold at all and a folder of
    ``sources`` holds, finished or paused at a resumable checkpoint (its folder under the same
    name, its ``config.json`` the same config, no writer's lock in it; where several folders hold it, a
    finished copy wins over a paused one, whatever their order); returns the names copied.
    A run ``out`` already has is left as it is; the source's diagnoses are not copied (this
    sweep's diagnose settings may differ); each copy lands under a temporary name and is renamed
    into place, so an interrupted copy leaves no half run folder behind. (The ``sources`` are
    checked where the folder is opened: :meth:`~windtunnel.engine.execution.Execution.workspace`.)"""
    sources = [Path(s) for s in sources]
    copied = []
    for config in configs:
        name = config.run_name()
        dest = Path(out) / name
        if dest.exists():
            continue
        found = [s / name for s in sources if _same_run(s / name, config)]
        if not found:
            continue
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
