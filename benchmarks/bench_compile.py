"""Does a faster training step shorten a scorecard on the CPU? ``torch.compile`` and the fused
AdamW against the eager step the trainer runs, on the quick profile's shapes.

    python benchmarks/bench_compile.py [--tasks bijection,hmm] [--models transformer,my_mixer:EMAMixer]
                                       [--steps 30] [--threads 1]

A scorecard's runs train one per worker, each on one thread (two workers on a 2-core machine), so
the step is timed at ``--threads 1`` by default. For each tunnel and architecture (every model
but the transformer matched to the transformer's parameter count, as a scorecard sizes it), one
training step (fresh batch, forward, loss, backward, AdamW step) is timed three ways, one step of
each per round so that a machine shared with other jobs slows them alike:

- ``eager``: the trainer's step (``torch.optim.AdamW``, its default foreach implementation);
- ``fused``: the same with ``AdamW(fused=True)``;
- ``compiled``: the model under ``torch.compile`` (inductor, the C++ backend on the CPU), the
  eager AdamW. Its compile time is printed apart (the first steps), the steady rate after.

It prints the median step time of each, and the median over rounds of eager / other (above 1: the
other is faster), so the ratio is what the change would save of a scorecard's training time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_train import interleaved_times  # noqa: E402

from windtunnel.models import make_model, match_capacity  # noqa: E402
from windtunnel.tasks import make_generator, make_task  # noqa: E402
from windtunnel.train.config import resolve_run  # noqa: E402
from windtunnel.train.trainer import loss_fn  # noqa: E402


def build(task_name: str, name: str):
    """The quick profile's model ``name`` on ``task_name``, matched to the transformer's size."""
    task = make_task(task_name, resolve_run(task_name, "transformer", "quick").task_params)
    ref = resolve_run(task_name, "transformer", "quick")
    torch.manual_seed(0)
    target = make_model("transformer", task.spec, ref.model_params).n_params()
    if name == "transformer":
        params = ref.model_params
    else:
        try:
            base = resolve_run(task_name, name, "quick").model_params
        except Exception:  # a user's model: its defaults, with the transformer's shape where it has the fields
            base = {k: v for k, v in ref.model_params.items() if k in ("n_layers", "d_model")}
        params, _ = match_capacity(name, task.spec, target, base)
    return task, ref.train.batch_size, params


def stepper(task, batch: int, model, opt):
    g = make_generator(0)

    def step() -> float:
        t0 = time.perf_counter()
        b = task.sample(batch, g)
        out = model(b.inputs, positions=b.positions)
        loss = loss_fn(task.spec.loss, out, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    return step


def variants(task_name: str, name: str) -> tuple[dict, float, int]:
    """The three steppers of one cell, the compile time (seconds) and the batch."""
    task, batch, params = build(task_name, name)
    out = {}
    for how in ("eager", "fused", "compiled"):
        torch.manual_seed(0)
        model = make_model(name, task.spec, params)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=how == "fused")
        if how == "compiled":
            model = torch.compile(model)
        out[how] = stepper(task, batch, model, opt)
    t0 = time.perf_counter()
    try:
        for _ in range(3):  # compile (and recompile once for a changed shape) before the timed rounds
            out["compiled"]()
    except Exception as exc:  # an inductor failure is a finding, printed in the row
        out["compiled"] = f"{type(exc).__name__}: {str(exc)[:60]}"
    return out, time.perf_counter() - t0, batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="bijection,hmm")
    ap.add_argument("--models", default="transformer,my_mixer:EMAMixer")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.steps} timed rounds")
    print(f"{'tunnel':<11} {'model':<22} {'batch':>5} {'compile s':>9} {'eager ms':>9} {'fused ms':>9} "
          f"{'compiled ms':>11} {'x fused':>8} {'x compiled':>10}")
    for task_name in args.tasks.split(","):
        for name in args.models.split(","):
            steps, compile_s, batch = variants(task_name, name)
            failed = {k: v for k, v in steps.items() if isinstance(v, str)}
            times = interleaved_times({k: v for k, v in steps.items() if k not in failed}, args.steps)
            med = {k: f"{statistics.median(v) * 1e3:.1f}" for k, v in times.items()} | dict.fromkeys(failed, "-")
            ratio = {k: f"{statistics.median(a / b for a, b in zip(times['eager'], times[k])):.2f}" if k in times
                     else "-" for k in ("fused", "compiled")}
            print(f"{task_name:<11} {name:<22} {batch:>5} {compile_s:>9.1f} {med['eager']:>9} {med['fused']:>9} "
                  f"{med['compiled']:>11} {ratio['fused']:>8} {ratio['compiled']:>10}", flush=True)
            for k, why in failed.items():
                print(f"  {k} failed: {why}", flush=True)


if __name__ == "__main__":
    main()
