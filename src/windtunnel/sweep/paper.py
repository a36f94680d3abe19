"""Numbers the papers report, to print beside ours (``src/windtunnel/data/<paper>_results.json``)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

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


def paper_value(paper: str | None, task: str, model: str, metric: str, length: int | None, main_length: int | None,
                task_params: dict[str, Any] | None = None):
    """The reported value for a table cell, or None.

    ``length`` None or the training length matches entries without a length; an entry's
    ``task_params`` (e.g. the HMM's K = 20) must agree with the run's where the run sets them,
    so a run trained at another setting gets no paper number beside it."""
    if paper is None:
        return None
    for v in paper_results(paper)["values"]:
        want = v["length"]
        at_main = length is None or length == main_length
        same_task = all((task_params or {}).get(k, val) == val for k, val in v.get("task_params", {}).items())
        if (v["task"], v["model"], v["metric"]) == (task, model, metric) and same_task and (
            (want is None and at_main) or (want is not None and want == length)
        ):
            return v
    return None
