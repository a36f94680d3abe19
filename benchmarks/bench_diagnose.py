"""Wall time of ``windtunnel diagnose`` (``run_diagnostics``) on a quick-profile run, per analysis.

    python benchmarks/bench_diagnose.py [--run runs/bench-diagnose-bijection] [--task bijection]
                                        [--model transformer] [--threads 2] [--n-sequences 256] [--repeat 1]

Trains the quick-profile run into ``--run`` first unless a finished run is already there (on 2
CPU cores the quick bijection transformer takes a few minutes), then times the whole diagnosis
and each analysis (the capture of activations, shared by the analyses, is timed on its own).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from windtunnel.geometry import run_diagnostics
from windtunnel.train.config import resolve_run
from windtunnel.train.trainer import train


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default=None, help="run directory (default runs/bench-diagnose-<task>-<model>)")
    ap.add_argument("--task", default="bijection")
    ap.add_argument("--model", default="transformer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-sequences", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=1)
    args, _ = ap.parse_known_args()  # run_all.py passes every bench the same arguments
    torch.set_num_threads(args.threads)
    run = Path(args.run or f"runs/bench-diagnose-{args.task}-{args.model}")
    if not (run / "eval.json").is_file():
        cfg = resolve_run(args.task, args.model, "quick", {"train.threads": args.threads})
        t0 = time.perf_counter()
        res = train(cfg, run, progress=True)
        print(f"trained {cfg.run_name()} ({res.n_params:,} parameters, {res.steps} steps) in "
              f"{time.perf_counter() - t0:.0f} s -> {run}")
    else:
        print(f"reusing {run}")
    for i in range(args.repeat):
        t0 = time.perf_counter()
        doc = run_diagnostics(run, n_sequences=args.n_sequences, progress=False)
        wall = time.perf_counter() - t0
        print(f"\nrun {i + 1}: run_diagnostics {wall:.1f} s on {args.threads} thread(s), "
              f"{doc['probe']['n_sequences']} probe sequences, {len(doc['checkpoints'])} checkpoints")
        for name, s in doc["seconds"].items():
            if name != "total":
                print(f"  {name:16s} {s:7.2f} s")
        print(f"  {'total':16s} {doc['seconds']['total']:7.2f} s")
        print("  skipped: " + (", ".join(doc["skipped"]) or "none"))
    print(json.dumps({"bench": "diagnose", "task": args.task, "model": args.model, "threads": args.threads,
                      "seconds": doc["seconds"]}))


if __name__ == "__main__":
    main()
