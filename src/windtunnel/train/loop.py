"""One run's training loop: the step (optimiser, schedule, loss), resume from the newest resumable
checkpoint, the probe, checkpoints, the metrics log, and the early decision (:mod:`windtunnel.train.decide`).
:func:`windtunnel.train.trainer.train` drives it."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from windtunnel.config import ConfigError
from windtunnel.evaluate.evaluator import evaluate, probe_metrics, sample_eval
from windtunnel.files import append_text, atomic_write_text
from windtunnel.interrupt import StopFlag
from windtunnel.progress import progress_bar
from windtunnel.tasks import Task, make_generator
from windtunnel.train.build import curriculum
from windtunnel.train.checkpoint import latest_resumable, load_resume, log_spaced_steps, save_checkpoint
from windtunnel.train.config import RunConfig, TrainConfig
from windtunnel.train.decide import Decider, Decision, decided
from windtunnel.train.rundir import RunDir
from windtunnel.train.tracking import Tracking, flatten


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. a non-finite loss); the last checkpoint is kept."""


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
    """Learning-rate multiplier at ``step``: linear warmup, then constant or cosine to 0; with a
    ``cooldown``, from its step on the multiplier there decays linearly to 0 over its steps."""
    cool = getattr(cfg, "cooldown", None)
    if cool is not None and step >= cool.at:
        return _scheduled(cool.at, cfg) * max(0.0, 1.0 - (step - cool.at + 1) / cool.steps)
    return _scheduled(step, cfg)


def _scheduled(step: int, cfg) -> float:
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


def make_optimizer(model: torch.nn.Module, tc: TrainConfig) -> torch.optim.AdamW:
    """AdamW over two parameter groups: weight decay ``train.weight_decay`` on the matrices
    (parameters of two or more dimensions), none on the biases, norms and other vectors."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=tc.lr,
        betas=tc.betas,
    )


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, task: Task, data_gen: torch.Generator,
               loss_kind: str, step: int, tc: TrainConfig, device: torch.device,
               amp: torch.dtype | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimiser step at ``step`` (0-based) on a fresh batch from ``data_gen``: the scheduled
    learning rate, the forward pass (under autocast to ``amp``, when given), the loss (plus the
    model's own term, :meth:`~windtunnel.models.base.WindModel.pop_auxiliary_loss`), gradients
    clipped to ``train.grad_clip`` (0: not clipped). Returns (loss, gradient norm before clipping);
    a non-finite loss raises :class:`TrainingError` before any parameter moves."""
    model.train()
    for g in opt.param_groups:
        g["lr"] = tc.lr * lr_at(step, tc)
    batch = task.sample(tc.batch_size, data_gen)
    with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
        out = model(batch.inputs, positions=batch.positions)
    loss = loss_fn(loss_kind, out, batch)
    aux = model.pop_auxiliary_loss() if hasattr(model, "pop_auxiliary_loss") else None
    if aux is not None:  # a model's own term (a head tied to the whole vocabulary: its softmax's rest)
        loss = loss + aux
    if not torch.isfinite(loss):
        raise TrainingError(f"non-finite loss ({loss.item()}) at step {step}")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip if tc.grad_clip > 0 else float("inf"))
    opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return loss, gnorm


def evaluate_run(model: torch.nn.Module, task: Task, config: RunConfig, progress: bool = False) -> dict[str, Any]:
    ec = config.eval
    return evaluate(
        model, task, n_sequences=ec.n_sequences, seed=config.train.seed, batch_size=ec.batch_size,
        n_boot=ec.n_boot, lengths=ec.lengths, progress=progress,
    )


@dataclass
class Loop:
    """The training of one run (its folder opened and locked by :func:`~windtunnel.train.trainer.train`)."""

    config: RunConfig
    run: RunDir
    task: Task
    model: torch.nn.Module
    loss_kind: str
    device: torch.device
    progress: bool
    stop: StopFlag
    tracking: Tracking | None = None

    def decide(self, rule: Decision, end: int) -> tuple[int, float, dict[str, Any]]:
        """Train to ``end`` under the early decision ``rule``: (steps, seconds, the decided
        evaluation, or {} when the run went to ``end`` undecided)."""
        existing = self.run.eval()
        if decided(existing, rule):
            return existing["steps"], existing.get("train_seconds", 0.0), existing
        probe = sample_eval(self.task, self.config.train.eval_probe_size, self.config.train.seed, split="probe")
        decider = Decider(rule, self.task, probe, self.run)
        while True:
            step, seconds = self.to(end, decider)
            if step >= end or not decider.due:
                return step, seconds, {}
            ev = evaluate_run(self.model, self.task, self.config, self.progress)
            ev.update(n_params=self.model.n_params(), steps=step, train_seconds=seconds)
            if decider.settle(ev, step):
                self.run.write_eval(ev)
                return step, seconds, ev

    def to(self, end: int, decider: Decider | None = None) -> tuple[int, float]:
        """Resume from the newest resumable checkpoint and train to step ``end`` (``train.steps``
        or a pause before it), or to the first probe at which ``decider`` asks for a decision;
        returns (steps, seconds).

        Metrics lines are kept in memory and appended to ``metrics.jsonl`` before each checkpoint
        and probe check, so the log on disk always covers the newest resumable checkpoint;
        ``tracking`` gets the same rows as they are written (and, first, those of a resumed run it
        has not had)."""
        config, run, task, model, tracking = self.config, self.run, self.task, self.model, self.tracking
        tc, run_dir, device = config.train, run.path, self.device
        n_params = model.n_params()
        opt = make_optimizer(model, tc)
        data_gen = make_generator(tc.seed, "train", device)
        probe = sample_eval(task, tc.eval_probe_size, tc.seed, split="probe")
        eval_every = tc.eval_every or max(1, tc.steps // 10)
        stage = curriculum(config, task)  # train.curriculum: the task each step's batch is drawn from
        weight_steps = set(log_spaced_steps(tc.steps, tc.checkpoints))

        step, seconds = 0, 0.0
        torch.manual_seed(tc.seed + 1)  # dropout draws; saved and restored with each resumable checkpoint
        resume = latest_resumable(run_dir)
        if resume is not None:
            state = load_resume(resume, model, opt, {"train": data_gen})
            step, seconds = state["step"], state.get("train_seconds", 0.0)
        metrics = run.metrics_path
        done = run.metrics(step)
        atomic_write_text(metrics, "".join(json.dumps(r) + "\n" for r in done))
        if tracking:
            tracking.start(flatten(config.model_dump(mode="json")), done)
        if decider is not None:
            decider.resume(done)
            if decider.due and resume is not None:  # the probe showed it before this resumed checkpoint
                return step, seconds
        pending: list[str] = []
        saved = step if resume is not None else None  # the step of the newest resumable checkpoint

        def write_metrics() -> None:
            if pending:
                append_text(metrics, "".join(pending))
                if tracking:
                    tracking.log_rows([json.loads(line) for line in pending])
                pending.clear()

        def checkpoint(resumable: bool) -> None:
            nonlocal saved
            write_metrics()
            state = {"train_seconds": seconds, "n_params": n_params}
            save_checkpoint(run_dir, step, model, state, opt if resumable else None, {"train": data_gen} if resumable else None)
            if resumable:
                saved = step

        if step == 0 and resume is None:
            checkpoint(resumable=tc.steps == 0)  # the initialisation, for the diagnostics' nulls

        amp = autocast_dtype(tc.precision, device)
        bar = progress_bar(tc.steps, initial=step, desc=config.run_name(), enabled=self.progress)
        last_resume = time.monotonic()
        while step < end:
            if self.stop.signum is not None:
                if saved != step:
                    checkpoint(resumable=True)
                bar.close()
                self.stop.check(f"{run_dir} stopped at step {step} of {tc.steps}; a resumable checkpoint is saved")
            t0 = time.perf_counter()
            try:
                loss, gnorm = train_step(model, opt, stage(step) if stage else task, data_gen, self.loss_kind, step, tc, device,
                                         amp)
            except TrainingError as exc:
                raise TrainingError(f"{exc}; the last checkpoint in {run_dir} is kept. "
                                    "Try a lower train.lr or train.precision=fp32.") from None
            seconds += time.perf_counter() - t0
            step += 1
            bar.update(1)

            row = {"step": step, "loss": loss.item(), "lr": opt.param_groups[0]["lr"], "grad_norm": float(gnorm),
                   "seconds": seconds}
            due = False
            if step % eval_every == 0 or step == end:
                row.update(probe_metrics(model, task, probe))
                bar.set_postfix(loss=f"{row['loss']:.4f}", dH=f"{row['probe_entropy_error']:.4f}")
                due = decider is not None and decider.score(row)
            pending.append(json.dumps(row) + "\n")
            if step == end or due or time.monotonic() - last_resume > tc.resume_every_s:
                checkpoint(resumable=True)
                last_resume = time.monotonic()
            elif step in weight_steps:
                checkpoint(resumable=False)
            elif "probe_entropy_error" in row:
                write_metrics()
            if due:
                break
        bar.close()
        return step, seconds
