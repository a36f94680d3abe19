"""Move a hand-typed table of measured numbers out of a markdown page into results data.

    python scripts/transcribe_table.py docs/PAGE.md LINE results/TOPIC/NAME.json \\
        --command "windtunnel sweep ..." [--concurrent "a test run"] [--title "..."]

Reads the table whose header is at LINE (or the first table after it), parses its cells
(``scripts/results/_tables.py``), checks that they write back as they read, and writes the
record with its provenance: the command, the commit that gave the table its present rows (for
each row the newest commit that added that exact line, ``git log -S``; the newest of those), that
commit's date, the machine, what ran beside it, and the page and section it was recorded in.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "results"))
from _tables import dump_json, parse_markdown_table, render_table  # noqa: E402

from windtunnel.provenance import provenance as record_provenance  # noqa: E402

MACHINE = "the project's 2-core CPU machine"
_RULE = re.compile(r"^\s*\|[\s\-:|]+\|\s*$")


def find_table(path: Path, line: int) -> tuple[int, list[str]]:
    """(1-based header line, the table's lines) of the first table at or after ``line``."""
    lines = path.read_text().splitlines()
    i = line - 1
    while i + 1 < len(lines) and not (lines[i].lstrip().startswith("|") and _RULE.match(lines[i + 1])):
        i += 1
    j = i
    while j < len(lines) and lines[j].lstrip().startswith("|"):
        j += 1
    if j - i < 3:
        raise SystemExit(f"{path}:{line}: no table here")
    return i + 1, [x.strip() for x in lines[i:j]]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def row_commit(path: str, row: str) -> tuple[str, str] | None:
    """(sha, ISO date) of the newest commit that changed how often ``row`` occurs in ``path``."""
    out = _git("log", "--format=%H %cI", "-S", row, "--", path).split("\n", 1)[0].strip()
    return tuple(out.split()) if out else None


def table_commit(path: str, rows: list[str]) -> tuple[str, str]:
    found = [c for c in (row_commit(path, r) for r in rows) if c]
    if not found:
        raise SystemExit(f"{path}: no commit adds these rows")
    return max(found, key=lambda c: c[1])


def section(path: str, sha: str, needle: str) -> str:
    """The heading above the first line holding ``needle`` in ``path`` at commit ``sha``."""
    text = _git("show", f"{sha}:{path}").splitlines()
    at = next((i for i, x in enumerate(text) if needle in x), len(text))
    heads, fenced = [], False
    for x in text[:at]:
        fenced ^= x.lstrip().startswith("```")
        if x.startswith("#") and not fenced:
            heads.append(x.lstrip("#").strip())
    return heads[-1] if heads else path


def provenance(path: str, lines: list[str], command: str, concurrent: str = "not recorded") -> dict:
    sha, date = table_commit(path, lines[2:])
    return record_provenance(command, concurrent=concurrent, root=ROOT, commit=sha, date=date, machine=MACHINE,
                             recorded_in=f"{path}, '{section(path, sha, lines[2])}', at commit {sha[:7]}")


def transcribe(path: str, line: int, *, command: str, concurrent: str = "not recorded", title: str = "") -> dict:
    _, lines = find_table(ROOT / path, line)
    table = parse_markdown_table(lines)
    back = render_table(table).splitlines()
    norm = lambda s: re.sub(r"(?<![\w.])-(?=\d)", "−", re.sub(r"\s+", " ", s)).strip()  # noqa: E731
    bad = [(a, b) for a, b in zip(lines[2:], back[2:]) if norm(a) != norm(b)]
    if bad:
        raise SystemExit(f"{path}:{line}: cells do not write back as read: {bad[0]}")
    return {"title": title, "provenance": provenance(path, lines, command, concurrent), **table}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page")
    ap.add_argument("line", type=int)
    ap.add_argument("out", type=Path)
    ap.add_argument("--command", required=True, help="the command that measured it, as the page gives it")
    ap.add_argument("--concurrent", default="not recorded", help="what the page says ran beside it")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    record = transcribe(a.page, a.line, command=a.command, concurrent=a.concurrent, title=a.title)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(dump_json(record))
    print(f"{a.out}: {len(record['rows'])} rows, {record['provenance']['recorded_in']}")


if __name__ == "__main__":
    main()
