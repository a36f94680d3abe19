"""Evaluate a model on a held-out stream against the exact posterior (and the task's baselines).

Evaluation always runs in float32 (no autocast): calibration is measured in hundredths of a
bit, below what bf16 logits resolve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from windtunnel.evaluate.metrics import AUTHORS_KL_EPS, accuracy, entropy_error, model_prediction, per_position, summarize
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
    out = {"probe_entropy_error": float(entropy_error(pp["dh"])),
           "probe_kl_bayes_model": float(pp["kl_bayes_model"].mean())}
    target = batch.target
    if target is not None and pred.probs is not None and not target.is_floating_point():
        out["probe_accuracy"] = float(accuracy(pred.probs, target).mean())
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


def evaluate(
    model: torch.nn.Module,
    task: Task,
    n_sequences: int = 2000,
    seed: int = 0,
    batch_size: int = 500,
    n_boot: int = 1000,
    lengths: list[int] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Calibration of ``model`` on ``task`` (and on the task at other ``lengths``); ``progress``:
    a bar on stderr over the forward passes and the bootstrap of each length.

    Returns ``{"lengths": {L: summary}, "main_length": L0, "baselines": {L: {name: summary}}}``
    where each summary is :func:`windtunnel.evaluate.metrics.summarize`'s dict.
    """
    field = task.Config.length_field
    main = getattr(task.config, field) if field else None
    todo = [main] + [L for L in (lengths or []) if L != main]
    out: dict[str, Any] = {"main_length": main, "length_field": field, "lengths": {}, "baselines": {}}
    passes = -(-n_sequences // batch_size)
    bar = progress_bar(len(todo) * (passes + 1), desc="evaluate", enabled=progress, unit="batch")
    for L in todo:
        t = task if L == main else task.with_length(L)
        batch = sample_eval(t, n_sequences, seed)
        pred = predict(model, t, batch, batch_size, on_batch=bar.update)
        key = str(L)
        out["lengths"][key] = summarize(pred, task_bayes(batch), batch.target, n_boot=n_boot, seed=seed)
        bar.update()  # the bootstrap: as long as the forward passes
        out["lengths"][key]["step"] = batch.step.tolist()
        out["baselines"][key] = {
            name: _headline(summarize(p, task_bayes(batch), batch.target, n_boot=1, seed=seed))
            for name, p in t.baselines(batch).items()
        }
    bar.close()
    return out


def task_bayes(batch: Batch) -> Prediction:
    return Prediction(probs=batch.probs, mean=batch.mean, var=batch.var)


def _headline(summary: dict[str, Any]) -> dict[str, float]:
    keys = ("entropy_error_mean_abs", "entropy_error_abs_mean", "kl_bayes_model", "accuracy")
    return {k: summary[k]["value"] for k in keys if k in summary}
