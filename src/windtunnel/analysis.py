"""One analysis as one record, and the ordered registry of them (geometry and llm share both).

An :class:`Analysis` carries everything the runner and the writers need: its name (the key in the
results and on the command line), the title of its markdown section, whether it applies, how it
runs, how its markdown section and plots are drawn, and whether it needs the captured activations.
A package keeps its analyses in one :class:`AnalysisRegistry`, whose registration order is the
order they run and are written in; adding an analysis is one module with one record, registered there.

Every analysis of every package has the same four callables (the :class:`Applies`, :class:`Run`,
:class:`Markdown` and :class:`Plot` protocols), called by position:

- ``applies(state) -> str | None`` and ``run(state) -> dict``: ``state`` is what the package's
  analyses share (geometry: the run's :class:`~windtunnel.geometry.context.Context`; llm: the
  model's :class:`~windtunnel.llm.session.Session`);
- ``markdown(result, doc) -> list[str]`` and ``plot(result, doc, out_dir) -> list[Path]``:
  ``result`` is the analysis' own entry of the written document ``doc`` (``diagnostics.json``
  or ``llm.json`` as a dict, every analysis' result under ``doc["results"]``), for what a section
  or a figure needs beyond its own result (the model's name, another analysis' result).

A record whose callables cannot take those arguments is a TypeError when it is made.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from windtunnel.config import ConfigError
from windtunnel.registry import Registry


class Applies(Protocol):
    """None, or the reason the analysis does not apply to ``state``."""

    def __call__(self, state: Any, /) -> str | None: ...


class Run(Protocol):
    """The analysis' JSON-ready result on ``state``."""

    def __call__(self, state: Any, /) -> dict: ...


class Markdown(Protocol):
    """The lines of the analysis' markdown section (under ``## title``), from its ``result``
    and the whole document ``doc``."""

    def __call__(self, result: dict, doc: dict, /) -> list[str]: ...


class Plot(Protocol):
    """Draw the analysis' figures from its ``result`` and the whole document ``doc`` into the
    existing folder ``out_dir``; returns the paths written."""

    def __call__(self, result: dict, doc: dict, out_dir: Path, /) -> list[Path]: ...


#: how many positional arguments each callable of a record is called with
ARITY = {"applies": 1, "run": 1, "markdown": 2, "plot": 3}
SIGNATURES = {"applies": "applies(state)", "run": "run(state)", "markdown": "markdown(result, doc)",
              "plot": "plot(result, doc, out_dir)"}


def always(state: Any) -> str | None:
    """``applies`` of an analysis that always applies: no reason to skip it."""
    return None


def _check_call(name: str, part: str, fn: Any) -> None:
    """A TypeError when ``fn`` cannot be called with the arguments its protocol passes."""
    if not callable(fn):
        raise TypeError(f"analysis '{name}': {part} must be callable, got {fn!r}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a callable without a readable signature: trusted
        return
    try:
        sig.bind(*[None] * ARITY[part])
    except TypeError as e:
        raise TypeError(f"analysis '{name}': {part}{sig} cannot be called as {SIGNATURES[part]} ({e})") from None


@dataclass(frozen=True)
class Analysis:
    """One analysis: ``applies(state)`` is None or the reason it does not apply; ``run(state)``
    returns its JSON-ready result; ``markdown(result, doc)`` renders that result as markdown lines
    under ``## title``; ``plot(result, doc, out_dir)`` (None: no plot) writes its figures and
    returns their paths; ``needs_activations``: it reads activations captured once for every
    analysis that needs them (geometry)."""

    name: str
    title: str
    run: Run
    markdown: Markdown
    applies: Applies = always
    plot: Plot | None = None
    needs_activations: bool = False

    def __post_init__(self) -> None:
        for part in ("applies", "run", "markdown", "plot"):
            fn = getattr(self, part)
            if fn is not None or part != "plot":
                _check_call(self.name, part, fn)


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

    def plot_all(self, doc: dict, out_dir: Path | str) -> list[Path]:
        """Every plot of the analyses in ``doc["results"]`` (their records' ``plot(result, doc,
        out_dir)``, in the order of the results) into ``out_dir``, made when missing; returns the
        paths written."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths: list[Path] = []
        for name, result in doc["results"].items():
            plot = self.get(name).plot
            if plot is not None:
                paths += plot(result, doc, out_dir)
        return paths
