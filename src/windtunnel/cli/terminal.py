"""What the commands print, rendered for a terminal with rich (which typer brings).

The files a command writes (``summary.md``, ``diagnostics.md``, ``llm.md``, a tuning's ``.md``)
stay Markdown; what it prints is the same text with each Markdown table drawn as an aligned
table (the same cells, so the same numbers) and the verdicts coloured: ✓ (realised, holds)
green, ~ (partly) yellow, ✗ (not realised, does not hold) red. Colour only where the output is
a terminal (rich's own test; ``NO_COLOR`` turns it off); elsewhere (a pipe, a log, a test) the
tables are drawn with plain characters at their natural width, never wrapped.
"""

from __future__ import annotations

import html
import re
import sys

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

# a verdict mark alone (✓ 0.95, ~?, ✗) or a claim's verdict word, and its colour
# (the scorecard's lines write a verdict as a word before its score: "model: yes 0.97")
VERDICTS = [(re.compile(r"✓\??"), "green"), (re.compile(r"(?<![\w~])~\??(?=\s|$)"), "yellow"), (re.compile(r"✗\??"), "red"),
            (re.compile(r"\bdoes not hold\b"), "red"), (re.compile(r"(?<!not )\bholds\b"), "green"),
            (re.compile(r"\bpartly\b"), "yellow"), (re.compile(r"(?<=: )yes\??(?= [−\-\d])"), "green"),
            (re.compile(r"(?<=: )partial\??(?= [−\-\d])"), "yellow"), (re.compile(r"(?<=: )no\??(?= [−\-\d])"), "red")]
_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_NUMBER = re.compile(r"^[−\-+]?(\d[\d,]*\.?\d*|\.\d+)(e[−\-+]?\d+)?(\s|%|$)")


def console() -> Console:
    """A console on the current stdout (click's test runner swaps it), as wide as the terminal, or
    unbounded where the output is not one (a table is never wrapped into a log)."""
    out = sys.stdout
    tty = bool(getattr(out, "isatty", lambda: False)())
    return Console(file=out, highlight=False, emoji=False, markup=False, width=None if tty else 100_000,
                   soft_wrap=not tty)


def styled(text: str) -> Text:
    """``text`` with its verdicts coloured."""
    t = Text(text)
    for pattern, colour in VERDICTS:
        t.highlight_regex(pattern, colour)
    return t


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row, unescaped (``\\|``, HTML entities, ``**bold**``, `code`)."""
    parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [html.unescape(re.sub(r"\*\*(.+?)\*\*|`([^`]*)`", lambda m: m[1] or m[2] or "", p.strip().replace("\\|", "|")))
            for p in parts]


def is_numeric(column: list[str]) -> bool:
    filled = [c for c in column if c and c not in ("–", "-", "n/a")]
    return bool(filled) and all(_NUMBER.match(c) for c in filled)


def table(lines: list[str]) -> Table:
    """A Markdown table (header, separator, rows) as a rich table: numbers right-aligned."""
    header, rows = cells(lines[0]), [cells(line) for line in lines[2:]]
    rows = [r + [""] * (len(header) - len(r)) for r in rows]
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for k, name in enumerate(header):
        t.add_column(name, justify="right" if is_numeric([r[k] for r in rows]) else "left", overflow="fold")
    for r in rows:
        t.add_row(*(styled(c) for c in r[:len(header)]))
    return t


def blocks(text: str) -> list[str | list[str]]:
    """``text`` split into its lines and its Markdown tables (each a list of its lines)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1].strip()):
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out.append(lines[i:j])
            i = j
        else:
            out.append(lines[i])
            i += 1
    return out


def echo_markdown(text: str) -> None:
    """Print Markdown for the terminal: its tables aligned, its verdicts coloured, its other lines
    as they are (headings in bold)."""
    con = console()
    for block in blocks(text):
        if isinstance(block, list):
            con.print(table(block))
        elif block.startswith("#"):
            con.print(Text(block, style="bold"))
        else:
            con.print(styled(block))


def echo_lines(lines: list[str]) -> None:
    """Print plain lines with their verdicts coloured."""
    con = console()
    for line in lines:
        con.print(styled(line))
