"""What tuning one architecture on one tunnel costs, against one run of it (the target: at most 2x).

`windtunnel tune`'s default search (five learning rates compared at 10% and 30% of the run, each
after a cooldown branch of 0.2 x the comparison step, the plateau guard and ties; the winner to
the end, and every rate within 15% of the leader at the last comparison with it) and the plain
successive halving of earlier versions, against the single run a search
produces and the straightforward cost it replaces (every candidate to the end, ``--full``). All
start from the same config (the quick profile with the scorecard's budget, one thread, the steps
cut to --steps so that it takes minutes) in fresh folders; the single run is the config at the
profile's learning rate, trained and evaluated. Printed: wall seconds of each, the ratio, and the
optimizer steps trained (cooldown branches included) against those of one run. The guard keeps
every candidate while none has left the plateau, so a search on a tunnel the model cannot learn
costs more: the table says how many candidates each comparison kept.

    python benchmarks/bench_tune.py [--task bijection] [--model transformer] [--steps 300] [--full]
        [--record results/tuning/search-cost.json --concurrent "nothing else running"]

``--record`` writes the table as committed data with its provenance (docs/results/tuning.md shows it);
time it on idle cores and say in ``--concurrent`` what else ran.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from windtunnel.provenance import provenance
from windtunnel.sweep import Execution
from windtunnel.sweep.primitives import task_metric, tune_configs
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import train
from windtunnel.tune.search import SEARCH, TuneSpec, tune


def trained_steps(run_dir: Path) -> int:
    """Optimizer steps trained in a run folder (a cooldown branch from its branch point on)."""
    run = RunDir(run_dir)
    rows = run.metrics()
    cool = run.config.train.cooldown
    return (rows[-1]["step"] - (cool.at if cool else 0)) if rows else 0


def kept_at(result) -> list[int]:
    """How many candidates a search (a TuneResult) scored at each comparison and at the end."""
    return [sum(1 for c in result.candidates if step in c["scores"]) for step in result.rung_steps]


def record(path: Path, args: argparse.Namespace, rows: list[tuple[str, float, int]]) -> None:
    """The measured table as committed data: each search's wall time and optimiser steps against one run's."""
    single_wall, single_steps = rows[0][1], rows[0][2]
    command = f"python benchmarks/bench_tune.py --task {args.task} --model {args.model} --steps {args.steps}"
    default = rows[1]
    doc = {"title": f"What a search costs against one run ({args.task} / {args.model}, quick profile cut to "
                    f"{args.steps} steps, one thread, fresh folders): the default search "
                    f"{default[1] / single_wall:.2f}x one run in wall time, {default[2] / single_steps:.2f}x in "
                    "optimiser steps",
           "provenance": provenance(command + (" --full" if args.full else ""), concurrent=args.concurrent),
           "columns": [{"key": k, "label": label} for k, label in (
               ("what", "what"), ("wall_time_s", "wall time (s)"), ("wall_runs", "x one run (wall)"),
               ("optimiser_steps", "optimiser steps"), ("steps_runs", "x one run (steps)"))],
           "rows": [{"what": name, "wall_time_s": round(wall), "wall_runs": round(wall / single_wall, 2),
                     "optimiser_steps": steps, "steps_runs": round(steps / single_steps, 2)}
                    for name, wall, steps in rows]}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="bijection")
    ap.add_argument("--model", default="transformer")
    ap.add_argument("--steps", type=int, default=300, help="steps of each run (the quick profile's are 800-1500)")
    ap.add_argument("--full", action="store_true", help="also time the search without halving (every candidate to the end)")
    ap.add_argument("--record", type=Path, help="write the table as committed data (e.g. results/tuning/search-cost.json)")
    ap.add_argument("--concurrent", default="not stated", help="what else ran on the machine (for the record)")
    args, _ = ap.parse_known_args()
    torch.set_num_threads(1)
    config = tune_configs(args.task, [args.model], "quick", {"train.steps": args.steps, "train.threads": 1})[0]
    halving = TuneSpec(metric=task_metric(args.task))
    searches = [(f"the default search (annealed, the plateau guard, finalists within {SEARCH['finalists']:.0%})",
                 halving.replace(**SEARCH)),
                ("plain successive halving (--halving)", halving),
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
            rows.append((f"{name}: best lr {res.best['train.lr']:g}, candidates at each comparison and the end "
                         f"{kept_at(res)}",
                         wall, steps))
    print(f"\n{args.task} / {args.model}, quick profile at {args.steps} steps, 1 thread, one run at a time\n")
    print("| | wall s | x one run | optimizer steps | x one run |")
    print("|---|---|---|---|---|")
    for name, wall, steps in rows:
        print(f"| {name} | {wall:.0f} | {wall / single:.2f} | {steps} | {steps / args.steps:.2f} |")
    if args.record:
        record(args.record, args, rows)
        print(f"\nrecorded: {args.record}")


if __name__ == "__main__":
    main()
