"""One ``windtunnel tune`` call: :class:`TuneRequest`, the models searched on a task and the search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from windtunnel.config import StrictConfig
from windtunnel.sweep.primitives import task_metric
from windtunnel.tune.outputs import tune_name
from windtunnel.tune.settings import SEARCH, TuneSpec, named_search


class TuneRequest(StrictConfig):
    """One ``windtunnel tune`` call: ``models`` searched on ``task`` at the profile's own setting
    with its scorecard's budget, the ``overrides`` (``section.field=value`` text) applied to every
    candidate. A ``spec`` given as a mapping without ``metric`` ranks by the task's primitive
    metric (accuracy for recall, else KL), and names its search
    (:func:`~windtunnel.tune.settings.named_search`): by default the annealed search,
    :data:`SEARCH`'s settings under the ones it names (``{"cooldown": 0.5}`` is the annealed search
    with a longer cooldown; ``"keep_ties": false`` drops the finalists' spread with the ties),
    unless it sets ``"search": "full"`` or ``"halving"`` (or ``"full": true``, ``"halving": true``:
    the plain successive halving is only what it names)."""

    task: str
    models: list[str] = Field(min_length=1, description="architectures, each searched on its own, all in one pool")
    profile: str = "quick"
    overrides: list[str] = Field(default_factory=list, description="section.field=value for every candidate")
    spec: TuneSpec = Field(default_factory=lambda: TuneSpec(**SEARCH))

    @model_validator(mode="before")
    @classmethod
    def _task_metric(cls, doc: Any) -> Any:
        """A spec given as a mapping: the task's metric where it names none, and the settings of the
        search it names under the ones it gives (:func:`~windtunnel.tune.settings.named_search`)."""
        if isinstance(doc, dict) and not isinstance(doc.get("spec"), TuneSpec):
            spec = dict(doc.get("spec") or {})
            spec.setdefault("metric", task_metric(str(doc.get("task"))))
            doc = {**doc, "spec": named_search(spec)}
        return doc

    @model_validator(mode="after")
    def _distinct(self):
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"models = {self.models}: each architecture once")
        return self

    def default_out(self) -> Path:
        """``runs/tune-<task>-<model>`` (``runs/tune-<task>`` for several models; ``-full`` without halving)."""
        if len(self.models) == 1:
            return Path("runs") / tune_name(self.task, self.models[0], self.spec.full)
        return Path("runs") / (f"tune-{self.task}" + ("-full" if self.spec.full else ""))
