"""One analysis as one record, and the ordered registry of them (geometry and llm share both).

An :class:`Analysis` carries everything the runner and the writers need: its name (the key in
the results and on the command line), the title of its markdown section, whether it applies,
how it runs, how its markdown section and its plots are drawn, and whether it needs the captured
activations. A package keeps its analyses in one :class:`AnalysisRegistry`, whose registration
order is the order they run and are written in; adding an analysis is one module with one record,
registered there. Each package fixes the arguments its callables take (see its registry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from windtunnel.config import ConfigError
from windtunnel.registry import Registry


def always(state: Any) -> str | None:
    """``applies`` of an analysis that always applies: no reason to skip it."""
    return None


@dataclass(frozen=True)
class Analysis:
    """One analysis: ``applies(state)`` is None or the reason it does not apply; ``run(state)``
    returns its JSON-ready result; ``markdown`` renders that result as markdown lines under
    ``## title``; ``plot`` (None: no plot) writes its figures; ``needs_activations``: it reads
    activations captured once for every analysis that needs them."""

    name: str
    title: str
    run: Callable[..., dict]
    markdown: Callable[..., list[str]]
    applies: Callable[[Any], str | None] = always
    plot: Callable[..., Any] | None = None
    needs_activations: bool = False


class AnalysisRegistry(Registry[Analysis]):
    """Analyses in the order they were registered (the canonical order: run and written in it)."""

    def __init__(self, analyses: tuple[Analysis, ...] | list[Analysis] = ()):
        super().__init__("analysis", ordered=True)
        for a in analyses:
            self.register(a)

    def parse(self, names: list[str] | str) -> list[str]:
        """Validate a list (or comma-separated string) of names: stripped, blanks dropped,
        duplicates dropped, in the order given. Empty or unknown names are a ConfigError."""
        if isinstance(names, str):
            names = names.split(",")
        names = [n.strip() for n in names if n.strip()]
        allowed = ", ".join(self.names())
        if not names:
            raise ConfigError(f"analyses is empty; allowed: {allowed}")
        unknown = [n for n in names if n not in self]
        if unknown:
            raise ConfigError(f"unknown analysis {', '.join(map(repr, unknown))}; allowed: {allowed}")
        return list(dict.fromkeys(names))
