"""Numbers the papers report, to print beside ours (``src/windtunnel/data/<paper>_results.json``)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from windtunnel.compat import legacy_call
from windtunnel.config import ConfigError


def _data():
    return resources.files("windtunnel") / "data"


def paper_names() -> list[str]:
    return sorted(p.name.removesuffix("_results.json") for p in _data().iterdir() if p.name.endswith("_results.json"))


@functools.cache
def paper_results(paper: str) -> dict[str, Any]:
    path = _data() / f"{paper}_results.json"
    if not path.is_file():
        raise ConfigError(f"unknown paper '{paper}'; available: {', '.join(paper_names())}")
    return json.loads(path.read_text())


@dataclass(frozen=True)
class Cell:
    """A cell of a results table a paper's number may sit beside: ``metric`` of ``model`` on
    ``task`` (run at ``task_params``) at the evaluation ``length`` of a run trained at ``main_length``."""

    task: str
    model: str
    metric: str
    length: int | None = None
    main_length: int | None = None
    task_params: dict[str, Any] | None = None


def paper_value(paper: str | None, cell: Cell, *legacy: Any, **old: Any):
    """The value ``paper`` reports for ``cell``, or None.

    ``length`` None or the training length matches entries without a length; an entry's
    ``task_params`` (e.g. the HMM's K = 20) must agree with the run's where the run sets them,
    so a run trained at another setting gets no paper number beside it. (The earlier form
    ``paper_value(paper, task, model, metric, length, main_length, task_params)`` still works,
    deprecated.)"""
    if legacy or old or not isinstance(cell, Cell):
        given = legacy_call("paper_value", (paper, cell, *legacy), old,
                            "paper_value(paper, Cell(task, model, metric, length, main_length, task_params))")
        paper, cell = given.get("paper"), Cell(**{k: v for k, v in given.items() if k != "paper"})
    if paper is None:
        return None
    for v in paper_results(paper)["values"]:
        want = v["length"]
        at_main = cell.length is None or cell.length == cell.main_length
        same_task = all((cell.task_params or {}).get(k, val) == val for k, val in v.get("task_params", {}).items())
        if (v["task"], v["model"], v["metric"]) == (cell.task, cell.model, cell.metric) and same_task and (
            (want is None and at_main) or (want is not None and want == cell.length)
        ):
            return v
    return None
