"""Overhead of the sweep machinery: runs per minute for trivial runs, against calling train() in a loop.

A trivial run is a 1-layer, 16-wide transformer on a 6-symbol bijection, 2 training steps and 16
evaluation sequences, so the figure is the cost of the sweep itself: expanding and validating
configs, the manifest, skipping checks, the run folders, the tables (and for Ray, scheduling and
process start-up). The straightforward implementation is `train(config, folder)` for each
config in a plain loop (no manifest, no tables).

    python benchmarks/bench_sweep.py [--runs 24] [--ray]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from windtunnel.sweep import Execution, SweepConfig, expand, run_sweep
from windtunnel.train.trainer import train


def sweep_config(n: int) -> SweepConfig:
    return SweepConfig.build({
        "name": "bench", "profile": "quick",
        "overrides": ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1", "model_params.n_heads=2",
                      "model_params.d_model=16", "train.steps=2", "train.batch_size=4", "train.checkpoints=0",
                      "train.threads=1", "eval.n_sequences=16", "eval.batch_size=16", "eval.n_boot=10"],
        "grid": {"train.seed": list(range(n))},
        "experiments": [{"task": "bijection", "models": ["transformer"], "match_capacity": None}],
    })


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3, help="timings per variant; the median is printed")
    ap.add_argument("--ray", action="store_true", help="also time the Ray backend (a local instance)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    sweep = sweep_config(args.runs)
    runs = expand(sweep)
    quiet = Execution.quiet()
    n = args.runs
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train(runs[0].config, tmp / "warmup", progress=False)  # imports and first-call costs, paid once
        plain, local, skip = [], [], []
        for rep in range(args.repeats):
            plain.append(_timed(lambda rep=rep: [train(r.config, tmp / f"plain{rep}" / r.name, progress=False) for r in runs]))
            local.append(_timed(lambda rep=rep: run_sweep(sweep, tmp / f"local{rep}", quiet)))
            skip.append(_timed(lambda rep=rep: run_sweep(sweep, tmp / f"local{rep}", quiet)))
        p, lo, sk = (statistics.median(x) for x in (plain, local, skip))
        print(f"{n} trivial runs (2 steps each, 1 thread), median of {args.repeats}")
        print(f"  plain loop of train():      {p:6.2f} s  {60 * n / p:7.0f} runs/min")
        print(f"  sweep, local backend:       {lo:6.2f} s  {60 * n / lo:7.0f} runs/min "
              f"({lo / p:.2f}x the plain loop; {1000 * (lo - p) / n:+.1f} ms/run)")
        print(f"  sweep again, all skipped:   {sk:6.2f} s  ({1000 * sk / n:.1f} ms/run: expand, check, tables)")
        if args.ray:
            import ray

            cold = _timed(lambda: run_sweep(sweep, tmp / "ray-cold", quiet.but(backend="ray")))
            ray.init(include_dashboard=False, logging_level="warning", log_to_driver=False)
            warm = _timed(lambda: run_sweep(sweep, tmp / "ray-warm", quiet.but(backend="ray")))
            cpus = ray.cluster_resources().get("CPU", 0)
            ray.shutdown()
            print(f"  sweep, Ray, starting a local instance: {cold:6.2f} s  {60 * n / cold:7.0f} runs/min")
            print(f"  sweep, Ray, instance already up ({cpus:.0f} CPUs): {warm:6.2f} s  {60 * n / warm:7.0f} runs/min "
                  f"({1000 * (warm - p) / n:+.0f} ms/run against the plain loop)")


if __name__ == "__main__":
    main()
