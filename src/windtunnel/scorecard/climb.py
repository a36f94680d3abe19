"""The scorecard's ladder search: each primitive's ladder climbed from the profile's own rung, up
while realised and down while not (:class:`Climb`), its sweep run a stage at a time
(:class:`Stages`, :func:`climb_ladders`). The runs are trained first by :func:`climb_ahead`: each
primitive climbs on its own, in one pool of workers, its next rung starting as soon as its last
is evaluated, so no worker waits for a stage's slowest run; the stages then find them trained."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windtunnel.config import Overrides
from windtunnel.engine.execution import Execution
from windtunnel.engine.folders import is_finished, reuse_runs
from windtunnel.engine.jobs import Job, Outcome, failures, run_jobs
from windtunnel.scorecard.document import chosen_primitives, ladder
from windtunnel.scorecard.request import ScorecardRequest
from windtunnel.sweep.config import SweepConfig
from windtunnel.sweep.expand import SweepRun
from windtunnel.sweep.manifest import unique_runs
from windtunnel.sweep.primitives import PRIMITIVES
from windtunnel.sweep.run import Stage, SweepError, SweepOutcome, run_sweep, summarise, training_jobs


@dataclass(frozen=True)
class Stages:
    """The scorecard's sweep, run a stage at a time: its config, folder and execution, the
    ``overrides`` of every run (its ``--set``), every run it plans (``plan``: each stage's manifest
    lists them all) and the runs a search has replaced since (``retired``: name -> why)."""

    sweep: SweepConfig
    folder: Path
    execution: Execution
    overrides: Overrides
    plan: list[SweepRun]
    retired: dict[str, str]

    def run(self, runs: list[SweepRun]) -> SweepOutcome:
        """One stage: ``runs``; a run that fails (its error in ``failed``) ends its primitive's
        ladder there, and the others go on."""
        try:
            return run_sweep(self.sweep, self.folder, self.execution, overrides=self.overrides,
                             stage=Stage(runs, self.plan, self.retired))
        except SweepError as exc:
            if exc.outcome is None:
                raise
            return exc.outcome


def climb_ladders(request: ScorecardRequest, stages: Stages) -> tuple[SweepOutcome, set[str], dict[str, str]]:
    """Run the scorecard's sweep: every rung at once (``full_ladder``), or each primitive's ladder
    searched from the profile's own rung, up while it is realised and down while it is not, a
    stage at a time (each a stage of the whole sweep, so the folder takes the scorecard run again);
    returns the last stage's outcome, the experiments it did not need, and the runs that failed
    (name -> error: each ends its primitive's ladder and is not tried again by a later stage)."""
    runs, sweep = stages.plan, stages.sweep
    experiments = {r.experiment for r in runs}
    if request.full_ladder or not request.rungs:
        outcome = stages.run(runs)
        return outcome, set(), dict(outcome.failed)
    failed = climb_ahead(request, stages)  # not tried again by a stage
    rules = sweep.primitives.rules
    steps = climbs(request, sweep)
    chosen = {rules[c.current].experiment for c in steps.values()}
    while True:
        outcome = stages.run([r for r in runs if r.experiment in chosen and r.name not in failed])
        failed.update(outcome.failed)
        cells = (outcome.summary.get("primitives") or {}).get(request.model, {})
        more = {rules[nxt].experiment for c in steps.values() if (nxt := c.next(cells.get(c.current))) is not None}
        if not more - chosen:
            return outcome, experiments - chosen, failed
        chosen |= more


def climbs(request: ScorecardRequest, sweep: SweepConfig) -> dict[str, Climb]:
    """Each chosen primitive's ladder search, at its own rung."""
    ladders = {prim: [rule for rule in sweep.primitives.rules if rule.partition("@")[0] == prim]
               for prim in chosen_primitives(request.profile, request.primitives)}
    return {prim: Climb(rung_order(request.profile, prim, names)) for prim, names in ladders.items()}


def climb_ahead(request: ScorecardRequest, stages: Stages) -> dict[str, str]:
    """Train the runs the ladder search will ask for, each primitive's climb on its own: its rung's
    runs start as soon as the rung before is evaluated (:func:`~windtunnel.engine.jobs.run_jobs`
    with ``more``), beside every other primitive's, on one pool of workers. The rungs and verdicts
    are the staged climb's (the same :class:`Climb`, the same cells), so its stages then find every
    run trained. A run that fails ends its primitive's climb, as in a stage; returns the failed runs
    (name -> error), which the stages do not try again."""
    sweep, folder, execution = stages.sweep, stages.folder, stages.execution
    rules, plan = sweep.primitives.rules, unique_runs(stages.plan)
    execution = execution.resolved(sweep.jobs, [r.config.train.threads for r in plan])
    if not execution.in_this_process(math.inf):  # a rung of one run still trains beside others: no bars
        execution = execution.but(progress=False)
    by_experiment: dict[str, list] = {}
    for run in stages.plan:
        by_experiment.setdefault(run.experiment, []).append(run)
    waiting: dict[str, set[str]] = {}  # primitive -> names of its current rung's runs not ended yet
    climbing = climbs(request, sweep)
    started: set[str] = set()
    ended: set[str] = set()

    def rung(prim: str) -> list[Job]:
        """The jobs of ``prim``'s current rung; where it has none left to train, its cell read at once."""
        experiment = rules[climbing[prim].current].experiment
        left = [r for r in unique_runs(by_experiment.get(experiment, []))
                if r.name not in ended and not is_finished(folder / r.name, r.config, sweep.decide_early)]
        todo = [r for r in left if r.name not in started]  # a run another rung has started is waited for
        started.update(r.name for r in todo)
        waiting[prim] = {r.name for r in left}
        if not left:
            return evaluated(prim)
        return training_jobs(todo, folder.resolve(), sweep, execution)

    def evaluated(prim: str) -> list[Job]:
        """``prim``'s current rung is trained: its next rung's jobs (none: its climb is over)."""
        experiment = rules[climbing[prim].current].experiment
        summary, _ = summarise(folder, sweep, by_experiment.get(experiment, []))
        cell = (summary.get("primitives") or {}).get(request.model, {}).get(climbing[prim].current)
        return rung(prim) if climbing[prim].next(cell) is not None else []

    def more(outcome: Outcome) -> list[Job]:
        ended.add(outcome.name)
        jobs = []
        for prim, names in waiting.items():
            if outcome.name in names:
                names.discard(outcome.name)
                if not names and outcome.status != "stopped":
                    jobs += evaluated(prim)
        return jobs

    with execution.workspace(folder, "sweep") as stop:
        reuse_runs([r.config for r in plan], folder, execution.reuse, execution.log, stop)
        first = [job for prim in climbing for job in rung(prim)]
        return failures(run_jobs(first, execution, stop, more)) if first else {}


def rung_order(profile: str, prim: str, names: list[str]) -> list[str]:
    """A primitive's rule names easiest rung first (the order of the profile's ladder)."""
    task = PRIMITIVES[prim][0]
    order = [name for name, _ in ladder(profile, task)]
    return sorted(names, key=lambda n: order.index(task if "@" not in n else f"{task}@{n.partition('@')[2]}"))


class Climb:
    """One primitive's ladder search over ``rules`` (easiest rung first; the profile's own rung is
    the one whose name has no ``@``): from the own rung, up while realised, down while not."""

    def __init__(self, rules: list[str]):
        self.rules = rules
        self.i = next(i for i, r in enumerate(rules) if "@" not in r)  # the profile's own rung
        self.step: int | None = None  # +1 climbing, -1 descending, None before the first verdict

    @property
    def current(self) -> str:
        return self.rules[self.i]

    def paths(self) -> list[list[str]]:
        """The two longest climbs from the own rung: up (realised at every rung) and down (at none)."""
        return [self.rules[self.i:], self.rules[self.i::-1]]

    def next(self, cell: dict[str, Any] | None) -> str | None:
        """The rung to score next after ``cell`` (the current rung's result), or None: done."""
        if cell is None:
            return None
        realised = cell.get("verdict") == "yes"
        step = self.step if self.step is not None else (1 if realised else -1)
        if (step == 1) != realised or not 0 <= self.i + step < len(self.rules):
            return None
        self.step, self.i = step, self.i + step
        return self.current
