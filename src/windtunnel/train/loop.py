"""One run's training loop: the step (optimiser, schedule, loss), resume from the newest resumable
checkpoint, the probe, checkpoints, the metrics log, and the early decision (:mod:`windtunnel.train.decide`).
:func:`windtunnel.train.trainer.train` drives it."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from windtunnel.compat import legacy_call
from windtunnel.config import ConfigError
from windtunnel.evaluate.evaluator import EvalSettings, evaluate, probe_metrics, sample_eval
from windtunnel.evaluate.record import METRICS
from windtunnel.files import append_text, atomic_write_text
from windtunnel.interrupt import StopFlag
from windtunnel.progress import progress_bar
from windtunnel.tasks import Batch, Task, make_generator
from windtunnel.train.build import curriculum
from windtunnel.train.checkpoint import latest_resumable, load_resume, log_spaced_steps, save_checkpoint
from windtunnel.train.config import RunConfig, TrainConfig
from windtunnel.train.decide import Decider, Decision, Race, decided
from windtunnel.train.rundir import RunDir
from windtunnel.train.tracking import Tracking, flatten

#: the probe's key in ``metrics.jsonl`` the progress bar shows and a probe row is known by
PROBE_KEY = METRICS["entropy_error"].probe_key


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


@dataclass(frozen=True)
class StepSetup:
    """What every optimiser step of one run uses: the model and its optimiser, the loss
    (:func:`check_loss`'s kind), the run's train config (learning rate, schedule, batch size,
    clipping), the device, and the autocast dtype (None: no autocast; :func:`autocast_dtype`)."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    loss_kind: str
    tc: TrainConfig
    device: torch.device
    amp: torch.dtype | None = None


def train_step(setup: StepSetup, task: Task, data_gen: torch.Generator, step: int, *legacy: Any,
               **old: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimiser step at ``step`` (0-based) on a fresh batch of ``task`` from ``data_gen``: the
    scheduled learning rate, the forward pass (under autocast to ``setup.amp``, when given), the
    loss (plus the model's own term, :meth:`~windtunnel.models.base.WindModel.pop_auxiliary_loss`),
    gradients clipped to ``train.grad_clip`` (0: not clipped). Returns (loss, gradient norm before
    clipping); a non-finite loss raises :class:`TrainingError` before any parameter moves. (The
    earlier form ``train_step(model, opt, task, data_gen, loss_kind, step, tc, device, amp)`` still
    works, deprecated.)"""
    if legacy or old or not isinstance(setup, StepSetup):
        a = legacy_call("train_step", (setup, task, data_gen, step, *legacy), old,
                        "train_step(StepSetup(model, opt, loss_kind, tc, device, amp), task, data_gen, step)")
        setup = StepSetup(a["model"], a["opt"], a["loss_kind"], a["tc"], a["device"], a["amp"])
        task, data_gen, step = a["task"], a["data_gen"], a["step"]
    model, opt, tc, device, amp = setup.model, setup.opt, setup.tc, setup.device, setup.amp
    model.train()
    for g in opt.param_groups:
        g["lr"] = tc.lr * lr_at(step, tc)
    batch = task.sample(tc.batch_size, data_gen)
    with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
        out = model(batch.inputs, positions=batch.positions)
    loss = loss_fn(setup.loss_kind, out, batch)
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


def eval_settings(config: RunConfig) -> EvalSettings:
    """The evaluation of a run: its ``eval`` config, on the eval stream of its ``train.seed``."""
    ec = config.eval
    return EvalSettings(ec.n_sequences, config.train.seed, ec.batch_size, ec.n_boot, tuple(ec.lengths))


def evaluate_run(model: torch.nn.Module, task: Task, config: RunConfig, progress: bool = False) -> dict[str, Any]:
    return evaluate(model, task, eval_settings(config), progress)


@dataclass
class Ledger:
    """A run's metrics rows not yet on disk and its checkpoints, as it trains: rows are kept in
    memory and appended to ``metrics.jsonl`` (and sent to ``tracking``) before each checkpoint and
    probe check, so the log on disk always covers the newest resumable checkpoint (``saved``)."""

    run: RunDir
    setup: StepSetup
    data_gen: torch.Generator
    tracking: Tracking | None
    n_params: int
    saved: int | None = None
    pending: list[str] = field(default_factory=list)

    def write_metrics(self) -> None:
        if self.pending:
            append_text(self.run.metrics_path, "".join(self.pending))
            if self.tracking:
                self.tracking.log_rows([json.loads(line) for line in self.pending])
            self.pending.clear()

    def checkpoint(self, step: int, seconds: float, resumable: bool) -> None:
        self.write_metrics()
        state = {"train_seconds": seconds, "n_params": self.n_params}
        save_checkpoint(self.run.path, step, self.setup.model, state, self.setup.opt if resumable else None,
                        {"train": self.data_gen} if resumable else None)
        if resumable:
            self.saved = step


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

    def decide(self, rule: Decision, end: int, race: Race | None = None) -> tuple[int, float, dict[str, Any]]:
        """Train to ``end`` under the early decision ``rule`` (in ``race``, if given: paused where a
        rival was decided first): (steps, seconds, the decided evaluation, or {} when the run went
        to ``end`` undecided or paused)."""
        existing = self.run.eval()
        if decided(existing, rule):
            return existing["steps"], existing.get("train_seconds", 0.0), existing
        probe = sample_eval(self.task, self.config.train.eval_probe_size, self.config.train.seed, split="probe")
        decider = Decider(rule, self.task, probe, self.run, race)
        while True:
            step, seconds = self.to(end, decider)
            if step >= end or not decider.due:
                return step, seconds, {}
            ev = evaluate_run(self.model, self.task, self.config, self.progress)
            ev.update(n_params=self.model.n_params(), steps=step, train_seconds=seconds)
            if decider.settle(ev, step):
                self.run.write_eval(ev)
                return step, seconds, ev
            if decider.beaten(step):
                return step, seconds, {}

    def _resume(self, ledger: Ledger, decider: Decider | None) -> tuple[int, float, bool]:
        """Load the newest resumable checkpoint, if any, into the model, optimiser and data stream;
        rewrite ``metrics.jsonl`` to the rows up to it, start the trackers and give ``decider`` the
        probes so far. Returns (step, seconds, whether it resumed)."""
        torch.manual_seed(self.config.train.seed + 1)  # dropout draws; saved and restored with each resumable checkpoint
        resume = latest_resumable(self.run.path)
        step, seconds = 0, 0.0
        if resume is not None:
            state = load_resume(resume, self.model, ledger.setup.opt, {"train": ledger.data_gen})
            step, seconds = state["step"], state.get("train_seconds", 0.0)
            ledger.saved = step
        done = self.run.metrics(step)
        atomic_write_text(self.run.metrics_path, "".join(json.dumps(r) + "\n" for r in done))
        if self.tracking:
            self.tracking.start(flatten(self.config.model_dump(mode="json")), done)
        if decider is not None:
            decider.resume(done)
        return step, seconds, resume is not None

    def to(self, end: int, decider: Decider | None = None) -> tuple[int, float]:
        """Resume from the newest resumable checkpoint and train to step ``end`` (``train.steps``
        or a pause before it), or to the first probe at which ``decider`` asks for a decision;
        returns (steps, seconds).

        Metrics lines are kept in memory and appended to ``metrics.jsonl`` before each checkpoint
        and probe check (:class:`Ledger`), so the log on disk always covers the newest resumable
        checkpoint; ``tracking`` gets the same rows as they are written (and, first, those of a
        resumed run it has not had)."""
        tc, device = self.config.train, self.device
        setup = StepSetup(self.model, make_optimizer(self.model, tc), self.loss_kind, tc, device,
                          autocast_dtype(tc.precision, device))
        ledger = Ledger(self.run, setup, make_generator(tc.seed, "train", device), self.tracking, self.model.n_params())
        probe = sample_eval(self.task, tc.eval_probe_size, tc.seed, split="probe")
        # train.curriculum (checked before anything is written): the task each step's batch is drawn from
        stint = Stint(ledger, probe, curriculum(self.config, self.task), end, decider)
        step, seconds, resumed = self._resume(ledger, decider)
        if decider is not None and resumed and (decider.due or decider.beaten(step)):  # shown before this checkpoint
            return step, seconds
        if step == 0 and not resumed:
            ledger.checkpoint(step, seconds, resumable=tc.steps == 0)  # the initialisation, for the diagnostics' nulls
        return self._steps(stint, step, seconds)

    def _steps(self, stint: Stint, step: int, seconds: float) -> tuple[int, float]:
        """The steps from ``step`` to ``stint.end`` (or to a probe that asks for a decision)."""
        tc, ledger, stage = self.config.train, stint.ledger, stint.stage
        eval_every = tc.eval_every or max(1, tc.steps // 10)
        weight_steps = set(log_spaced_steps(tc.steps, tc.checkpoints))
        bar = progress_bar(tc.steps, initial=step, desc=self.config.run_name(), enabled=self.progress)
        last_resume = time.monotonic()
        while step < stint.end:
            if self.stop.signum is not None:
                self._stop_here(ledger, step, seconds, bar)
            t0 = time.perf_counter()
            loss, gnorm = self._step(ledger, stage(step) if stage else self.task, step)
            seconds += time.perf_counter() - t0
            step += 1
            bar.update(1)
            row = {"step": step, "loss": loss.item(), "lr": ledger.setup.opt.param_groups[0]["lr"],
                   "grad_norm": float(gnorm), "seconds": seconds}
            due = (step % eval_every == 0 or step == stint.end) and self._probe(stint, row, bar)
            ledger.pending.append(json.dumps(row) + "\n")
            if step == stint.end or due or time.monotonic() - last_resume > tc.resume_every_s:
                ledger.checkpoint(step, seconds, resumable=True)
                last_resume = time.monotonic()
            elif step in weight_steps:
                ledger.checkpoint(step, seconds, resumable=False)
            elif PROBE_KEY in row:
                ledger.write_metrics()
            if due:
                break
        bar.close()
        return step, seconds

    def _step(self, ledger: Ledger, task: Task, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            return train_step(ledger.setup, task, ledger.data_gen, step)
        except TrainingError as exc:
            raise TrainingError(f"{exc}; the last checkpoint in {self.run.path} is kept. "
                                "Try a lower train.lr or train.precision=fp32.") from None

    def _probe(self, stint: Stint, row: dict[str, Any], bar: Any) -> bool:
        """The held-out probe into ``row``; whether ``stint``'s decider asks for a decision now, or
        its race was won at this step or before (the run pauses)."""
        row.update(probe_metrics(self.model, self.task, stint.probe))
        bar.set_postfix(loss=f"{row['loss']:.4f}", dH=f"{row[PROBE_KEY]:.4f}")
        return stint.decider is not None and (stint.decider.score(row) or stint.decider.beaten(row["step"]))

    def _stop_here(self, ledger: Ledger, step: int, seconds: float, bar: Any) -> None:
        """A stop was asked for: a resumable checkpoint at ``step`` (unless the newest is there), then
        :class:`~windtunnel.interrupt.Interrupted`."""
        if ledger.saved != step:
            ledger.checkpoint(step, seconds, resumable=True)
        bar.close()
        self.stop.check(f"{self.run.path} stopped at step {step} of {self.config.train.steps}; "
                        "a resumable checkpoint is saved")


@dataclass(frozen=True)
class Stint:
    """One call of :meth:`Loop.to`: its :class:`Ledger`, the probe batch, the curriculum's task of
    each step (None: the run's task), the step it trains to and the early decision it may stop for."""

    ledger: Ledger
    probe: Batch
    stage: Callable[[int], Task] | None
    end: int
    decider: Decider | None = None
