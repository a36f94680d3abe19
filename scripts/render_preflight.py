"""Write the capacity pre-flights the docs show from the real command's output: each
``<!-- preflight: ARGS -->`` ... ``<!-- /preflight -->`` block of docs/scorecard.md and
docs/models.md holds what ``PYTHONPATH=examples windtunnel scorecard ARGS --dry-run`` prints
before its planned runs (the pre-flight table; counts only, nothing trains).

    python scripts/render_preflight.py           # rewrite the blocks
    python scripts/render_preflight.py --check   # exit 1 if a block differs from a fresh rendering

tests/sweep/test_scorecard_preflight.py runs the check.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "docs" / "scorecard.md", ROOT / "docs" / "models.md"]
BLOCK = re.compile(r"(<!-- preflight: (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /preflight -->)", re.S)


def preflight_text(args: str) -> str:
    """What ``windtunnel scorecard ARGS --dry-run`` prints before ``Planned runs:``."""
    from typer.testing import CliRunner

    from windtunnel.cli import app

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        res = CliRunner().invoke(app, ["scorecard", *shlex.split(args), "--dry-run"])
    finally:
        sys.path.remove(str(ROOT / "examples"))
    if res.exit_code != 0:
        raise SystemExit(f"windtunnel scorecard {args} --dry-run failed:\n{res.output}")
    return res.output.partition("Planned runs:")[0].rstrip() + "\n"


def render(text: str) -> str:
    """``text`` with every pre-flight block filled from the command's output."""
    return BLOCK.sub(lambda m: f"{m[1]}```text\n$ PYTHONPATH=examples windtunnel scorecard {m['args']} --dry-run\n"
                               f"{preflight_text(m['args'])}```\n{m[4]}", text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    stale = []
    for page in PAGES:
        old = page.read_text()
        new = render(old)
        if new != old:
            stale.append(page.relative_to(ROOT))
            if not ap.parse_args().check:
                page.write_text(new)
    if stale and ap.parse_args().check:
        sys.exit(f"stale pre-flight blocks in {', '.join(map(str, stale))}: run python scripts/render_preflight.py")


if __name__ == "__main__":
    main()
