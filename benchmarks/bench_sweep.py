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
import tempfile
import time
from pathlib import Path

import torch

from windtunnel.sweep import SweepConfig, expand, run_sweep
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--ray", action="store_true", help="also time the Ray backend (a local instance)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    sweep = sweep_config(args.runs)
    quiet = dict(progress=False, log=lambda _: None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        for run in expand(sweep):
            train(run.config, tmp / "plain" / run.name, progress=False)
        plain = time.perf_counter() - t0

        t0 = time.perf_counter()
        run_sweep(sweep, tmp / "local", **quiet)
        local = time.perf_counter() - t0

        t0 = time.perf_counter()
        again = run_sweep(sweep, tmp / "local", **quiet)
        skip = time.perf_counter() - t0
        assert not again.trained

        print(f"{args.runs} trivial runs (2 steps each), 1 thread")
        print(f"  plain loop of train():      {plain:6.2f} s  {60 * args.runs / plain:7.0f} runs/min")
        print(f"  sweep, local backend:       {local:6.2f} s  {60 * args.runs / local:7.0f} runs/min "
              f"({local / plain:.2f}x the plain loop; overhead {1000 * (local - plain) / args.runs:+.0f} ms/run)")
        print(f"  sweep again, all skipped:   {skip:6.2f} s  ({1000 * skip / args.runs:.0f} ms/run: expand + check + tables)")
        if args.ray:
            t0 = time.perf_counter()
            run_sweep(sweep, tmp / "ray", backend="ray", **quiet)
            ray_s = time.perf_counter() - t0
            print(f"  sweep, Ray (local, start-up included): {ray_s:6.2f} s  {60 * args.runs / ray_s:7.0f} runs/min")


if __name__ == "__main__":
    main()
