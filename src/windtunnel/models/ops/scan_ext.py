"""The C++ kernels (``models/csrc/selective_scan.cpp``: selective scan, causal conv, RMSNorm),
built on first use, and the choice of path.

``WINDTUNNEL_SCAN`` picks the CPU kernels of ``mamba`` (:mod:`windtunnel.models.ops`):

- ``auto`` (default): the C++ scan when it builds on this machine (a C++ compiler and the torch
  headers; the first build takes about a minute, later processes load the cached library in well
  under a second), else the pure-PyTorch scan;
- ``cpp``: the C++ scan, or an error saying why it cannot be built;
- ``torch``: the pure-PyTorch scan.

Which path runs is said once per process (logger ``windtunnel``, and stderr). The library is
cached under ``$TORCH_EXTENSIONS_DIR`` (torch's default: ``~/.cache/torch_extensions``) in a
folder named by a hash of the source, its path and the flags, so a changed source never loads a
stale build and two checkouts do not rebuild in turn. A build lock left by a process killed
while building is removed after ten minutes (torch itself would wait on it for ever).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import sys
from pathlib import Path

import torch

from windtunnel.config import ConfigError

log = logging.getLogger("windtunnel")
SOURCE = Path(__file__).parent.parent / "csrc" / "selective_scan.cpp"  # models/csrc (package data)
CHOICES = ("auto", "cpp", "torch")


def _flags(openmp: bool = True) -> list[str]:
    """-O3, OpenMP (without it ATen's ``parallel_for`` runs on one thread), and the widest vector
    code (AVX512 or AVX2) that torch itself uses on this CPU."""
    flags = ["-O3"] + (["-fopenmp"] if openmp else [])
    cap = torch.backends.cpu.get_cpu_capability()
    if cap == "AVX512" and os.environ.get("WINDTUNNEL_SCAN_AVX512", "1") != "0":
        flags += ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma",
                  "-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512"]
    elif cap in ("AVX2", "AVX512"):
        flags += ["-mavx2", "-mfma", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"]
    return flags


def requested() -> str:
    choice = os.environ.get("WINDTUNNEL_SCAN", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ConfigError(f"WINDTUNNEL_SCAN={choice!r}: allowed values are {', '.join(CHOICES)}")
    return choice


@functools.cache
def build() -> None:
    """Build (or load the cached build of) the C++ scan; registers ``torch.ops.windtunnel_scan``.
    With OpenMP when the compiler has it (the kernels then use torch's threads), else serial."""
    try:
        _build(openmp=True)
    except Exception as e:  # e.g. Apple clang: no -fopenmp
        _say(f"the C++ scan did not build with OpenMP ({type(e).__name__}); building it single-threaded")
        _build(openmp=False)


def _build(openmp: bool) -> None:
    from torch.utils.cpp_extension import get_default_build_root, load

    flags = _flags(openmp)
    # the source's path is in the key too: ninja rebuilds when the path in build.ninja changes, so
    # two checkouts sharing one folder would rebuild in turn and wait on each other's lock
    key = hashlib.sha256(SOURCE.read_bytes() + str(SOURCE.resolve()).encode() + " ".join(flags).encode()
                         + torch.__version__.encode()).hexdigest()[:12]
    name = f"windtunnel_scan_{key}"
    folder = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()) / name
    folder.mkdir(parents=True, exist_ok=True)
    clear_stale_lock(folder / "lock")
    load(name=name, sources=[str(SOURCE)], extra_cflags=flags, extra_ldflags=["-fopenmp"] if openmp else [],
         build_directory=str(folder), is_python_module=False, verbose=False)


def threads_used() -> int:
    """How many threads the C++ kernels run on (1 when built without OpenMP)."""
    build()
    return int(torch.ops.windtunnel_scan.threads_used())


def clear_stale_lock(lock: Path, max_age_s: float = 600.0) -> bool:
    """Remove a build lock left by a process killed while building (torch would wait on it for
    ever); a build takes about a minute, so a lock older than ``max_age_s`` is stale."""
    import time

    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age <= max_age_s:
        return False
    lock.unlink(missing_ok=True)
    _say(f"removed a stale build lock ({age / 60:.0f} min old): {lock}")
    return True


@functools.cache
def cpp_available() -> tuple[bool, str]:
    """(True, '') when the C++ scan is loaded, else (False, why)."""
    try:
        build()
    except Exception as e:  # no compiler, no headers, a failed build: all mean "not here"
        lines = [s for s in str(e).strip().splitlines() if s.strip()]
        return False, f"{type(e).__name__}: {lines[-1] if lines else ''}"[:300]
    return True, ""


def _say(msg: str) -> None:
    log.info(msg)
    if not log.hasHandlers() or not log.isEnabledFor(logging.INFO):
        print(f"windtunnel: {msg}", file=sys.stderr, flush=True)


@functools.cache
def use_cpp() -> bool:
    """Whether mamba's CPU scan runs in C++ in this process (decided, and said, once)."""
    choice = requested()
    if choice == "torch":
        _say("mamba CPU scan: pure PyTorch (WINDTUNNEL_SCAN=torch)")
        return False
    ok, why = cpp_available()
    if ok:
        _say(f"mamba CPU scan: C++ ({'WINDTUNNEL_SCAN=cpp' if choice == 'cpp' else 'auto'}, "
             f"{threads_used()} of {torch.get_num_threads()} threads)")
        return True
    if choice == "cpp":
        raise ConfigError(f"WINDTUNNEL_SCAN=cpp but the C++ scan did not build: {why}")
    _say(f"mamba CPU scan: pure PyTorch (the C++ scan did not build: {why}; set WINDTUNNEL_SCAN=torch to skip trying)")
    return False
