"""What a full scorecard costs: every primitive and rung, tuning included, from measured step times.

    .venv/bin/python benchmarks/bench_scorecard_budget.py [MODEL] [--profile quick]
        [--steps 4] [--warmup 2] [--jobs N] [--validate TASK]

``windtunnel scorecard MODEL`` trains MODEL and the transformer at every rung of every tunnel and
first tunes each (task, model) whose profile commits no learning rate (successive halving: five
candidates to 10% of the run, three to 30%, the winner to the end). Running it for real takes an
hour or more of both cores, so this prices it from its parts, each measured on this machine with
the run's own thread count: per run of the scorecard's sweep (the configs ``windtunnel scorecard``
resolves, capacity-matched), the median of ``--steps`` training steps (after ``--warmup``), one
held-out probe and one full evaluation (``evaluate_run``, as at the end of a run). A run is
priced at steps x step + probes x probe + evaluation; a search at its candidates' steps and probes.

The wall time is then scheduled as the scorecard runs it on ``jobs`` workers: the searches first,
all at once, stage by stage (every search's candidates of a stage in one pool: ``tune_many``),
then the sweep's remaining runs, each pool starting its jobs in the order the scorecard does (by
tokens trained, largest first, each on the first free worker), every job with the measured
start-up of its fresh process.
``--validate TASK`` also trains the transformer's run of TASK for real (the whole run, timed)
to check the estimate against a measured run: pick a short one (``dirichlet``). Times are printed,
never asserted on; time it on idle cores.

The default MODEL is the 54-line example mixer (``my_mixer:EMAMixer``, from ``examples/``, which
this script puts on the path), a model of a user's that no profile commits a rate for.
"""

from __future__ import annotations

import argparse
import heapq
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from windtunnel.evaluate.evaluator import probe_metrics, sample_eval
from windtunnel.sweep.expand import expand
from windtunnel.sweep.run import cpu_cores, run_cost, tokens_to, unique_runs
from windtunnel.sweep.scorecard import PRIMITIVES, budget_jobs, scorecard_sweep
from windtunnel.sweep.tune import TuneSpec, rung_steps
from windtunnel.tasks import make_generator
from windtunnel.train.build import build
from windtunnel.train.config import load_profile
from windtunnel.train.trainer import check_loss, evaluate_run, make_optimizer, train, train_step


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def price(cfg, steps: int, warmup: int) -> dict[str, float]:
    """Seconds of one training step (median), one probe and one evaluation of ``cfg``'s run."""
    torch.set_num_threads(cfg.train.threads or cpu_cores())
    task, model = build(cfg)
    tc, cpu = cfg.train, torch.device("cpu")
    opt, gen, kind = make_optimizer(model, tc), make_generator(tc.seed, "train", cpu), check_loss(cfg.train.loss, task)
    step = [timed(lambda i=i: train_step(model, opt, task, gen, kind, i, tc, cpu, None)) for i in range(warmup + steps)]
    probe = sample_eval(task, tc.eval_probe_size, tc.seed, split="probe")
    return {"step": statistics.median(step[warmup:]), "probe": timed(lambda: probe_metrics(model, task, probe)),
            "eval": timed(lambda: evaluate_run(model, task, cfg))}


def run_seconds(cfg, p: dict[str, float]) -> float:
    tc = cfg.train
    return tc.steps * p["step"] + tc.steps // (tc.eval_every or max(1, tc.steps // 10)) * p["probe"] + p["eval"]


def search_stages(cfg, p: dict[str, float], overhead: float) -> list[list[tuple[float, int]]]:
    """Per stage of the default search on ``cfg``'s run, each candidate's leg as (seconds, the
    pool's sort key): its steps, probes and start-up (the winner's evaluation in its last leg);
    the key is :func:`~windtunnel.sweep.tune._work_cost`'s, the target step's tokens."""
    spec, tc = TuneSpec(), cfg.train
    every = tc.eval_every or max(1, tc.steps // 10)
    ends = [*rung_steps(cfg, spec.rungs), tc.steps]
    n, prev, stages = len(spec.grid["train.lr"]), 0, []
    for i, end in enumerate(ends):
        leg = (end - prev) * p["step"] + (end // every - prev // every) * p["probe"] + overhead
        leg += p["eval"] if i == len(ends) - 1 else 0
        stages.append([(leg, tokens_to(cfg.task, cfg.task_params, tc.batch_size, end))] * n)
        n, prev = (1 if i >= len(ends) - 2 else math.ceil(n / spec.eta)), end
    return stages


def schedule(jobs_: list[tuple[float, int]], workers: int) -> float:
    """Wall time of ``(seconds, key)`` jobs started in the order of their keys, largest first (as
    the scorecard's pools order them: tokens, not measured seconds), each on the first free worker."""
    free = [0.0] * workers
    for secs, _ in sorted(jobs_, key=lambda j: j[1], reverse=True):
        heapq.heappush(free, heapq.heappop(free) + secs)
    return max(free, default=0.0)


def startup_seconds() -> float:
    """What each job's fresh process costs before it trains: Python, torch and windtunnel's trainer."""
    return timed(lambda: subprocess.run([sys.executable, "-c", "import windtunnel.train.trainer"], check=True))


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))  # my_mixer
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default="my_mixer:EMAMixer")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--jobs", default=None)
    ap.add_argument("--validate", default=None, help="also train the transformer's run of this task for real")
    args = ap.parse_args()

    runs = unique_runs(expand(scorecard_sweep(args.model, args.profile)))
    jobs = budget_jobs(args.profile, args.jobs, [r.config for r in runs])
    tasks = [t for t, _ in PRIMITIVES.values()]
    overhead = statistics.median(startup_seconds() for _ in range(3))
    print(f"scorecard of {args.model} ({args.profile}): {len(runs)} runs on {jobs} worker(s), {cpu_cores()} core(s); "
          f"{overhead:.1f} s to start each job's process")
    print(f"{'run':44s} {'steps':>6s} {'ms/step':>8s} {'probe s':>8s} {'eval s':>7s} {'run s':>7s} {'search s':>9s}")
    rest, stages, total_core, priced = [], [], 0.0, {}
    for r in sorted(runs, key=lambda r: (tasks.index(r.config.task), r.experiment, r.config.model)):
        cfg = r.config
        p = priced[r.name] = price(cfg, args.steps, args.warmup)
        secs = run_seconds(cfg, p) + overhead
        searched = r.experiment == cfg.task and cfg.model not in load_profile(args.profile, cfg.task).get("tuned", {})
        legs = search_stages(cfg, p, overhead) if searched else []
        core = sum(sec for stage in legs for sec, _ in stage) if searched else secs
        total_core += core
        if searched:
            stages += [[] for _ in range(len(legs) - len(stages))]
            for k, leg in enumerate(legs):
                stages[k] += leg
        else:
            rest.append((secs, run_cost(r)))
        print(f"{r.name:44s} {cfg.train.steps:6d} {1e3 * p['step']:8.1f} {p['probe']:8.2f} {p['eval']:7.1f} "
              f"{secs:7.0f} {(f'{core:9.0f}' if searched else '        -')}")
    sweep_wall, tune_wall = schedule(rest, jobs), sum(schedule(legs, jobs) for legs in stages)
    print(f"\nsearches: {sum(sec for st in stages for sec, _ in st) / 60:.1f} core-min, {tune_wall / 60:.1f} min of "
          f"wall time (every search's candidates of a stage in one pool of {jobs}, largest first)")
    print(f"the other {len(rest)} runs: {sum(sec for sec, _ in rest) / 60:.1f} core-min, {sweep_wall / 60:.1f} min "
          f"on {jobs} worker(s)")
    print(f"whole scorecard: {total_core / 60:.1f} core-min; estimated wall time {(tune_wall + sweep_wall) / 60:.1f} min")

    if args.validate:
        run = next(r for r in runs if r.experiment == args.validate and r.config.model == "transformer")
        with tempfile.TemporaryDirectory() as tmp:
            real = timed(lambda: train(run.config, Path(tmp) / "run", progress=False))
        est = run_seconds(run.config, priced[run.name]) + overhead
        print(f"\nvalidation, {run.name} trained for real: {real:.0f} s against {est:.0f} s estimated "
              f"(ratio {real / est:.2f})")


if __name__ == "__main__":
    main()
