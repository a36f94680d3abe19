"""Evaluate a model on a held-out stream against the exact posterior (and the task's baselines).

Evaluation always runs in float32 (no autocast): calibration is measured in hundredths of a
bit, below what bf16 logits resolve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from windtunnel.compat import legacy_group
from windtunnel.evaluate.metrics import (
    ABS_MEAN_KEY,
    AUTHORS_KL_EPS,
    Bootstrap,
    accuracy,
    entropy_error,
    model_prediction,
    per_position,
    summarize,
)
from windtunnel.evaluate.record import METRICS
from windtunnel.progress import progress_bar
from windtunnel.tasks.base import Batch, Prediction, Task, make_generator


@torch.no_grad()
def predict(model: torch.nn.Module, task: Task, batch: Batch, batch_size: int = 500,
            on_batch: Callable[[], None] | None = None) -> Prediction:
    """The model's predictive distribution at the batch's scored positions (float64);
    ``on_batch()`` after each forward pass (a progress bar's update)."""
    model.eval()
    device = next(model.parameters()).device
    outs = []
    for start in range(0, batch.size, batch_size):
        x = batch.inputs[start : start + batch_size].to(device)
        outs.append(model(x, positions=batch.positions.to(device)).float().cpu())
        if on_batch is not None:
            on_batch()
    return model_prediction(torch.cat(outs), task.spec.output_kind)


def sample_eval(task: Task, n: int, seed: int, split: str = "eval") -> Batch:
    """``n`` held-out sequences from the ``split`` stream of ``seed`` (on the CPU)."""
    return task.sample(n, make_generator(seed, split))


def probe_metrics(model: torch.nn.Module, task: Task, batch: Batch) -> dict[str, float]:
    """The periodic held-out check logged during training (``probe_*`` in ``metrics.jsonl``): mean
    |H_model - H_Bayes| (the number the progress bar shows), KL(Bayes || model) in bits with the
    evaluation's clip, and the argmax accuracy when the task has integer answers."""
    return _probe_values(predict(model, task, batch), batch)


def _probe_values(pred: Prediction, batch: Batch) -> dict[str, float]:
    pp = per_position(pred, task_bayes(batch), eps=AUTHORS_KL_EPS)
    out = {METRICS["entropy_error"].probe_key: float(entropy_error(pp["dh"])),
           METRICS["kl_bayes_model"].probe_key: float(pp["kl_bayes_model"].mean())}
    target = batch.target
    if target is not None and pred.probs is not None and not target.is_floating_point():
        out[METRICS["accuracy"].probe_key] = float(accuracy(pred.probs, target).mean())
    return out


def probe_baselines(task: Task, batch: Batch) -> dict[str, float]:
    """The best baseline's value of each probe metric on the probe ``batch`` (keyed as
    :func:`probe_metrics`): the zero of a probe's primitive score, as the evaluation's best
    baseline is of the verdict's."""
    best: dict[str, float] = {}
    for name, pred in task.baselines(batch).items():
        if name == "bayes":
            continue
        for key, value in _probe_values(pred, batch).items():
            spec = next(m for m in METRICS.values() if m.probe_key == key)
            if key not in best or spec.better(value, best[key]):
                best[key] = value
    return best


@dataclass(frozen=True)
class EvalSettings:
    """What :func:`evaluate` measures on: ``n_sequences`` held-out sequences of the eval stream of
    ``seed``, in forward passes of ``batch_size``, with ``n_boot`` bootstrap resamples (seeded by
    ``seed`` too) for the intervals, at the training length and the extra ``lengths``. A run's
    come from its ``eval`` config and ``train.seed``."""

    n_sequences: int = 2000
    seed: int = 0
    batch_size: int = 500
    n_boot: int = 1000
    lengths: tuple[int, ...] = ()


def evaluate(model: torch.nn.Module, task: Task, settings: EvalSettings | None = None, progress: bool = False,
             **legacy: Any) -> dict[str, Any]:
    """Calibration of ``model`` on ``task`` (and on the task at other lengths), as ``settings``
    say (:class:`EvalSettings`; the defaults when None); ``progress``: a bar on stderr over the
    forward passes and the bootstrap of each length. (The keywords ``n_sequences``, ``seed``,
    ``batch_size``, ``n_boot`` and ``lengths`` still work, deprecated: they
    build the settings.)

    Returns ``{"lengths": {L: summary}, "main_length": L0, "baselines": {L: {name: summary}}}``
    where each summary is :func:`windtunnel.evaluate.metrics.summarize`'s dict.
    """
    s = legacy_group("evaluate", settings, legacy, EvalSettings)
    field = task.Config.length_field
    main = getattr(task.config, field) if field else None
    todo = [main] + [L for L in (s.lengths or []) if L != main]
    out: dict[str, Any] = {"main_length": main, "length_field": field, "lengths": {}, "baselines": {}}
    passes = -(-s.n_sequences // s.batch_size)
    bar = progress_bar(len(todo) * (passes + 1), desc="evaluate", enabled=progress, unit="batch")
    for L in todo:
        t = task if L == main else task.with_length(L)
        batch = sample_eval(t, s.n_sequences, s.seed)
        pred = predict(model, t, batch, s.batch_size, on_batch=bar.update)
        key = str(L)
        out["lengths"][key] = summarize(pred, task_bayes(batch), batch.target, Bootstrap(s.n_boot, seed=s.seed))
        bar.update()  # the bootstrap: as long as the forward passes
        out["lengths"][key]["step"] = batch.step.tolist()
        out["baselines"][key] = {
            name: _headline(summarize(p, task_bayes(batch), batch.target, Bootstrap(1, seed=s.seed)))
            for name, p in t.baselines(batch).items()
        }
    bar.close()
    return out


def task_bayes(batch: Batch) -> Prediction:
    return Prediction(probs=batch.probs, mean=batch.mean, var=batch.var)


def _headline(summary: dict[str, Any]) -> dict[str, float]:
    """A baseline's numbers in ``eval.json``: the entropy error in both aggregations, KL(Bayes||model)
    and the accuracy (when it has one)."""
    keys = (METRICS["entropy_error"].eval_key, ABS_MEAN_KEY, METRICS["kl_bayes_model"].eval_key,
            METRICS["accuracy"].eval_key)
    return {k: summary[k]["value"] for k in keys if k in summary}
