"""Train one model on one wind tunnel: fresh batches every step, checkpoints, resume, evaluation.

A run lives in one directory (named by the content hash of its resolved config unless the
caller chooses): ``config.json``, ``metrics.jsonl``, ``checkpoints/``, ``eval.json``,
``plots/`` and ``summary.md``. Calling :func:`train` again on the same directory resumes from
the newest resumable checkpoint (or returns at once when the run is finished); on the CPU a
resumed run ends with the same weights as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from windtunnel.config import ConfigError
from windtunnel.evaluate.evaluator import evaluate, quick_entropy_error, sample_eval
from windtunnel.models import make_model, model_class
from windtunnel.tasks import Task, make_generator, make_task
from windtunnel.train.checkpoint import (
    atomic_write_text,
    latest_resumable,
    load_resume,
    log_spaced_steps,
    save_checkpoint,
)
from windtunnel.train.config import RunConfig, read_run_config
from windtunnel.train.progress import progress_bar


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. a non-finite loss); the last checkpoint is kept."""


@dataclass
class RunResult:
    run_dir: Path
    config: RunConfig
    n_params: int
    steps: int
    train_seconds: float
    eval: dict[str, Any]


# ---------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------
def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device = 'cuda' but no CUDA device is available; allowed here: auto, cpu")
    return torch.device(name)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def lr_at(step: int, cfg) -> float:
    """Learning-rate multiplier at ``step``: linear warmup, then constant or cosine to 0."""
    warmup = min(cfg.warmup, cfg.steps)
    if step < warmup:
        return (step + 1) / warmup
    if cfg.schedule == "constant":
        return 1.0
    span = max(1, cfg.steps - warmup)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / span)))


def loss_fn(kind: str, out: torch.Tensor, batch) -> torch.Tensor:
    """Mean loss over every scored position of the batch."""
    out = out.float()
    if kind == "ce":
        return F.cross_entropy(out.flatten(0, 1), batch.target.flatten())
    if kind == "soft_ce":
        return -(batch.probs.float() * F.log_softmax(out, -1)).sum(-1).mean()
    if kind == "gaussian_nll":
        mean, log_var = out[..., 0], out[..., 1]
        return 0.5 * (log_var + (batch.target.float() - mean) ** 2 / log_var.exp() + math.log(2 * math.pi)).mean()
    raise ConfigError(f"unknown loss {kind!r}")


def check_loss(kind: str, task: Task) -> str:
    spec = task.spec
    kind = spec.loss if kind == "auto" else kind
    if (kind == "gaussian_nll") != (spec.output_kind == "gaussian"):
        raise ConfigError(
            f"train.loss = {kind!r} does not fit task '{spec.name}' ({spec.output_kind} outputs); "
            f"allowed: {'gaussian_nll' if spec.output_kind == 'gaussian' else 'ce, soft_ce'}"
        )
    return kind


def build(config: RunConfig) -> tuple[Task, torch.nn.Module]:
    """The task and a freshly initialised model (seeded by ``train.seed``) for ``config``.

    Models with a position table are sized for the longest evaluation length unless
    ``model_params.max_len`` says otherwise (then a too-short table is an error).
    """
    task = make_task(config.task, config.task_params)
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


def _prepare_dir(run_dir: Path, config: RunConfig) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_file = run_dir / "config.json"
    if cfg_file.exists():
        existing = read_run_config(cfg_file)
        if existing.model_dump(mode="json") != config.model_dump(mode="json"):
            raise ConfigError(
                f"{run_dir} already holds a run with a different config; choose another --out "
                "(nothing was overwritten)"
            )
    else:
        atomic_write_text(cfg_file, json.dumps(config.model_dump(mode="json"), indent=2))


def _metrics_log(run_dir: Path, resume_step: int) -> list[dict]:
    """Records already logged up to ``resume_step`` (later ones belong to lost work)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("step", 0) <= resume_step]


# ---------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------
def train(config: RunConfig, run_dir: Path | str, progress: bool = True, evaluate_at_end: bool = True) -> RunResult:
    """Train (or resume, or just load a finished) run in ``run_dir`` and evaluate it."""
    run_dir = Path(run_dir)
    tc = config.train
    device = resolve_device(tc.device)
    if tc.threads:
        torch.set_num_threads(tc.threads)
    task, model = build(config)
    loss_kind = check_loss(tc.loss, task)
    _prepare_dir(run_dir, config)
    model.to(device)
    n_params = model.n_params()

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=tc.lr,
        betas=tc.betas,
    )
    data_gen = make_generator(tc.seed, "train", device)
    probe = sample_eval(task, tc.eval_probe_size, tc.seed, split="probe")
    eval_every = tc.eval_every or max(1, tc.steps // 10)
    weight_steps = set(log_spaced_steps(tc.steps, tc.checkpoints))

    step, seconds = 0, 0.0
    torch.manual_seed(tc.seed + 1)  # dropout draws; saved and restored with each resumable checkpoint
    resume = latest_resumable(run_dir)
    if resume is not None:
        state = load_resume(resume, model, opt, {"train": data_gen})
        step, seconds = state["step"], state.get("train_seconds", 0.0)
    rows = _metrics_log(run_dir, step)
    atomic_write_text(run_dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))

    def checkpoint(resumable: bool, extra: dict | None = None) -> None:
        state = {"train_seconds": seconds, "n_params": n_params, **(extra or {})}
        save_checkpoint(run_dir, step, model, state, opt if resumable else None, {"train": data_gen} if resumable else None)

    if step == 0 and resume is None:
        checkpoint(resumable=tc.steps == 0)  # the initialisation, for the diagnostics' nulls

    amp = autocast_dtype(tc.precision, device)
    bar = progress_bar(tc.steps, initial=step, desc=config.run_name(), enabled=progress)
    last_resume = time.monotonic()
    with open(run_dir / "metrics.jsonl", "a") as log:
        while step < tc.steps:
            t0 = time.perf_counter()
            model.train()
            for g in opt.param_groups:
                g["lr"] = tc.lr * lr_at(step, tc)
            batch = task.sample(tc.batch_size, data_gen)
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                out = model(batch.inputs, positions=batch.positions)
            loss = loss_fn(loss_kind, out, batch)
            if not torch.isfinite(loss):
                raise TrainingError(
                    f"non-finite loss ({loss.item()}) at step {step}; the last checkpoint in {run_dir} is kept. "
                    "Try a lower train.lr or train.precision=fp32."
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip if tc.grad_clip > 0 else float("inf"))
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds += time.perf_counter() - t0
            step += 1
            bar.update(1)

            row = {"step": step, "loss": loss.item(), "lr": opt.param_groups[0]["lr"], "grad_norm": float(gnorm), "seconds": seconds}
            if step % eval_every == 0 or step == tc.steps:
                row["probe_entropy_error"] = quick_entropy_error(model, task, probe)
                bar.set_postfix(loss=f"{row['loss']:.4f}", dH=f"{row['probe_entropy_error']:.4f}")
            log.write(json.dumps(row) + "\n")
            if step == tc.steps or time.monotonic() - last_resume > tc.resume_every_s:
                log.flush()
                checkpoint(resumable=True)
                last_resume = time.monotonic()
            elif step in weight_steps:
                checkpoint(resumable=False)
    bar.close()

    eval_file = run_dir / "eval.json"
    result_eval: dict[str, Any] = {}
    if evaluate_at_end:
        if eval_file.exists():
            result_eval = json.loads(eval_file.read_text())
        else:
            result_eval = evaluate_run(model, task, config)
            result_eval.update(n_params=n_params, steps=step, train_seconds=seconds)
            atomic_write_text(eval_file, json.dumps(result_eval, indent=1))
    return RunResult(run_dir, config, n_params, step, seconds, result_eval)


def evaluate_run(model: torch.nn.Module, task: Task, config: RunConfig) -> dict[str, Any]:
    ec = config.eval
    return evaluate(
        model, task, n_sequences=ec.n_sequences, seed=config.train.seed, batch_size=ec.batch_size,
        n_boot=ec.n_boot, lengths=ec.lengths,
    )
