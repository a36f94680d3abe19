"""What tuning one architecture on one tunnel costs, against one run of it (the target: at most 2x).

`windtunnel tune`'s default search (five learning rates, successive halving at 10% and 30% of the
run, the winner to the end) against the straightforward cost it replaces and the single run it
produces. Both start from the same config (the quick profile with the scorecard's budget, one
thread, the steps cut to --steps so that it takes minutes) in fresh folders; the single run is the
config at the profile's learning rate, trained and evaluated. Printed: wall seconds of each, the
ratio, and the optimizer steps the search trained against those of one run (1.8 by design; the
rest of the ratio is the pilots' probe checks, checkpoints and evaluation).

    python benchmarks/bench_tune.py [--task bijection] [--model transformer] [--steps 300] [--full]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from windtunnel.sweep.scorecard import task_metric, tune_configs
from windtunnel.sweep.tune import TuneSpec, tune
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import train


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="bijection")
    ap.add_argument("--model", default="transformer")
    ap.add_argument("--steps", type=int, default=300, help="steps of each run (the quick profile's are 800-1500)")
    ap.add_argument("--full", action="store_true", help="also time the search without halving (every candidate to the end)")
    args, _ = ap.parse_known_args()
    torch.set_num_threads(1)
    config = tune_configs(args.task, [args.model], "quick", {"train.steps": args.steps, "train.threads": 1})[0]
    spec = TuneSpec(metric=task_metric(args.task))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        train(config, tmp / "single", progress=False)
        single = time.perf_counter() - t0
        rows = [("one run (the profile's lr)", single, args.steps)]
        for name, s in [("successive halving (default)", spec), *([("every candidate to the end", spec.replace(full=True))]
                                                                   if args.full else [])]:
            out = tmp / name.split()[0]
            t0 = time.perf_counter()
            res = tune(config, out, s, log=lambda _: None)
            wall = time.perf_counter() - t0
            steps = sum(max(r["step"] for r in RunDir(out / c["run"]).metrics()) for c in res.candidates)
            rows.append((f"{name}: best lr {res.best['train.lr']:g}", wall, steps))
    print(f"\n{args.task} / {args.model}, quick profile at {args.steps} steps, 1 thread, one run at a time\n")
    print("| | wall s | x one run | optimizer steps | x one run |")
    print("|---|---|---|---|---|")
    for name, wall, steps in rows:
        print(f"| {name} | {wall:.0f} | {wall / single:.2f} | {steps} | {steps / args.steps:.2f} |")


if __name__ == "__main__":
    main()
