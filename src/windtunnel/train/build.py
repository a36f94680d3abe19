"""A run config -> its task and a freshly initialised model: the model building that training,
run folders (:meth:`~windtunnel.train.rundir.RunDir.load_model`), the geometric diagnostics and
the sweeps' capacity matching share, without the training loop (no progress bars, signals or
evaluation here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from windtunnel.config import ConfigError
from windtunnel.models import make_model, model_class
from windtunnel.tasks import Task, make_task
from windtunnel.train.config import RunConfig


def build(config: RunConfig) -> tuple[Task, torch.nn.Module]:
    """The task and a freshly initialised model (seeded by ``train.seed``) for ``config``.

    Models with a position table are sized for the longest evaluation length unless
    ``model_params.max_len`` says otherwise (then a too-short table is an error).
    """
    task = make_task(config.task, config.task_params)
    curriculum(config, task)  # a curriculum that cannot work is an error before anything trains
    model = seeded_model(config, task, sized_model_params(config, task))
    for L in config.eval.lengths:
        t = task.with_length(L)
        max_len = getattr(model.config, "max_len", None)
        if max_len is not None and getattr(model.config, "has_position_table", False) and max_len < t.spec.seq_len:
            raise ConfigError(
                f"eval.lengths contains {L}: sequence length {t.spec.seq_len} is longer than the position table "
                f"(model_params.max_len = {max_len})"
            )
    return task, model


def sized_model_params(config: RunConfig, task: Task) -> dict[str, Any]:
    """``model_params`` with ``max_len`` set to the longest evaluated sequence when the model has
    that field and the run evaluates beyond the training length (so capacity matching counts the
    parameters the trained model will really have)."""
    params = dict(config.model_params)
    longest = max([task.spec.seq_len] + [task.with_length(L).spec.seq_len for L in config.eval.lengths])
    if longest > task.spec.seq_len and "max_len" in model_class(config.model).Config.model_fields and "max_len" not in params:
        params["max_len"] = longest
    return params


def seeded_model(config: RunConfig, task: Task, params: dict[str, Any]) -> torch.nn.Module:
    """``make_model`` with its initialisation drawn from ``train.seed`` (global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)
        return make_model(config.model, task.spec, params)


def curriculum(config: RunConfig, task: Task) -> Callable[[int], Task] | None:
    """The task to draw training batch ``step`` from under ``train.curriculum`` (None without
    one): ``task`` with the curriculum's parameter at its value for that step. Checked here: the
    parameter is one of the task's, it grows (``start`` <= ``end``) to the run's own value, every
    stage gets at least one step, and every stage keeps the run's sequence format (the model sees
    the same shapes; the probes and the evaluation use ``task`` itself)."""
    cur, steps = config.train.curriculum, config.train.steps
    if cur is None:
        return None
    fields = type(task.config).model_fields
    if cur.param not in fields:
        raise ConfigError(f"train.curriculum.param = {cur.param!r} is not a parameter of task {config.task}; "
                          f"it has: {', '.join(fields)}")
    own = getattr(task.config, cur.param)
    end = cur.end if cur.end is not None else own
    if not isinstance(end, int) or isinstance(end, bool):
        raise ConfigError(f"train.curriculum.end: the run's task_params.{cur.param} is {end!r}, not an integer; "
                          "give the value it grows to as train.curriculum.end")
    if own is not None and end != own:
        raise ConfigError(f"train.curriculum.end = {end}, but the run's task_params.{cur.param} is {own}: the curriculum "
                          "ends at the task the run is probed and evaluated on (leave end out)")
    if cur.start > end:
        raise ConfigError(f"train.curriculum.start = {cur.start} exceeds its end {end}: a curriculum grows the parameter")
    if cur.until * steps < end - cur.start + 1:
        raise ConfigError(f"train.curriculum: {end - cur.start + 1} stages ({cur.param} = {cur.start} .. {end}) do not fit "
                          f"in until x train.steps = {cur.until * steps:g} steps: raise until or lower start")
    stages: dict[int, Task] = {}

    def at(step: int) -> Task:
        v = cur.value_at(step, steps, end)
        if v not in stages:
            try:
                stages[v] = make_task(config.task, {**task.config.model_dump(), cur.param: v})
            except ConfigError as exc:
                raise ConfigError(f"train.curriculum: {cur.param} = {v} (from start = {cur.start}) is not a valid "
                                  f"value: {exc}") from None
        return stages[v]

    for step in (0, steps - 1):
        if at(step).spec != task.spec:
            raise ConfigError(f"train.curriculum: {cur.param} = {cur.value_at(step, steps, end)} changes the sequence "
                              f"format of task {config.task} ({at(step).spec} against {task.spec}); grow a parameter "
                              "that keeps it (regression: d_active)")
    return at
