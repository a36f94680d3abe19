"""Sweep configs: experiments (a task and the architectures to compare) crossed with a grid.

A sweep file is JSON (shipped ones live in ``src/windtunnel/sweep/configs``)::

    {"name": "paper1-quick", "profile": "quick", "grid": {"train.seed": [0, 1]},
     "experiments": [{"task": "bijection", "models": ["transformer", "lstm"],
                      "match_capacity": "transformer"}],
     "primitives": {"rules": {"accumulation": {"experiment": "bijection", "metric": "kl_bayes_model"}}}}

:func:`windtunnel.sweep.expand` turns it into a plain list of validated run configs.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PrivateAttr, model_serializer, model_validator

from windtunnel.compat import sweep_hash_doc
from windtunnel.config import ConfigError, Override, StrictConfig, json_names, parse_overrides, short_hash
from windtunnel.engine.execution import parse_jobs
from windtunnel.evaluate.record import ScoredMetric

#: sections of a run config that a grid axis or an override may set (``section.field``)
SECTIONS = ("task_params", "model_params", "train", "eval")
#: the grid axis that counts as "seeds" when results are aggregated
SEED_KEY = "train.seed"


def _check_key(key: str) -> str:
    section, dot, field = key.partition(".")
    if not dot or section not in SECTIONS or not field:
        raise ValueError(f"grid key {key!r} must be section.field with section one of {', '.join(SECTIONS)}")
    return key


def _check_grid(grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
    for key, values in grid.items():
        _check_key(key)
        if not isinstance(values, list) or not values:
            raise ValueError(f"grid axis {key!r} needs a non-empty list of values, got {values!r}")
    return grid


#: section.field -> list of values (validated)
Grid = Annotated[dict[str, list[Any]], AfterValidator(_check_grid)]


class _WithOverrides(StrictConfig):
    """A config whose ``overrides`` field holds ``section.field=value`` text as in the file (kept
    as written, so the file and its content hash stay as they were), parsed once, on loading,
    into :attr:`override_pairs`, the structured form the library applies. (Each subclass
    declares ``overrides: list[str]`` itself, keeping its fields in their documented order.)"""

    _pairs: list[Override] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _parse_overrides(self):
        try:
            self._pairs = parse_overrides(self.overrides)
        except ConfigError as exc:
            raise ValueError(f"overrides: {exc}") from None
        return self

    @property
    def override_pairs(self) -> list[Override]:
        """``overrides`` as ``(section.field, value)`` pairs, in order."""
        return list(self._pairs)


class Experiment(_WithOverrides):
    """One comparison: a task (or several) and the architectures trained on it."""

    task: str | list[str] = Field(description="registered task name, or a list of them (one experiment each)")
    models: list[str] = Field(min_length=1, description="architectures to train")
    name: str | None = Field(None, description="label in tables (default: the task name)")
    profile: str | None = Field(None, description="config profile (default: the sweep's)")
    overrides: list[str] = Field(default_factory=list, description="section.field=value for every run of it")
    grid: Grid = Field(default_factory=dict, description="extra grid axes (win over the sweep's)")
    model_overrides: dict[str, list[str]] = Field(
        default_factory=dict,
        description="architecture -> section.field=value for its runs alone, after the experiment's overrides "
                    "(e.g. the learning rate `windtunnel tune` found for it)",
    )
    match_capacity: str | None = Field(
        "transformer",
        description="match every other model's parameter count to this architecture's (trained or not; null: sizes as given)",
    )

    @model_validator(mode="after")
    def _check(self):
        if isinstance(self.task, list) and not self.task:
            raise ValueError("task is an empty list")
        for model, items in self.model_overrides.items():
            if model not in self.models:
                raise ValueError(f"model_overrides names {model!r}, which is not among models {self.models}")
            try:
                parse_overrides(items)
            except ConfigError as exc:
                raise ValueError(f"model_overrides.{model}: {exc}") from None
        return self

    def model_override_pairs(self, model: str) -> list[Override]:
        """``model_overrides[model]`` as ``(section.field, value)`` pairs (none for other models)."""
        return parse_overrides(self.model_overrides.get(model, []))

    def tasks(self) -> list[str]:
        return self.task if isinstance(self.task, list) else [self.task]

    def label(self, task: str) -> str:
        return self.name if self.name and not isinstance(self.task, list) else (f"{self.name}-{task}" if self.name else task)


class PrimitiveRule(StrictConfig):
    experiment: str = Field(description="experiment name whose results decide this primitive")
    metric: ScoredMetric = Field(
        description="metric at the training length; scored as the fraction of the best baseline's gap closed"
    )
    variants: list[str] = Field(
        default_factory=list,
        description="further experiments, named EXPERIMENT-VARIANT, that score variants of the architectures on the same "
                    "task (e.g. the per-position MLP); their rows are labelled 'model (VARIANT)'",
    )

    def experiments(self) -> dict[str, str | None]:
        """Experiment name -> the variant label of its rows (None for the rule's own experiment)."""
        return {self.experiment: None, **{v: v.removeprefix(f"{self.experiment}-") for v in self.variants}}


class Primitives(StrictConfig):
    """Which inference primitives each architecture realises (Paper I v3's task-to-primitive mapping).

    A primitive's score is the fraction of the gap between the best baseline and the exact
    posterior that the model closes: 1 - model / baseline for errors, (model - baseline) /
    (1 - baseline) for accuracy. ``realised`` and ``partial`` are the score thresholds."""

    rules: dict[str, PrimitiveRule] = Field(default_factory=dict, description="primitive name -> where it is measured")
    realised: float = Field(0.9, gt=0, le=1, description="score at or above which a primitive counts as realised")
    partial: float = Field(0.5, ge=0, le=1, description="score at or above which it counts as partly realised")

    @model_validator(mode="after")
    def _order(self):
        if self.partial > self.realised:
            raise ValueError(f"partial ({self.partial}) must not exceed realised ({self.realised})")
        return self


class Resources(StrictConfig):
    """What each run asks of a Ray cluster (ignored by the local backend)."""

    num_cpus: float | None = Field(None, gt=0, description="CPUs per run (default: train.threads, or 1)")
    num_gpus: float = Field(0, ge=0, description="GPUs per run (set 1 on a GPU cluster)")


class Diagnose(StrictConfig):
    """Geometric diagnostics (``windtunnel diagnose``) of the sweep's finished runs."""

    models: list[str] = Field(default_factory=lambda: ["transformer", "mamba"], min_length=1,
                              description="architectures whose runs are diagnosed")
    analyses: list[str] | None = Field(None, description="analysis names (default: every one that applies)")
    n_sequences: int = Field(256, ge=8, le=100_000, description="probe sequences per diagnosis")

    @model_validator(mode="after")
    def _check(self):
        if self.analyses is not None:
            from windtunnel.geometry.diagnose import parse_analyses

            try:
                parse_analyses(self.analyses)
            except ConfigError as exc:
                raise ValueError(f"analyses: {exc}") from None
        return self


class SweepConfig(_WithOverrides):
    """A sweep: experiments (tasks x architectures) expanded over a grid of config fields into
    runs, with the settings they share (`windtunnel sweep`, docs/sweeps.md)."""

    name: str = Field(min_length=1, description="sweep name")
    description: str = Field("", description="what the sweep reproduces")
    profile: str = Field("quick", description="default config profile of every experiment")
    overrides: list[str] = Field(default_factory=list, description="section.field=value applied to every run")
    grid: Grid = Field(default_factory=dict, description="section.field -> values (cartesian product)")
    experiments: list[Experiment] = Field(min_length=1)
    paper: str | None = Field(None, description="print this paper's reported numbers beside ours (e.g. paper1)")
    primitives: Primitives | None = None
    resources: Resources = Field(default_factory=Resources)
    diagnose: Diagnose | None = Field(None, description="diagnose these architectures' runs once they are trained")
    jobs: int | Literal["auto"] = Field(
        1, description="local backend: runs trained (and diagnosed) at once, each in its own process; 'auto': the "
        "CPU cores divided by the runs' train.threads. Not part of the content hash (it does not change results)",
    )
    decide_early: bool = Field(
        False, description="a run of an experiment that scores a primitive stops once its probe has shown the primitive "
        "realised and the full evaluation there agrees (windtunnel.train.decide); a run that does not realise it trains "
        "its whole budget",
    )

    @model_validator(mode="after")
    def _check(self):
        parse_jobs(self.jobs)
        if self.decide_early and not self.primitives:
            raise ValueError("decide_early needs primitives: the rules say which metric each experiment's runs are decided by")
        names = [e.label(t) for e in self.experiments for t in e.tasks()]
        if len(set(names)) != len(names):
            raise ValueError(f"experiment names must be unique, got {names}; give each a name")
        if self.primitives:
            for prim, rule in self.primitives.rules.items():
                for exp in rule.experiments():
                    if exp not in names:
                        raise ValueError(f"primitive {prim!r} refers to experiment {exp!r}; have {names}")
                bad = [v for v in rule.variants if not v.startswith(f"{rule.experiment}-")]
                if bad:
                    raise ValueError(f"primitive {prim!r}: variant experiments must be named "
                                     f"'{rule.experiment}-VARIANT', got {bad}")
        if self.paper is not None:
            from windtunnel.sweep.paper import paper_names

            if self.paper not in paper_names():
                raise ValueError(f"paper = {self.paper!r} is unknown; available: {', '.join(paper_names())}")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_decide_early(self, handler):
        # added after sweep folders were written: unset, a sweep dumps (and is saved) as before it existed
        doc = handler(self)
        if isinstance(doc, dict) and doc.get("decide_early") is False:
            del doc["decide_early"]
        return doc

    def content_hash(self) -> str:
        """The hash of what the sweep computes: ``jobs`` (how many run at once) is left out, and so
        are an empty ``model_overrides`` and an unset ``decide_early`` (sweeps written before they
        existed keep their folders)."""
        return short_hash(sweep_hash_doc(self.model_dump(mode="json", exclude={"jobs"})))


# ---------------------------------------------------------------------------------------
# Shipped sweeps and loading
# ---------------------------------------------------------------------------------------
def _shipped():
    return resources.files("windtunnel") / "sweep" / "configs"


def sweep_names() -> list[str]:
    """The names of the shipped sweeps (`windtunnel sweep NAME`)."""
    return json_names(_shipped())


def load_sweep(name_or_path: str | Path) -> SweepConfig:
    """A shipped sweep by name (``paper1``, ``paper1-quick``) or a sweep JSON file by path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise ConfigError(f"sweep file {path} does not exist")
        text, where = path.read_text(), str(path)
    else:
        shipped = _shipped() / f"{name_or_path}.json"
        if not shipped.is_file():
            raise ConfigError(
                f"unknown sweep '{name_or_path}': not a file, and not a shipped sweep ({', '.join(sweep_names())})"
            )
        text, where = shipped.read_text(), f"shipped sweep {name_or_path}"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc}") from None
    doc = {k: v for k, v in doc.items() if not k.startswith("_")}
    return SweepConfig.build(doc, where=f"sweep ({where})")


def parse_grid_option(item: str) -> tuple[str, list[Any]]:
    """``train.seed=0,1,2`` or ``train.lr=[1e-3,3e-4]`` -> (key, values) (JSON where values parse)."""
    key, eq, raw = item.partition("=")
    if not eq:
        raise ConfigError(f"grid option {item!r} must look like section.field=v1,v2 (e.g. train.seed=0,1,2)")
    try:
        _check_key(key)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        values = json.loads(raw) if raw.startswith("[") else [json.loads(v) for v in raw.split(",")]
    except json.JSONDecodeError:
        values = raw.split(",")
    if not isinstance(values, list) or not values:
        raise ConfigError(f"grid option {item!r} needs at least one value")
    return key, values
