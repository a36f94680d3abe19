"""Train one model on one wind tunnel: fresh batches every step, checkpoints, resume, evaluation.

A run lives in one directory (named by the content hash of its resolved config unless the
caller chooses), opened as a :class:`~windtunnel.train.rundir.RunDir`: ``config.json``,
``metrics.jsonl``, ``checkpoints/`` and ``eval.json`` (the command line adds ``plots/``, and
``windtunnel report`` a page). Calling :func:`train` again on the same directory resumes from
the newest resumable checkpoint (or returns at once when the run is finished); on the CPU a
resumed run ends with the same weights as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from windtunnel.config import ConfigError
from windtunnel.evaluate.evaluator import evaluate, probe_metrics, sample_eval
from windtunnel.files import append_text, atomic_write_text
from windtunnel.interrupt import StopFlag, stop_on_signals
from windtunnel.lock import folder_lock
from windtunnel.tasks import Task, make_generator
from windtunnel.train.build import build, curriculum
from windtunnel.train.checkpoint import latest_resumable, load_resume, log_spaced_steps, save_checkpoint
from windtunnel.train.config import RunConfig, TrainConfig
from windtunnel.train.progress import progress_bar
from windtunnel.train.rundir import RunDir
from windtunnel.train.tracking import Tracking, flatten, parse_trackers


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


# ---------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------
def train(config: RunConfig, run_dir: Path | str, progress: bool = True, evaluate_at_end: bool = True,
          stop_at: int | None = None, trackers: str | Sequence[str] = (),
          tracking_group: Path | str | None = None) -> RunResult:
    """Train (or resume, or just load a finished) run in ``run_dir`` and evaluate it.

    The run directory is locked while this runs (:mod:`windtunnel.lock`). A SIGINT or SIGTERM
    stops training after the current step with a resumable checkpoint and raises
    :class:`~windtunnel.interrupt.Interrupted`; calling ``train`` again continues exactly.

    ``stop_at`` pauses the run at that step (a pilot of the tuner's successive halving): it
    trains the very run of ``config`` (same schedule, same data) up to ``stop_at`` steps, writes
    a resumable checkpoint and returns without evaluating; a later call continues it exactly.

    ``trackers`` (``"tensorboard"``, ``"mlflow"``, ``"wandb"``, or several) logs the run to
    experiment trackers as well (:mod:`windtunnel.train.tracking`; ``tracking_group``: the sweep
    folder of a sweep's run); the plots are then written to ``plots/`` and logged with the evaluation.
    """
    run_dir = Path(run_dir)
    names = parse_trackers(trackers)  # unknown names and missing extras, before anything is written
    tc = config.train
    device = resolve_device(tc.device)
    if tc.threads:
        torch.set_num_threads(tc.threads)
    task, model = build(config)
    loss_kind = check_loss(tc.loss, task)
    with folder_lock(run_dir, "run"), stop_on_signals() as stop:
        run = RunDir(run_dir)
        run.write_config(config)
        model.to(device)
        end = tc.steps if stop_at is None else min(max(0, stop_at), tc.steps)
        tracking = Tracking(names, run_dir, tracking_group)
        try:
            step, seconds = _train_loop(config, run, task, model, loss_kind, device, progress, stop, end, tracking)
            result_eval: dict[str, Any] = {}
            if evaluate_at_end and step >= tc.steps:
                existing = run.eval()
                if existing is not None:
                    result_eval = existing
                else:
                    result_eval = evaluate_run(model, task, config)
                    result_eval.update(n_params=model.n_params(), steps=step, train_seconds=seconds)
                    run.write_eval(result_eval)
                if tracking:
                    tracking.finish(step, result_eval, [run.eval_path, *_plots_for_trackers(run_dir, result_eval)])
        finally:
            tracking.close()
        stop.check(f"{run_dir} finished its {step} steps")
    return RunResult(run_dir, config, model.n_params(), step, seconds, result_eval)


def write_run_plots(run_dir: Path | str, ev: dict[str, Any]) -> list[Path]:
    """``plots/calibration.png`` (and ``plots/lengths.png`` for several evaluation lengths) of a
    run's evaluation; returns the files written."""
    from windtunnel.evaluate.plots import calibration_plot, length_plot

    run_dir = Path(run_dir)
    main = ev["lengths"][str(ev["main_length"])]
    paths = [calibration_plot({"model": {**main["curves"], "step": main["step"]}}, run_dir / "plots" / "calibration.png")]
    if len(ev["lengths"]) > 1:
        paths.append(length_plot(ev["lengths"], run_dir / "plots" / "lengths.png"))
    return [Path(p) for p in paths]


def _plots_for_trackers(run_dir: Path, ev: dict[str, Any]) -> list[Path]:
    """The run's plots for its trackers; a plot that cannot be drawn is warned about, not raised."""
    try:
        return write_run_plots(run_dir, ev)
    except Exception as exc:  # noqa: BLE001  the trackers must never stop a run
        import warnings

        warnings.warn(f"{run_dir}: plots not written for the trackers ({type(exc).__name__}: {exc})", RuntimeWarning,
                      stacklevel=2)
        return []


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


def _train_loop(config: RunConfig, run: RunDir, task: Task, model: torch.nn.Module, loss_kind: str,
                device: torch.device, progress: bool, stop: StopFlag, end: int,
                tracking: Tracking | None = None) -> tuple[int, float]:
    """Resume from the newest resumable checkpoint and train to step ``end`` (``train.steps`` or
    a pause before it); returns (steps, seconds).

    Metrics lines are kept in memory and appended to ``metrics.jsonl`` before each checkpoint and
    probe check, so the log on disk always covers the newest resumable checkpoint; ``tracking``
    gets the same rows as they are written (and, first, those of a resumed run it has not had).
    """
    tc, run_dir = config.train, run.path
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
    bar = progress_bar(tc.steps, initial=step, desc=config.run_name(), enabled=progress)
    last_resume = time.monotonic()
    while step < end:
        if stop.signum is not None:
            if saved != step:
                checkpoint(resumable=True)
            bar.close()
            stop.check(f"{run_dir} stopped at step {step} of {tc.steps}; a resumable checkpoint is saved")
        t0 = time.perf_counter()
        try:
            loss, gnorm = train_step(model, opt, stage(step) if stage else task, data_gen, loss_kind, step, tc, device, amp)
        except TrainingError as exc:
            raise TrainingError(f"{exc}; the last checkpoint in {run_dir} is kept. "
                                "Try a lower train.lr or train.precision=fp32.") from None
        seconds += time.perf_counter() - t0
        step += 1
        bar.update(1)

        row = {"step": step, "loss": loss.item(), "lr": opt.param_groups[0]["lr"], "grad_norm": float(gnorm), "seconds": seconds}
        if step % eval_every == 0 or step == end:
            row.update(probe_metrics(model, task, probe))
            bar.set_postfix(loss=f"{row['loss']:.4f}", dH=f"{row['probe_entropy_error']:.4f}")
        pending.append(json.dumps(row) + "\n")
        if step == end or time.monotonic() - last_resume > tc.resume_every_s:
            checkpoint(resumable=True)
            last_resume = time.monotonic()
        elif step in weight_steps:
            checkpoint(resumable=False)
        elif "probe_entropy_error" in row:
            write_metrics()
    bar.close()
    return step, seconds


def evaluate_run(model: torch.nn.Module, task: Task, config: RunConfig) -> dict[str, Any]:
    ec = config.eval
    return evaluate(
        model, task, n_sequences=ec.n_sequences, seed=config.train.seed, batch_size=ec.batch_size,
        n_boot=ec.n_boot, lengths=ec.lengths,
    )
