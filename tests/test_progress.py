"""Progress output: a bar in a terminal, a few plain lines in a log."""

import io

from tqdm.auto import tqdm

from windtunnel.progress import PlainProgress, progress_bar


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_plain_lines_at_most_every_few_seconds():
    out, clock = io.StringIO(), FakeClock()
    bar = PlainProgress(1000, desc="run", every_s=5.0, file=out, clock=clock)
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

    assert isinstance(progress_bar(10, file=Tty()), tqdm)
    log = io.StringIO()
    bar = progress_bar(10, initial=4, desc="resumed", file=log)
    assert isinstance(bar, PlainProgress)
    bar.update(6)
    bar.close()
    assert log.getvalue().startswith("resumed: step 10/10")
    quiet = io.StringIO()
    off = progress_bar(10, enabled=False, file=quiet)
    off.update(10)
    off.close()
    assert quiet.getvalue() == ""
