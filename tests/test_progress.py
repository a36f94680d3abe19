"""Progress output: a bar in a terminal, a few plain lines in a log."""

import io

import pytest
from tqdm.auto import tqdm

from windtunnel.progress import PlainProgress, ProgressOutput, progress_bar


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_plain_lines_at_most_every_few_seconds():
    out, clock = io.StringIO(), FakeClock()
    bar = PlainProgress(1000, desc="run", output=ProgressOutput(out, every_s=5.0, clock=clock))
    for _ in range(1000):  # 1000 steps over 20 s: one line per 5 s, not one per step
        clock.t += 0.02
        bar.update(1)
        bar.set_postfix(loss="0.5000")
    bar.close()
    lines = out.getvalue().splitlines()
    assert 4 <= len(lines) <= 5 and "\r" not in out.getvalue()
    assert lines[-1].startswith("run: step 1000/1000 (100%)") and "steps/s" in lines[-1] and "loss=0.5000" in lines[-1]
    assert "eta" in lines[0]


def test_terminal_gets_tqdm_and_logs_get_plain_lines():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(progress_bar(10, output=ProgressOutput(Tty())), tqdm)
    log = io.StringIO()
    bar = progress_bar(10, initial=4, desc="resumed", output=ProgressOutput(log))
    assert isinstance(bar, PlainProgress)
    bar.update(6)
    bar.close()
    assert log.getvalue().startswith("resumed: step 10/10")
    quiet = io.StringIO()
    off = progress_bar(10, enabled=False, output=ProgressOutput(quiet))
    off.update(10)
    off.close()
    assert quiet.getvalue() == ""


def test_the_keywords_of_earlier_versions_build_the_output():
    """compat.legacy_group: progress_bar(file=, every_s=) and PlainProgress(every_s=, file=, clock=)."""
    log, clock = io.StringIO(), FakeClock()
    with pytest.warns(DeprecationWarning, match=r"progress_bar\(file=...\) is deprecated; "
                                                r"use progress_bar\(..., ProgressOutput"):
        bar = progress_bar(10, desc="old", file=log)
    bar.update(10)
    bar.close()
    assert log.getvalue().startswith("old: step 10/10")
    with pytest.warns(DeprecationWarning, match=r"PlainProgress\(every_s=..., file=..., clock=...\)"):
        bar = PlainProgress(10, desc="old", every_s=1.0, file=log, clock=clock)
    assert (bar.every_s, bar.file, bar.clock) == (1.0, log, clock)
    with pytest.raises(TypeError, match="not both"):
        progress_bar(10, output=ProgressOutput(log), every_s=1.0)
