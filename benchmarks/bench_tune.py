"""What tuning one architecture on one tunnel costs, against one run of it (the target: at most 2x).

`windtunnel tune`'s default search (five learning rates compared at 10% and 30% of the run, each
after a cooldown branch of 0.2 x the comparison step, the plateau guard and ties; the winner to
the end) and the plain successive halving of earlier versions, against the single run a search
produces and the straightforward cost it replaces (every candidate to the end, ``--full``). All
start from the same config (the quick profile with the scorecard's budget, one thread, the steps
cut to --steps so that it takes minutes) in fresh folders; the single run is the config at the
profile's learning rate, trained and evaluated. Printed: wall seconds of each, the ratio, and the
optimizer steps trained (cooldown branches included) against those of one run. The guard keeps
every candidate while none has left the plateau, so a search on a tunnel the model cannot learn
costs more: the table says how many candidates each comparison kept.

    python benchmarks/bench_tune.py [--task bijection] [--model transformer] [--steps 300] [--full]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from windtunnel.sweep import Execution
from windtunnel.sweep.primitives import task_metric, tune_configs
from windtunnel.sweep.tune import SEARCH, TuneSpec, tune
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import train


def trained_steps(run_dir: Path) -> int:
    """Optimizer steps trained in a run folder (a cooldown branch from its branch point on)."""
    run = RunDir(run_dir)
    rows = run.metrics()
    cool = run.config.train.cooldown
    return (rows[-1]["step"] - (cool.at if cool else 0)) if rows else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="bijection")
    ap.add_argument("--model", default="transformer")
    ap.add_argument("--steps", type=int, default=300, help="steps of each run (the quick profile's are 800-1500)")
    ap.add_argument("--full", action="store_true", help="also time the search without halving (every candidate to the end)")
    args, _ = ap.parse_known_args()
    torch.set_num_threads(1)
    config = tune_configs(args.task, [args.model], "quick", {"train.steps": args.steps, "train.threads": 1})[0]
    halving = TuneSpec(metric=task_metric(args.task))
    searches = [("annealed search with the plateau guard (default)", halving.replace(**SEARCH)),
                ("plain successive halving (before)", halving),
                *([("every candidate to the end", halving.replace(full=True))] if args.full else [])]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        train(config, tmp / "single", progress=False)
        single = time.perf_counter() - t0
        rows = [("one run (the profile's lr)", single, args.steps)]
        for i, (name, s) in enumerate(searches):
            out = tmp / f"search{i}"
            t0 = time.perf_counter()
            res = tune(config, out, s, Execution.quiet(workers=1))
            wall = time.perf_counter() - t0
            steps = sum(trained_steps(d) for d in out.iterdir() if (d / "config.json").is_file())
            kept = [sum(1 for c in res.candidates if str(s) in c["scores"]) for s in res.rung_steps[:-1]]
            rows.append((f"{name}: best lr {res.best['train.lr']:g}, kept {kept}", wall, steps))
    print(f"\n{args.task} / {args.model}, quick profile at {args.steps} steps, 1 thread, one run at a time\n")
    print("| | wall s | x one run | optimizer steps | x one run |")
    print("|---|---|---|---|---|")
    for name, wall, steps in rows:
        print(f"| {name} | {wall:.0f} | {wall / single:.2f} | {steps} | {steps / args.steps:.2f} |")


if __name__ == "__main__":
    main()
