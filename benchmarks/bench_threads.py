"""Training steps per second with OpenMP's default (busy-waiting) threads against
OMP_WAIT_POLICY=PASSIVE, each in a fresh process, interleaved so both see the same load.

The figure that matters is on a machine whose cores other processes also use (a test suite, a
second sweep, Ray workers packed on one node); on an idle machine the two should be close.

    python benchmarks/bench_threads.py [--threads 2] [--steps 80] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

POLICIES = {"default": None, "PASSIVE": "PASSIVE"}


def steps_per_second(policy: str | None, threads: int, steps: int, out: Path) -> float:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    cmd = [sys.executable, "-m", "windtunnel", "train", "--task", "bijection", "--model", "transformer", "--quiet",
           "--out", str(out), "--set", f"train.steps={steps}", "--set", f"train.threads={threads}",
           "--set", "train.checkpoints=0", "--set", "eval.n_sequences=64", "--set", "eval.n_boot=10"]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    skip = min(10, steps // 4)  # leave out the first steps (allocation, thread start)
    return (len(rows) - skip) / (rows[-1]["seconds"] - rows[skip - 1]["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"quick bijection transformer, {args.threads} threads, {args.steps} steps per run, "
          f"{os.cpu_count()} cores, load average {load:.1f} at the start")
    rates: dict[str, list[float]] = {k: [] for k in POLICIES}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for name, policy in POLICIES.items():
                rates[name].append(steps_per_second(policy, args.threads, args.steps, Path(tmp) / f"{name}-{i}"))
                print(f"  repeat {i}: {name:8s} {rates[name][-1]:7.2f} steps/s", flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"median steps/s: default {med['default']:.2f}, PASSIVE {med['PASSIVE']:.2f}; "
          f"PASSIVE / default = {med['PASSIVE'] / med['default']:.2f}x (load average now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
