"""What a full scorecard costs: every primitive and rung, tuning included, from measured step times.

    .venv/bin/python benchmarks/bench_scorecard_budget.py [MODEL] [--profile quick]
        [--steps 4] [--warmup 2] [--jobs N] [--validate TASK]
        [--record results/scorecard-cost/priced.json --concurrent "nothing else running"]

Running a scorecard for real takes most of an hour on 2 cores, so this prices it from its parts,
each measured on this machine with the run's own thread count: per run of the scorecard's sweep
(the configs ``windtunnel scorecard`` resolves, capacity-matched), the median of ``--steps``
training steps (after ``--warmup``), one held-out probe and one full evaluation. A run is priced
at steps x step + probes x probe + evaluation; a search at its candidates' legs; every job with the
measured start-up of its fresh process; the pools scheduled as the scorecard runs them (by tokens
trained, largest first, each on the first free worker).

These protocols are priced:

- **before**: MODEL and the transformer at every rung, each search the plain halving (five
  candidates to 10%, three to 30%, the winner to the end);
- **the default** (the scorecard's search: the three central rates, each trained to the end), and
  **the floor**: one rate per tunnel, no search (what any protocol that searches adds to);
- **now, at most**: MODEL alone (the transformer's results ship with the package), each search
  annealed (a cooldown branch of 0.2 x the step per candidate and comparison), and each ladder
  searched from the profile's own rung: priced on the longer of its two paths (up while realised,
  down while not), with no run stopped early and the plateau guard keeping all five candidates
  through the comparisons: an upper bound, since an early decision or a lower rung not needed
  only shortens it; each search priced with one finalist, and a line for what each further
  finalist (a rate within the spread at the last comparison) adds.

``--validate TASK`` also trains the transformer's run of TASK for real (the whole run, timed) to
check the estimate against a measured run: pick a short one (``dirichlet``). Times are printed,
never asserted on; time it on idle cores. The real scorecard's wall time, with ``/usr/bin/time``,
is the figure the docs give (docs/results/scorecard.md).

The default MODEL is the example mixer (``my_mixer:EMAMixer``, from ``examples/``, which this
script puts on the path), a model of a user's that no profile commits a rate for.
"""

from __future__ import annotations

import argparse
import heapq
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from windtunnel.engine.execution import cpu_cores
from windtunnel.engine.jobs import pool_order
from windtunnel.evaluate.evaluator import probe_metrics, sample_eval
from windtunnel.provenance import provenance
from windtunnel.scorecard.score import SCORECARD_LRS, Climb, ladder, scorecard_sweep
from windtunnel.sweep import Execution
from windtunnel.sweep.expand import expand
from windtunnel.sweep.manifest import unique_runs
from windtunnel.sweep.primitives import PRIMITIVES, budget_execution
from windtunnel.sweep.run import run_cost, tokens_to
from windtunnel.tasks import make_generator
from windtunnel.train.build import build
from windtunnel.train.config import load_profile
from windtunnel.train.trainer import StepSetup, check_loss, evaluate_run, make_optimizer, train, train_step
from windtunnel.tune.rules import keep_count
from windtunnel.tune.search import SEARCH, TuneSpec, rung_steps


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def price(cfg, steps: int, warmup: int) -> dict[str, float]:
    """Seconds of one training step (median), one probe and one evaluation of ``cfg``'s run."""
    torch.set_num_threads(cfg.train.threads or cpu_cores())
    task, model = build(cfg)
    tc, cpu = cfg.train, torch.device("cpu")
    setup = StepSetup(model, make_optimizer(model, tc), check_loss(cfg.train.loss, task), tc, cpu)
    gen = make_generator(tc.seed, "train", cpu)
    step = [timed(lambda i=i: train_step(setup, task, gen, i)) for i in range(warmup + steps)]
    probe = sample_eval(task, tc.eval_probe_size, tc.seed, split="probe")
    return {"step": statistics.median(step[warmup:]), "probe": timed(lambda: probe_metrics(model, task, probe)),
            "eval": timed(lambda: evaluate_run(model, task, cfg))}


def run_seconds(cfg, p: dict[str, float]) -> float:
    tc = cfg.train
    return tc.steps * p["step"] + tc.steps // (tc.eval_every or max(1, tc.steps // 10)) * p["probe"] + p["eval"]


def search_stages(cfg, p: dict[str, float], overhead: float, spec: TuneSpec, guard_holds: bool = False,
                  finalists: int = 1) -> list[list[tuple[float, int]]]:
    """Per stage of a search on ``cfg``'s run, each job's leg as (seconds, the pool's sort key):
    the candidates' training to the stage's step (the finalists' evaluations in their last leg), and
    at a comparison of an annealed search each candidate's cooldown branch; ``guard_holds``: every
    candidate kept through the comparisons (none left the plateau); ``finalists``: the candidates
    trained to the end after the last comparison (those within ``spec.finalists`` of the leader)."""
    tc = cfg.train
    every = tc.eval_every or max(1, tc.steps // 10)
    compare = [] if spec.full else rung_steps(cfg, spec.compare_at)
    ends = [*compare, tc.steps]
    n, prev, stages = len(spec.grid["train.lr"]), 0, []
    for i, end in enumerate(ends):
        leg = (end - prev) * p["step"] + (end // every - prev // every) * p["probe"] + overhead
        leg += p["eval"] if i == len(ends) - 1 else 0
        key = tokens_to(cfg.task, cfg.task_params, tc.batch_size, end)
        stages.append([(leg, key)] * n)
        if end in compare and spec.cooldown:
            cool = max(1, round(spec.cooldown * end))
            stages.append([(cool * p["step"] + p["probe"] + overhead, key // 10)] * n)
        last = i >= len(ends) - 2
        n, prev = (min(n, finalists) if last else n if guard_holds else keep_count(n, spec.eta, last=False)), end
    return stages


def ladder_paths(profile: str, model: str) -> dict[str, list[list[str]]]:
    """Per primitive, the experiments its ladder search runs on each of its two paths from the
    profile's own rung (up while realised, down while not)."""
    return {task: Climb([name for name, _ in ladder(profile, task)]).paths() for task, _ in PRIMITIVES.values()}


def schedule(jobs_: list[tuple[float, int]], workers: int) -> float:
    """Wall time of ``(seconds, key)`` jobs started in the order of their keys, largest first (as
    the scorecard's pools order them: tokens, not measured seconds), each on the first free worker."""
    free = [0.0] * workers
    for secs, _ in pool_order(jobs_, cost=lambda j: j[1]):
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
    ap.add_argument("--record", type=Path, help="write the summary lines as committed data (results/scorecard-cost/priced.json)")
    ap.add_argument("--concurrent", default="not stated", help="what else ran on the machine (for the record)")
    args = ap.parse_args()

    runs = unique_runs(expand(scorecard_sweep(args.model, args.profile)))
    jobs = budget_execution(args.profile, Execution(workers=args.jobs), [r.config for r in runs]).workers
    overhead = statistics.median(startup_seconds() for _ in range(3))
    tasks = [t for t, _ in PRIMITIVES.values()]
    summary: list[str] = []

    def say(line: str) -> None:
        print(line)
        summary.append(line.strip())

    say(f"scorecard of {args.model} ({args.profile}): {len(runs)} runs on {jobs} worker(s), {cpu_cores()} core(s); "
        f"{overhead:.1f} s to start each job's process")
    print(f"{'run':44s} {'steps':>6s} {'ms/step':>8s} {'probe s':>8s} {'eval s':>7s} {'run s':>7s}")
    priced, secs = {}, {}
    for r in sorted(runs, key=lambda r: (tasks.index(r.config.task), r.experiment, r.config.model)):
        cfg = r.config
        p = priced[r.name] = price(cfg, args.steps, args.warmup)
        secs[r.name] = run_seconds(cfg, p) + overhead
        print(f"{r.name:44s} {cfg.train.steps:6d} {1e3 * p['step']:8.1f} {p['probe']:8.2f} {p['eval']:7.1f} "
              f"{secs[r.name]:7.0f}")
    halving, annealed = TuneSpec(), TuneSpec(**SEARCH)
    default_search = TuneSpec(full=True, grid={"train.lr": list(SCORECARD_LRS)})

    def ladder_cost(mine: list) -> tuple[float, float]:
        """Core and wall seconds of the ladders' rungs beyond the own one, each on its longer path."""
        stage_jobs: list[list[tuple[float, int]]] = []
        for task, paths in ladder_paths(args.profile, args.model).items():
            by_exp = {r.experiment: r for r in mine if r.config.task == task}
            longest = max(paths, key=lambda path: sum(secs[by_exp[e].name] for e in path[1:] if e in by_exp))
            for k, exp in enumerate(longest[1:]):  # the own rung is the search's winner
                stage_jobs += [[] for _ in range(k + 1 - len(stage_jobs))]
                if exp in by_exp:
                    stage_jobs[k].append((secs[by_exp[exp].name], run_cost(by_exp[exp])))
        return sum(s for st in stage_jobs for s, _ in st), sum(schedule(st, jobs) for st in stage_jobs)

    def searched(r) -> bool:
        return r.experiment == r.config.task and r.config.model not in load_profile(args.profile, r.config.task).get("tuned", {})

    def price_protocol(which: list, spec: TuneSpec, guard: bool, finalists: int = 1) -> tuple[float, float]:
        stages, core = [], 0.0
        for r in which:
            if searched(r):
                legs = search_stages(r.config, priced[r.name], overhead, spec, guard, finalists)
                stages += [[] for _ in range(len(legs) - len(stages))]
                for k, leg in enumerate(legs):
                    stages[k] += leg
                core += sum(sec for leg in legs for sec, _ in leg)
        return core, sum(schedule(legs, jobs) for legs in stages)

    # before: both models at every rung, plain halving
    core, wall = price_protocol(runs, halving, False)
    rest = [(secs[r.name], run_cost(r)) for r in runs if not searched(r)]
    core += sum(s for s, _ in rest)
    wall += schedule(rest, jobs)
    say(f"\nbefore (both models, every rung, plain halving): {core / 60:.1f} core-min, {wall / 60:.1f} min on {jobs} workers")
    # now, at most: the model alone, annealed searches (guard holding throughout), each ladder's longer path, no early stop
    mine = [r for r in runs if r.config.model == args.model]
    for guard in (False, True):
        core, wall = price_protocol(mine, annealed, guard)
        core_l, wall_l = ladder_cost(mine)
        core, wall = core + core_l, wall + wall_l
        say(f"now, at most (the model alone, annealed searches{' with the guard holding' if guard else ''} and one "
            f"finalist each, each ladder's longer path, no early stop): {core / 60:.1f} core-min, {wall / 60:.1f} min "
            f"on {jobs} workers")
    # the scorecard's default: the three central rates, each trained to the end; the ladders' longer paths
    core, wall = price_protocol(mine, default_search, False, finalists=len(SCORECARD_LRS))
    core_l, wall_l = ladder_cost(mine)
    say(f"the default (the model alone, {len(SCORECARD_LRS)} rates each trained to the end, each ladder's longer path, "
        f"no early stop): {(core + core_l) / 60:.1f} core-min, {(wall + wall_l) / 60:.1f} min on {jobs} workers")
    # the floor of any protocol that searches: one rate per tunnel (no search), each ladder's longer path
    core, wall = price_protocol(mine, TuneSpec(full=True, grid={"train.lr": [SCORECARD_LRS[0]]}), False, finalists=1)
    say(f"the floor (the model alone, one rate per tunnel and no search, each ladder's longer path, no early stop): "
        f"{(core + core_l) / 60:.1f} core-min, {(wall + wall_l) / 60:.1f} min on {jobs} workers")
    # a wider spread at the last comparison: each further finalist is one more candidate trained on to the end
    one, _ = price_protocol(mine, annealed, False)
    two, _ = price_protocol(mine, annealed, False, finalists=2)
    say(f"each further finalist (a rate within {annealed.finalists:.0%} of the leader at the last comparison) in "
        f"every search: +{(two - one) / 60:.1f} core-min; how many a search has depends on its probes")

    if args.validate:
        run = next(r for r in runs if r.experiment == args.validate and r.config.model == "transformer")
        with tempfile.TemporaryDirectory() as tmp:
            real = timed(lambda: train(run.config, Path(tmp) / "run", progress=False))
        est = run_seconds(run.config, priced[run.name]) + overhead
        say(f"\nvalidation, {run.name} trained for real: {real:.0f} s against {est:.0f} s estimated "
            f"(ratio {real / est:.2f})")
    if args.record:
        command = shlex.join(["python", "benchmarks/bench_scorecard_budget.py", args.model, "--profile", args.profile,
                              "--steps", str(args.steps), "--warmup", str(args.warmup),
                              *(["--jobs", str(args.jobs)] if args.jobs else []),
                              *(["--validate", args.validate] if args.validate else [])])
        doc = {"title": f"What a full scorecard of {args.model} costs, priced from measured parts",
               "provenance": provenance(command, concurrent=args.concurrent,
                                        note=f"the command also prints each of the {len(runs)} runs' step, probe and "
                                             "evaluation times; only its summary lines are kept here"),
               "output": summary}
        args.record.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"recorded: {args.record}")


if __name__ == "__main__":
    main()
