"""What the commands print: Markdown tables drawn aligned with the same cells as the file, verdicts
coloured in a terminal and only there, other lines as they are."""

from __future__ import annotations

import re

from windtunnel.cli.terminal import blocks, cells, echo_lines, echo_markdown

PAGE = """# Comparison

Each row: a model; ~10 checks per run.

| model | params | entropy error (bits) [95% CI] | verdict | note |
|---|---|---|---|---|
| transformer | 603,520 | 0.0425 [0.0424, 0.0425] | ✓ 0.95 | a \\| b |
| mlp (flattened prefix) | 604,558 | −0.0514 | ~? 0.62 | **holds** |
| lstm | n/a | 1.2e-3 | ✗ −1.66 | does not hold |

| not a table: no separator below |
written: runs/x/summary.md
"""


def test_a_table_keeps_every_cell_in_order_and_aligns_its_columns(capsys, assert_printed_as_in):
    echo_markdown(PAGE)
    out = capsys.readouterr().out
    table = next(b for b in blocks(PAGE) if isinstance(b, list))
    rows = [cells(line) for line in table[2:]]
    for r in rows:  # each cell, unescaped, in order on its row
        assert_printed_as_in(out, PAGE, r[0])
    printed = [next(line for line in out.splitlines() if line.startswith(r[0] + " ")) for r in rows]
    assert "a | b" in printed[0] and "**" not in out and "\\|" not in out
    ends = {line.index(r[1]) + len(r[1]) for r, line in zip(rows, printed)}  # params: numbers, right-aligned
    starts = {line.index(r[3]) for r, line in zip(rows, printed)}  # verdict: text, left-aligned
    assert len(ends) == 1 and len(starts) == 1, out
    assert "|" not in "".join(printed).replace("a | b", ""), "the table is drawn, not printed as Markdown"
    assert "\x1b[" not in out  # not a terminal: no colour codes


def test_other_lines_stay_as_they_are(capsys):
    echo_markdown(PAGE)
    out = capsys.readouterr().out.splitlines()
    for line in ("# Comparison", "Each row: a model; ~10 checks per run.", "| not a table: no separator below |",
                 "written: runs/x/summary.md"):
        assert line in out


def test_verdicts_are_coloured_in_a_terminal_only(capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    echo_markdown(PAGE)
    echo_lines(["transport (hmm, kl): model: yes 0.97; transformer: no −0.20", "about ~ 3 of them"])
    out = capsys.readouterr().out
    green, yellow, red = "\x1b[32m", "\x1b[33m", "\x1b[31m"
    assert f"{green}✓" in out and f"{yellow}~?" in out and f"{red}✗" in out
    assert f"{green}holds" in out and f"{red}does not hold" in out
    assert f"{green}yes" in out and f"{red}no" in out
    assert not re.search(r"\x1b\[3\dm~10", out), "a ~ inside a word or number is no verdict"
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("NO_COLOR", "1")
    echo_markdown(PAGE)
    assert "\x1b[" not in capsys.readouterr().out


def test_cells_unescape_markdown():
    assert cells("| **yes** | `code` | a \\| b | &lt;1 |") == ["yes", "code", "a | b", "<1"]
    assert blocks("| a |\n|---|\n| 1 |\ntext") == [["| a |", "|---|", "| 1 |"], "text"]
    assert blocks("| a |\ntext") == ["| a |", "text"]
