"""Stopping cleanly on SIGINT / SIGTERM: finish the step, checkpoint, say how to resume.

Inside :func:`stop_on_signals` the first SIGINT or SIGTERM only sets a flag; the training loop
reads it between steps, writes a resumable checkpoint and raises :class:`Interrupted`, which the
command turns into exit code 130 (SIGINT) or 143 (SIGTERM) and a line saying how to resume. A
second signal raises :class:`Interrupted` at once, wherever the process is: every checkpoint is
written into a temporary folder and renamed into place, so the newest complete one is still the
resume point. Nested uses (a sweep around its runs) share one handler.
"""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """Stopped by a signal. A ``BaseException``, like ``KeyboardInterrupt``, so that the
    per-run error handling of a sweep does not record it as a failed run."""

    def __init__(self, signum: int, message: str = "", immediate: bool = False):
        self.signum, self.immediate, self.exit_code = signum, immediate, 128 + signum
        name = signal.Signals(signum).name
        head = f"stopped at once by a second {name}" if immediate else f"stopped by {name}"
        super().__init__(f"{head}: {message}" if message else head)


class StopFlag:
    """What a loop polls between steps: ``signum`` is the first signal received, else None."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:
            raise Interrupted(signum, immediate=True)
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: stopping after this step and writing a resumable checkpoint "
              "(send it again to stop at once)", file=sys.stderr, flush=True)

    def check(self, message: str = "") -> None:
        """Raise :class:`Interrupted` with ``message`` if a signal has come."""
        if self.signum is not None:
            raise Interrupted(self.signum, message)


_active: StopFlag | None = None


@contextmanager
def stop_on_signals():
    """Catch SIGINT and SIGTERM for the block (in the main thread; elsewhere, e.g. in a Ray
    worker's thread, the flag is never set and signals keep their usual meaning)."""
    global _active
    if _active is not None or threading.current_thread() is not threading.main_thread():
        yield _active or StopFlag()
        return
    flag = StopFlag()
    previous = {s: signal.signal(s, flag._handle) for s in SIGNALS}
    _active = flag
    try:
        yield flag
    finally:
        _active = None
        for s, handler in previous.items():
            signal.signal(s, handler)


def command_line() -> str:
    """This process's command, as one would type it again (``python -m windtunnel`` spelled so)."""
    argv = list(sys.argv)
    if argv and Path(argv[0]).name == "__main__.py":
        argv[:1] = [sys.executable, "-m", "windtunnel"]
    elif argv and Path(argv[0]).name == "windtunnel":
        argv[0] = "windtunnel"
    return shlex.join(argv)
