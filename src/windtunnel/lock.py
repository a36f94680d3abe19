"""One writer per folder: an exclusive ``.lock`` file in a run or sweep folder while it is written.

The lock is taken once per run (or sweep), not per step: a small file with the holder's PID,
host, start time and command is written under a unique name and hard-linked to ``.lock``.
``os.link`` fails if ``.lock`` exists, atomically, also on NFS and other shared filesystems,
so of two writers exactly one wins, whichever host they run on. The loser gets
:class:`FolderLocked` naming the holder. A lock whose holder no longer runs on this host (a
process killed with SIGKILL, a crashed machine's reboot) is taken over with a one-line notice;
a lock from another host is never guessed stale. Readers take no lock.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from windtunnel.files import write_synced
from windtunnel.interrupt import command_line

LOCK_NAME = ".lock"


class FolderLocked(RuntimeError):
    """Another process is writing this folder."""


def _holder(lock: Path) -> dict | None:
    """The lock's record, or None when it vanished meanwhile (its holder released it)."""
    try:
        return json.loads(lock.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), where /proc tells."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _running(holder: dict) -> bool:
    """The holder still runs: its PID exists here and did not start after the lock was taken
    (a PID reused by another process after a reboot or a container restart does not count)."""
    pid = holder["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    started = _start_time(pid)
    return started is None or started <= holder["started"] + 2


def _describe(holder: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["started"]))
    return f"pid {holder['pid']} on host {holder['host']}, started {when}, command: {holder['command']}"


def _take_over(lock: Path, stale: dict) -> None:
    """Remove the stale ``lock`` unless someone replaced it meanwhile (then it is put back)."""
    moved = lock.with_name(f"{LOCK_NAME}.stale.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        os.rename(lock, moved)
    except FileNotFoundError:
        return  # another process took it over first
    if _holder(moved) != stale:  # a fresh lock of the process that took over first: give it back
        try:
            os.link(moved, lock)
        except FileExistsError:
            pass
    moved.unlink(missing_ok=True)


def acquire(folder: Path, what: str = "folder") -> Path:
    """Take ``folder/.lock`` (creating the folder) or raise :class:`FolderLocked`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": command_line(),
          "token": secrets.token_hex(8)}
    tmp = folder / f"{LOCK_NAME}.{me['pid']}.{me['token']}"
    write_synced(tmp, json.dumps(me))
    try:
        for _ in range(100):
            try:
                os.link(tmp, lock)
                return lock
            except FileExistsError:
                pass
            holder = _holder(lock)
            if holder is None:
                continue
            if not {"pid", "host", "started", "command"} <= holder.keys():
                raise FolderLocked(f"{folder} is locked by an unreadable {lock}; if no other process writes this "
                                   f"{what}, delete {lock}")
            if holder["host"] != me["host"] or _running(holder):
                raise FolderLocked(
                    f"{folder} is being written by another process ({_describe(holder)}); wait for it to finish "
                    f"or stop it. If that process is gone, delete {lock}."
                )
            print(f"note: taking over the lock of {folder} left by {_describe(holder)}, which no longer runs",
                  file=sys.stderr, flush=True)
            _take_over(lock, holder)
        raise FolderLocked(f"could not take the lock {lock}: it keeps changing hands")
    finally:
        tmp.unlink(missing_ok=True)


def release(lock: Path) -> None:
    """Remove ``lock`` if it is still this process's (a lock taken over meanwhile is left alone)."""
    holder = _holder(lock)
    if holder and holder.get("pid") == os.getpid():
        lock.unlink(missing_ok=True)


@contextmanager
def folder_lock(folder: Path, what: str = "folder"):
    """Hold ``folder``'s lock for the block; see :func:`acquire`."""
    lock = acquire(folder, what)
    try:
        yield lock
    finally:
        release(lock)
