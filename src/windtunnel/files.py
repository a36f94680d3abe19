"""Writing files so that nothing is half-written: atomic replaces, fsync, and a clear full-disk error.

Every file windtunnel writes reaches the disk through :func:`write_synced` (a new file, flushed
and fsynced), :func:`atomic_write_bytes` / :func:`atomic_write_text` (a temporary file renamed
over the target, so a reader sees the old file or the new one) or :func:`append_text` (whole
lines appended, rolled back on failure). :func:`jsonable` turns a result into plain JSON types.
A full disk (``ENOSPC``, or a quota: ``EDQUOT``) becomes a
:class:`DiskFullError` naming the path; the partial file is removed first, so earlier results
stay as they were and the same command continues once space is freed.
"""

from __future__ import annotations

import errno
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(RuntimeError):
    """The disk (or a quota) is full; the file named was left as it was before the write."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        super().__init__(
            f"no space left on the device while writing {path}; it was left as it was, and every earlier "
            "checkpoint and result is kept. Free some space and run the same command again to continue."
        )


@contextmanager
def disk_full_names(path: Path | str):
    """Turn a full-disk ``OSError`` raised inside the block into a :class:`DiskFullError` for ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.errno in FULL_DISK_ERRNOS:
            raise DiskFullError(path) from None
        raise


def _write(path: Path, f, data: bytes) -> None:
    """The one place bytes go to disk (tests inject ``ENOSPC`` here): write ``data`` to the open
    file ``f`` (the file for ``path``), flush, fsync."""
    view = memoryview(data)
    while view:  # an unbuffered file may take part of the data per call
        view = view[f.write(view):]
    f.flush()
    os.fsync(f.fileno())


def write_synced(path: Path | str, data: bytes | str) -> None:
    """Write a new file (inside a folder that is renamed into place later, as checkpoints are)."""
    path = Path(path)
    with disk_full_names(path):
        try:
            with open(path, "wb") as f:
                _write(path, f, data.encode() if isinstance(data, str) else data)
        except BaseException:
            path.unlink(missing_ok=True)
            raise


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old file or the new one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read by others
    with disk_full_names(path):
        try:
            with os.fdopen(fd, "wb") as f:
                _write(path, f, data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def append_text(path: Path | str, text: str) -> None:
    """Append ``text`` (whole lines) and fsync; on failure the file is cut back to its old length."""
    path = Path(path)
    with disk_full_names(path), open(path, "ab", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        try:
            _write(path, f, text.encode())
        except BaseException:
            os.ftruncate(f.fileno(), size)
            raise


def jsonable(x: Any) -> Any:
    """Plain JSON types: numpy and torch scalars and arrays to numbers and lists, tuples to lists,
    paths to text, NaN and infinity to None (JSON has no NaN); anything else is a TypeError."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, Path):
        return str(x)
    if hasattr(x, "tolist"):  # numpy arrays, torch tensors
        return jsonable(x.tolist())
    raise TypeError(f"cannot write a {type(x).__name__} as JSON")
