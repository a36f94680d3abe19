"""Progress of a wait (training steps, evaluation batches, analyses): tqdm's bar in a terminal, a
plain line every few seconds anywhere else.

When stderr is not a terminal (CI, Ray workers, ``nohup``, a redirected log), tqdm's
carriage-return updates become thousands of log lines; there a line such as
``bijection-mamba-1a2b: step 300/1200 (25%), 41.2 steps/s, eta 22s, loss=0.4121`` is printed at
most every ``every_s`` seconds, and once at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from tqdm.auto import tqdm

from windtunnel.compat import legacy_group


@dataclass(frozen=True)
class ProgressOutput:
    """Where progress goes: ``file`` (None: stderr; a terminal gets tqdm's bar), and elsewhere a
    plain line at most every ``every_s`` seconds of ``clock``."""

    file: TextIO | None = None
    every_s: float = 5.0
    clock: Callable[[], float] = time.monotonic


class PlainProgress:
    """tqdm's ``update`` / ``set_postfix`` / ``close``, written as occasional plain lines (to
    ``output.file``, at most every ``output.every_s`` seconds). (The keywords ``every_s``, ``file``
    and ``clock`` still work, deprecated: they build the output.)"""

    def __init__(self, total: int, initial: int = 0, desc: str = "", unit: str = "step",
                 output: ProgressOutput | None = None, **legacy: Any):
        output = legacy_group("PlainProgress", output, legacy, ProgressOutput)
        self.total, self.n, self.desc, self.every_s, self.unit = total, initial, desc, output.every_s, unit
        self.file, self.clock = output.file, output.clock
        self.postfix: dict[str, Any] = {}
        self.start_n, self.start = initial, self.clock()
        self.last = self.start
        self.closed = False
        self.written = -1  # the count of the last line written

    def _write(self) -> None:
        elapsed = self.clock() - self.start
        done = self.n - self.start_n
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        msg = f"{self.desc}: {self.unit} {self.n}/{self.total}{pct}"
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            msg += f", {rate:.3g} {plural(self.unit)}/s"
            if self.n < self.total:
                msg += f", eta {max(0.0, (self.total - self.n) / rate):.0f}s"
        msg += "".join(f", {k}={v}" for k, v in self.postfix.items())
        print(msg, file=self.file or sys.stderr, flush=True)
        self.written = self.n

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            self._write()

    def set_postfix(self, **kw: Any) -> None:
        self.postfix.update(kw)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.written != self.n:  # the last line said it already
                self._write()


def plural(word: str) -> str:
    """``step`` -> ``steps``, ``batch`` -> ``batches``, ``analysis`` -> ``analyses``."""
    if word.endswith("is"):
        return word[:-2] + "es"
    return word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")


class _Off:
    def update(self, n: int = 1) -> None: ...
    def set_postfix(self, **kw: Any) -> None: ...
    def close(self) -> None: ...


def progress_bar(total: int, initial: int = 0, desc: str = "", enabled: bool = True, unit: str = "step",
                 output: ProgressOutput | None = None, **legacy: Any):
    """tqdm when ``output.file`` (default stderr) is a terminal, else :class:`PlainProgress`; nothing
    when disabled. ``unit`` names what it counts (``step``, ``batch``, ``analysis``). (The keywords
    ``every_s`` and ``file`` still work, deprecated: they build the output.)"""
    output = legacy_group("progress_bar", output, legacy, ProgressOutput)
    if not enabled:
        return _Off()
    stream = output.file or sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True, file=stream, unit=f" {unit}")  # "3.2 step/s"
    return PlainProgress(total, initial, desc, unit, ProgressOutput(stream, output.every_s, output.clock))
