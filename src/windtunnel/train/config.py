"""Run configs: which task, which model, how to train and evaluate; profiles as JSON files.

A run is fully described by a :class:`RunConfig`. Profiles (``src/windtunnel/configs/<profile>/
<task>.json``) hold the task parameters, the training and evaluation settings and one block of
model parameters per architecture; :func:`resolve_run` picks one architecture out of a profile
and applies overrides (``{"train.steps": 500}``; the command line's ``--set train.steps=500``
is parsed into that form where it is read). The resolved config is saved with every run, and its
content hash names the run directory.
"""

from __future__ import annotations

import copy
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_serializer, model_validator

from windtunnel.compat import run_hash_doc
from windtunnel.config import ConfigError, Overrides, StrictConfig, as_overrides, forced_overrides, json_names, short_hash
from windtunnel.registry import is_import_path


class Curriculum(StrictConfig):
    """Grow one task parameter over training (Garg et al.'s curriculum): ``param`` takes each
    integer value from ``start`` to ``end`` in equal stages over the first ``until`` x
    ``train.steps`` steps, the last stage being ``end``, which then stays. ``end`` is the run's
    own value, the task its probes and evaluation use (the full rung)."""

    param: str = Field(description="a task parameter that keeps the sequence format, e.g. regression's d_active")
    start: int = Field(description="its value at step 0")
    end: int | None = Field(None, description="its last value: the run's own (None: read from task_params)")
    until: float = Field(0.5, gt=0, le=1, description="fraction of train.steps within which every stage is trained")

    def value_at(self, step: int, steps: int, end: int) -> int:
        """The parameter at 0-based ``step`` of ``steps``: ``end - start + 1`` stages of equal
        length within the first ``until`` x ``steps``, then ``end``."""
        span = self.until * steps
        if step >= span:
            return end
        return min(end, self.start + math.floor((end - self.start + 1) * step / span))


class Cooldown(StrictConfig):
    """Anneal a run from step ``at`` on: the scheduled learning rate at ``at`` decays linearly to 0
    over ``steps`` steps (the branch a search compares a candidate by: :mod:`windtunnel.tune.search`)."""

    at: int = Field(ge=0, description="the step the branch leaves its run at")
    steps: int = Field(ge=1, description="steps over which the learning rate decays to 0")


class TrainConfig(StrictConfig):
    steps: int = Field(2000, ge=0, le=10_000_000, description="optimizer steps")
    batch_size: int = Field(64, ge=1, le=65536, description="sequences per step (fresh from the sampler)")
    lr: float = Field(1e-3, gt=0, le=1.0, description="peak learning rate")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    weight_decay: float = Field(0.01, ge=0, le=10, description="AdamW decoupled weight decay")
    schedule: Literal["constant", "cosine"] = Field("constant", description="after warmup: constant or cosine to 0")
    warmup: int = Field(0, ge=0, description="linear warmup steps (capped at steps)")
    grad_clip: float = Field(1.0, ge=0, description="max gradient norm (0: off)")
    loss: Literal["auto", "ce", "soft_ce", "gaussian_nll"] = Field(
        "auto", description="auto: the task's default (ce; soft_ce for HMM; gaussian_nll for regression)"
    )
    seed: int = Field(0, ge=0, description="seeds model init and the train/eval data streams")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda when available")
    precision: Literal["auto", "fp32", "bf16"] = Field("auto", description="auto: bf16 autocast on CUDA, fp32 on CPU")
    threads: int = Field(0, ge=0, le=512, description="CPU threads for torch (0: leave torch's default)")
    eval_every: int = Field(0, ge=0, description="steps between held-out entropy-error checks (0: ~10 per run)")
    eval_probe_size: int = Field(256, ge=1, description="sequences in the periodic held-out check")
    checkpoints: int = Field(12, ge=0, le=1000, description="log-spaced weight checkpoints (plus step 0 and the end)")
    resume_every_s: float = Field(60.0, gt=0, description="seconds between resumable checkpoints")
    curriculum: Curriculum | None = Field(None, description="grow a task parameter over training (see Curriculum)")
    cooldown: Cooldown | None = Field(None, description="anneal to 0 from a step on (a search's comparison branch)")

    @model_serializer(mode="wrap")
    def _without_unset_cooldown(self, handler):
        # added after run folders were written: unset, a config dumps (and is saved) as before it existed
        doc = handler(self)
        if isinstance(doc, dict) and doc.get("cooldown", "set") is None:
            del doc["cooldown"]
        return doc

    @model_validator(mode="after")
    def _check(self):
        if not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must lie in [0, 1), got {self.betas}")
        return self


class EvalConfig(StrictConfig):
    n_sequences: int = Field(2000, ge=1, description="held-out sequences (eval stream)")
    batch_size: int = Field(500, ge=1, description="sequences per forward pass in evaluation")
    lengths: list[int] = Field(default_factory=list, description="extra lengths to evaluate (e.g. HMM K = 30, 50)")
    n_boot: int = Field(1000, ge=1, description="bootstrap resamples for the 95% intervals")


class RunConfig(StrictConfig):
    """One run, fully described: the task and its parameters, the architecture and its, how to
    train and how to evaluate. Its content hash names the run directory."""

    task: str = Field(description="registered task name, or a user's package.module:Class")
    task_params: dict[str, Any] = Field(default_factory=dict)
    model: str = Field(description="registered architecture name, or a user's package.module:Class")
    model_params: dict[str, Any] = Field(default_factory=dict)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    profile: str | None = Field(None, description="the profile this run started from (recorded, not used)")

    def content_hash(self) -> str:
        """The hash of the resolved config that names the run's folder (:func:`~windtunnel.config.short_hash`)."""
        return short_hash(run_hash_doc(self.model_dump(mode="json")))

    def run_name(self) -> str:
        return f"{self.task.replace(':', '.')}-{self.model.replace(':', '.')}-{self.content_hash()}"  # a user's module:Class


# ---------------------------------------------------------------------------------------
# Profiles and overrides
# ---------------------------------------------------------------------------------------
def profile_names() -> list[str]:
    root = resources.files("windtunnel") / "configs"
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def profile_tasks(profile: str) -> list[str]:
    """The tasks that run profile ``profile`` has a config for."""
    root = resources.files("windtunnel") / "configs" / profile
    if not root.is_dir():
        raise ConfigError(f"unknown profile '{profile}'; available: {', '.join(profile_names())}")
    return json_names(root)


def load_profile(profile: str, task: str) -> dict[str, Any]:
    """The profile file for ``task`` as a dict (see ``src/windtunnel/configs``)."""
    root = resources.files("windtunnel") / "configs"
    path = root / profile / f"{task}.json"
    if not (root / profile).is_dir():
        raise ConfigError(f"unknown profile '{profile}'; available: {', '.join(profile_names())}")
    if not path.is_file():
        raise ConfigError(f"profile '{profile}' has no config for task '{task}'; it has: {', '.join(profile_tasks(profile))}")
    return json.loads(path.read_text())


def apply_overrides(doc: dict[str, Any], overrides: Overrides | None) -> dict[str, Any]:
    """A copy of ``doc`` with each ``(section.field, value)`` of ``overrides`` set, in order.
    The values are used as given (no text is parsed here: see :func:`windtunnel.config.parse_override`)."""
    out = copy.deepcopy(doc)
    for key, value in as_overrides(overrides):
        path = key.split(".")
        if not all(path):
            raise ConfigError(f"override key {key!r} must look like section.field (e.g. train.steps)")
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {key!r}: '{part}' is not a section")
        node[path[-1]] = copy.deepcopy(value)
    return out


def profile_model_defaults(prof: dict[str, Any], config_cls: type) -> dict[str, Any]:
    """The profile's ``model_defaults`` that ``config_cls`` has fields for."""
    return {k: v for k, v in prof.get("model_defaults", {}).items() if k in config_cls.model_fields}


def tuned_train(prof: dict[str, Any], model: str) -> dict[str, Any]:
    """The training settings a profile commits for ``model`` (its ``tuned`` block: the winners of
    ``windtunnel tune``, each traceable to a search table in docs/sweeps.md); {} when it has none.
    Keys that start with ``_`` (the table a value came from) are notes, not settings."""
    block = prof.get("tuned", {}).get(model, {})
    return {k: v for k, v in block.items() if not k.startswith("_")}


def task_of_profile(task: str) -> str | None:
    """The task whose profile file a run of ``task`` starts from: ``task`` itself, or for a user's
    ``package.module:Class`` the built-in task it subclasses, nearest first (None when it
    subclasses none: the run then starts from the defaults of :class:`RunConfig`)."""
    from windtunnel.tasks import task_class, task_names

    if not is_import_path(task):
        return task
    builtin = {task_class(name): name for name in task_names()}
    return next((builtin[c] for c in task_class(task).__mro__[1:] if c in builtin), None)


def resolve_run(
    task: str, model: str, profile: str | None = "quick", overrides: Overrides | None = None
) -> RunConfig:
    """A validated :class:`RunConfig` for one architecture from a profile plus overrides.

    The profile's ``train`` section is completed by the settings it commits for this model
    (:func:`tuned_train`). ``overrides`` map dotted keys to values, applied in order: ``{"task_params.V": 10,
    "model_params.d_model": 128, "train.steps": 500, "eval.lengths": [30, 50]}`` (or a list of
    such pairs); ``WINDTUNNEL_FORCE_SET`` applies after them. A user's task
    (``package.module:Class``) starts from the profile of the built-in task it subclasses
    (:func:`task_of_profile`), or from RunConfig's defaults when it subclasses none.
    """
    from windtunnel.models import model_class
    from windtunnel.tasks import task_class

    task_class(task), model_class(model)  # unknown names fail here, listing the known ones
    profile_task = task if profile is None else task_of_profile(task)
    if profile_task is None:  # a user's task that subclasses no built-in one: RunConfig's defaults
        profile = None
    doc: dict[str, Any] = {"task": task, "model": model, "profile": profile}
    if profile is not None:
        prof = load_profile(profile, profile_task)
        models = prof.get("models", {})
        # an architecture the profile does not name (a user's package.module:Class, a new mixer)
        # gets the profile's model_defaults (e.g. the initialisation law); sweeps size it by
        # capacity matching on its knob
        params = models[model] if model in models else profile_model_defaults(prof, model_class(model).Config)
        doc.update(
            task_params=prof.get("task_params", {}),
            model_params=params,
            train={**prof.get("train", {}), **tuned_train(prof, model)},
            eval=prof.get("eval", {}),
        )
    doc = apply_overrides(doc, [*as_overrides(overrides), *forced_overrides()])
    cfg = RunConfig.build(doc, where="run")
    # the task's and the model's own fields, named as the user wrote them (task_params.V)
    task_class(task).Config.build(cfg.task_params, where=f"task '{task}'", section="task_params")
    model_class(model).Config.build(cfg.model_params, where=f"model '{model}'", section="model_params")
    return cfg


def read_run_config(path: Path) -> RunConfig:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read run config {path}: {exc}") from None
    return RunConfig.build(doc, where=f"run ({path})")
