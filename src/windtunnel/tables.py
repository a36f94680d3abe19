"""Markdown table helpers shared by every page windtunnel writes (diagnostics, sweeps, LLM reports).

Named ``tables`` rather than ``markdown`` so it is not mistaken for the ``markdown`` package that
renders the HTML report pages."""

from __future__ import annotations

from typing import Any


def f(x: Any, spec: str = ".3f") -> str:
    """Format a number (None, i.e. NaN in JSON, as 'n/a')."""
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    return format(x, spec)


def pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table: each cell on one line (a line break in a cell would end its row) with its
    pipes escaped."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(" ".join(str(c).splitlines()).replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header)] + [line(r) for r in rows]
