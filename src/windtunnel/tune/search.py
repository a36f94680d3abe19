"""Tune a training setting of one architecture on one wind tunnel: successive halving over a grid.

One protocol for every architecture, the transformer included (``windtunnel tune``, and
``windtunnel scorecard`` for a model whose profile commits no value). The candidates are the
points of a grid (by default five log-spaced learning rates from 1e-4 to 1e-2), each the very run
a sweep would train with that setting (same content-hashed folder, schedule and data):

1. every candidate trains to the first comparison point (10% of ``train.steps`` by default) and
   pauses with a resumable checkpoint; the held-out probe (``probe_*`` in ``metrics.jsonl``,
   sequences of the ``probe`` split, never the evaluation's) scores it there;
2. the best ``ceil(n / eta)`` resume to the next comparison point (30%), and so on;
3. the one left resumes to the end and is evaluated: the run the scorecard or sweep then reuses.

``full=True`` trains every candidate to the end instead; a candidate whose loss turns non-finite
counts as the worst. Every stage runs through :func:`~windtunnel.engine.jobs.run_jobs`. The table
of every candidate at every point it reached is ``tune-<task>-<model>.json`` / ``.csv`` / ``.md``
(:mod:`~windtunnel.tune.outputs`), with the search's :func:`cautions`. Cost, score and
cautions: docs/sweeps.md, "Tuning: one protocol for every architecture".

What a search is asked to do is :mod:`~windtunnel.tune.settings` (:class:`TuneSpec`, the
settings a user chooses), a ``windtunnel tune`` call :mod:`~windtunnel.tune.request`, and its
candidates and result :mod:`~windtunnel.tune.candidates`; their names import from here too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from windtunnel.compat import legacy_execution
from windtunnel.config import ConfigError
from windtunnel.engine.execution import Execution
from windtunnel.engine.folders import reuse_runs
from windtunnel.engine.jobs import Job, failures, run_jobs
from windtunnel.evaluate.record import METRICS, Evaluation, primitive_score
from windtunnel.interrupt import StopFlag
from windtunnel.sweep.primitives import budget_execution, tune_configs
from windtunnel.sweep.run import tokens_to
from windtunnel.train.config import RunConfig
from windtunnel.train.decide import Decision, Race, decided
from windtunnel.train.rundir import RunDir
from windtunnel.tune.candidates import (  # noqa: F401  (the search's parts, read from here by callers)
    Candidate,
    TuneError,
    TuneResult,
    branch_config,
    candidate_configs,
    eval_of,
    reached,
    train_to,
)
from windtunnel.tune.outputs import tune_name, write_tune
from windtunnel.tune.request import TuneRequest
from windtunnel.tune.rules import (  # noqa: F401  (rung_steps, probe_at: read from here by callers)
    PLATEAU_SPREAD,
    Probe,
    cautions,
    compare,
    curriculum_cautions,
    last_probe,
    last_probe_step,
    probe_at,
    rank,
    rung_steps,
)
from windtunnel.tune.settings import DEFAULT_LRS, SEARCH, TuneSpec  # noqa: F401  (read from here by callers)


class _Search:
    """One search's state between its stages (comparison points, then the end), so that several
    searches can train each stage's candidates in one pool (:func:`tune_many`)."""

    def __init__(self, base: RunConfig, out: Path, spec: TuneSpec, log):
        self.base, self.out, self.spec, self.log = base, out, spec, log
        self.candidates = [Candidate(p, c) for p, c in candidate_configs(base, spec.grid)]
        self.steps_at = [] if spec.full else rung_steps(base, spec.compare_at)
        self.stages = [*self.steps_at, base.train.steps]
        self.alive, self.i, self.t0 = list(self.candidates), 0, time.perf_counter()
        self.error: str | None = None
        self.unsettled: list[Candidate] = []
        self.compared_at: int | None = None  #: the common step the finalists were ranked at (early decisions)
        self.decide = Decision(spec.metric) if spec.decide_early else None
        self._baseline: float | None = None
        #: the last stage's race (``decide_early``): a candidate pauses where a rival was decided first
        self.race = Race(out / f"{tune_name(base.task, base.model, spec.full)}.race.json") if self.decide else None

    @property
    def done(self) -> bool:
        return self.i == len(self.stages)

    @property
    def final(self) -> bool:
        return self.i == len(self.stages) - 1

    def baseline(self) -> float | None:
        """The best baseline's probe value of the metric: the zero of the probe score."""
        if self._baseline is None:
            from windtunnel.evaluate.evaluator import probe_baselines, sample_eval
            from windtunnel.tasks import make_task

            tc = self.base.train
            task = make_task(self.base.task, self.base.task_params)
            self._baseline = probe_baselines(task, sample_eval(task, tc.eval_probe_size, tc.seed, "probe")).get(
                METRICS[self.spec.metric].probe_key)
        return self._baseline

    def _job(self, config: RunConfig, run_dir: Path, stop_at: int | None, decide: Decision | None = None,
             race: Race | None = None) -> Job | None:
        """The job that trains ``run_dir`` to ``stop_at`` (None: the end), or None where it is there
        already (a search run again: no process is started to find that out), or paused where its
        ``race`` was won."""
        won = race.step() if race is not None else None  # a rival's decision: paused there or later, it is done
        if reached(run_dir, config, stop_at, decide) or won is not None and reached(run_dir, config, won, None):
            return None
        tc = config.train
        cost = tokens_to(config.task, config.task_params, tc.batch_size, stop_at or tc.steps)
        args = (config.model_dump(mode="json"), str(run_dir), stop_at, decide, str(race.path) if race else None)
        return Job(run_dir.name, train_to, args, cost=cost)

    def work(self) -> list[Job]:
        """The alive candidates' training to this stage's step (the last stage: to the end; under
        early decisions, in a race: each pauses where a rival was decided realised first, since the
        finalists are compared there)."""
        s = self.stages[self.i]
        race = self.race if self.final and self.race is not None and len(self.alive) > 1 else None
        if race is not None:
            self._start(race)
        self.log(f"tune {self.base.task} {self.base.model}: {len(self.alive)} candidate(s) to step {s}"
                 + (" (the end" + ("; each pauses where another is decided realised first)" if race else ")")
                    if self.final else ""))
        jobs = [self._job(c.config, self.out / c.run, None if self.final else s, self.decide if self.final else None,
                          race) for c in self.alive]
        return [j for j in jobs if j is not None]

    def _start(self, race: Race) -> None:
        """The race as the candidates' folders show it (an earlier call's decisions, reused runs)."""
        race.clear()
        for c in self.alive:
            ev = eval_of(self.out / c.run)
            if ev is not None and decided(ev, self.decide):
                race.record(ev["decided"]["step"], c.run)

    def finished(self, c: Candidate) -> bool:
        """``c``'s run is at its end, or decided."""
        return reached(self.out / c.run, c.config, None, self.decide)

    def cooldown(self, c: Candidate) -> tuple[RunConfig, Path, int]:
        """The annealed branch of candidate ``c`` at this comparison: its config, folder and end step."""
        config = branch_config(c.config, self.stages[self.i], self.spec.cooldown)
        return config, self.out / config.run_name(), config.train.cooldown.at + config.train.cooldown.steps

    def branches(self, failed: dict[str, str]) -> list[Job]:
        """At a comparison of an annealing search: each candidate's cooldown branch from this step,
        started from the candidate's paused state (or, where the candidate went past this step
        without keeping it, trained from the start: the same run, step for step)."""
        from windtunnel.train.checkpoint import CheckpointError
        from windtunnel.train.rundir import branch_run

        if self.final:
            return []
        s, jobs = self.stages[self.i], []
        for c in self.alive:
            if c.run in failed:
                continue
            try:
                if self.spec.keep_points:  # the paused run's state at the comparison, to branch from later
                    branch_run(self.out / c.run, s, c.config, self.point(c, s))
                if self.spec.cooldown:
                    config, where, end = self.cooldown(c)
                    branch_run(self.out / c.run, s, config, where)
            except CheckpointError:
                self.log(f"  {c.run}: no resumable checkpoint at step {s}; its branch trains from the start")
            if self.spec.cooldown:
                config, where, end = self.cooldown(c)
                jobs.append(self._job(config, where, end))
        return [j for j in jobs if j is not None]

    def point(self, c: Candidate, step: int) -> Path:
        """Where ``keep_points`` keeps candidate ``c``'s state at comparison ``step``."""
        return self.out / "points" / f"{c.run}-at{step}"

    def advance(self, failed: dict[str, str]) -> None:
        """Read this stage's probes (annealed ones where the search anneals) and keep the survivors
        (:func:`~windtunnel.tune.rules.compare`); at the end, rank the finishers."""
        s, spec = self.stages[self.i], self.spec
        for c in self.alive:
            if c.run in failed:
                c.status, c.error = "failed", failed[c.run]
            if self.final:  # the last probe: at the end, or where an early decision stopped the run
                done = c.status != "failed"
                c.scores[s] = last_probe(self.out / c.run, spec.metric) if done else probe_at(self.out / c.run, s, spec.metric)
                c.kl = last_probe(self.out / c.run, "kl_bayes_model") if done else probe_at(self.out / c.run, s, "kl_bayes_model")
                continue
            c.scores[s] = probe_at(self.out / c.run, s, spec.metric)
            c.kl = probe_at(self.out / c.run, s, "kl_bayes_model")
            if spec.cooldown and c.status != "failed":
                _, where, end = self.cooldown(c)
                c.annealed[s] = probe_at(where, end, spec.metric)
                c.kl = probe_at(where, end, "kl_bayes_model")
        alive = [c for c in self.alive if c.status != "failed"]
        if not alive:
            self.error = (f"tune {self.base.task} {self.base.model}: every candidate failed ("
                          + "; ".join(f"{c.point}: {c.error}" for c in self.candidates) + ")")
            self.i = len(self.stages)
            return
        value = (lambda c: c.annealed.get(s)) if spec.cooldown and not self.final else (lambda c: c.scores[s])
        if self.final:
            self.finish(self.rank_finalists(alive, s))
            return
        base = self.baseline() if spec.guard is not None else None
        for c in alive:
            v = value(c)
            if spec.guard is not None:
                c.probe_score[s] = None if v is None or base is None else primitive_score(spec.metric, v, base)
        verdict = compare([Probe(c, value(c), c.kl, c.probe_score.get(s)) for c in alive], spec,
                          last=self.i == len(self.steps_at) - 1)
        self.unsettled += verdict.unsettled
        for c in verdict.stopped:
            c.status = f"stopped at step {s}" + (" (unsettled)" if c in self.unsettled else "")
        self.alive, self.i = verdict.go_on, self.i + 1

    def finish(self, ranked: list[Candidate]) -> None:
        """The finalists ranked: the search is done, unless the race paused its winner, which then
        goes on to its end (the next call of :meth:`work`; alone, no longer racing)."""
        if self.race is None or len(ranked) < 2:
            self.alive, self.i = ranked, self.i + 1
            return
        first = self.race.step()
        for c in ranked:
            if not self.finished(c):
                c.status = f"paused at step {first}: another rate was decided realised there first"
        self.race.clear()
        if self.finished(ranked[0]):
            self.alive, self.i = ranked, self.i + 1
        else:  # the winner, paused by the race: trained on to its end
            self.log(f"tune {self.base.task} {self.base.model}: the winner {ranked[0].point} goes on from step {first}")
            ranked[0].status = "running"
            self.alive = ranked[:1]

    def rank_finalists(self, alive: list[Candidate], end: int) -> list[Candidate]:
        """The candidates trained to the end, best first. Where early decisions stopped some of them
        at different steps, all are compared at the earliest of those steps (``compared_at``), so
        that a rate is not preferred for having trained longer; else by their probes at the end."""
        metric = self.spec.metric
        stops = [last_probe_step(self.out / c.run, metric) for c in alive]
        common = min((t for t in stops if t is not None), default=end)
        if len(alive) < 2 or all(t in (None, common) for t in stops):
            if len(alive) > 1 and common < end:
                self.compared_at = common
            return rank([Probe(c, c.scores[end], c.kl) for c in alive], metric)
        self.compared_at = common
        return rank([Probe(c, probe_at(self.out / c.run, common, metric), probe_at(self.out / c.run, common, "kl_bayes_model"))
                     for c in alive], metric)

    def result(self, together: int = 1) -> TuneResult:
        """The winner, its evaluation, the cautions; writes the search's table files."""
        base, spec = self.base, self.spec
        for c in self.alive:
            if c.status == "running":
                c.status = "finished"
        winner = self.alive[0]
        winner.status = "winner"
        winner.eval = Evaluation(RunDir(self.out / winner.run).eval() or {}).headline()
        records = [c.to_json() for c in self.candidates]
        result = TuneResult(base.task, base.model, spec.metric, self.stages, records, winner.to_json(),
                            time.perf_counter() - self.t0, together=together,
                            unsettled=[c.point for c in self.unsettled])
        result.cautions = [*cautions(spec, self.candidates, result.best, self.steps_at),
                           *curriculum_cautions([c.config for c in self.candidates], self.steps_at)]
        if result.unsettled:
            result.cautions.append(
                f"every rate was still on the plateau at step {self.steps_at[-1]} (the leader's probe score below "
                f"{spec.guard:g}), so the stopped rates {', '.join(str(p) for p in result.unsettled)} could still turn "
                "the verdict: settle it by training them to the end (--settle, or windtunnel tune --full)")
        doc = {"task": result.task, "model": result.model, "metric": result.metric, "spec": spec.to_json(),
               "rung_steps": result.rung_steps, "base": base.model_dump(mode="json"), "best": result.best,
               "winner": result.winner, "candidates": result.candidates, "seconds": result.seconds,
               "together": result.together, "cautions": result.cautions}
        if result.unsettled:
            doc["unsettled"] = result.unsettled
        if self.compared_at is not None:
            doc["finalists_compared_at"] = self.compared_at
        result.files = write_tune(self.out, doc)
        self.log(f"tune {base.task} {base.model}: best {result.best} (probe {spec.metric} "
                 f"{winner.scores[base.train.steps]:.4g}) in {result.seconds:.0f} s"
                 + (f" (with {together - 1} other search(es) run together)" if together > 1 else ""))
        for c in result.cautions:
            self.log(f"  caution: {c}")
        return result


def tune_many(searches: list[tuple[RunConfig, Path | str, TuneSpec | None]], execution: Execution | None = None,
              stop: StopFlag | None = None, **legacy: Any) -> list[TuneResult]:
    """Several searches ``(base, out, spec)`` at once: each stage's candidates of every search
    train in one pool of ``execution.workers`` (longest first), so that no worker waits while one
    search's last candidate finishes; each search ranks and cuts its own candidates as
    :func:`tune` does, with the same runs and the same result. The candidates train on this
    machine (the search reads their probes from its folders as it goes)."""
    execution = legacy_execution("tune_many", execution, legacy, Execution).local()
    execution = execution.resolved(1, [base.train.threads for base, _, _ in searches])
    stop = stop or StopFlag()
    state = [_Search(base, Path(out), spec or TuneSpec(), execution.log) for base, out, spec in searches]
    seen: dict[Path, str] = {}
    for x in state:  # one run folder in two searches would be trained by two processes at once
        for c in x.candidates:
            where = (x.out / c.run).resolve()
            if where in seen:
                raise ConfigError(f"tune: the candidate {c.run} belongs to two searches run together "
                                  f"({seen[where]} and {x.base.task} {x.base.model}); run them one after the other")
            seen[where] = f"{x.base.task} {x.base.model}"
    while not all(x.done for x in state):
        active = [x for x in state if not x.done]
        failed = failures(run_jobs([job for x in active for job in x.work()], execution, stop))
        branches = [job for x in active for job in x.branches(failed)]
        if branches:
            failed.update(failures(run_jobs(branches, execution, stop)))
        for x in active:
            x.advance(failed)
    results = [x.result(len(state)) for x in state if x.error is None]
    errors = {(x.base.task, x.base.model): x.error for x in state if x.error is not None}
    if errors:  # the other searches' tables are written
        raise TuneError("; ".join(errors.values()), results, errors)
    return results


def tune(base: RunConfig, out: Path | str, spec: TuneSpec | None = None, execution: Execution | None = None,
         stop: StopFlag | None = None, **legacy: Any) -> TuneResult:
    """Successive halving of ``spec.grid`` around ``base`` (see the module doc); the runs live
    in ``out/<run name>``, the table in ``out/tune-<task>-<model>.*``. Finished and paused
    candidates are reused, so calling it again continues the search."""
    execution = legacy_execution("tune", execution, legacy, Execution)
    return tune_many([(base, out, spec)], execution, stop)[0]


def tune_in_folder(searches: list[tuple[RunConfig, TuneSpec | None]], out: Path | str,
                   execution: Execution) -> list[TuneResult]:
    """:func:`tune_many` of the searches ``(base, spec)``, all in ``out``, locked against a second
    writer (what ``windtunnel tune`` and the scorecard run). The candidates that a folder of
    ``execution.reuse`` holds, finished or paused, are copied in first
    (:func:`~windtunnel.engine.folders.reuse_runs`)."""
    candidates = []
    for base, spec in searches:  # every candidate and every cooldown branch its search could train
        spec = spec or TuneSpec()
        for _, c in candidate_configs(base, spec.grid):
            steps = rung_steps(base, spec.compare_at) if spec.cooldown and not spec.full else []
            candidates += [c, *(branch_config(c, s, spec.cooldown) for s in steps)]
    with execution.local().workspace(out, "sweep") as stop:
        reuse_runs(candidates, Path(out), execution.reuse, execution.log, stop)
        return tune_many([(base, out, spec) for base, spec in searches], execution, stop)


def run_tune(request: TuneRequest, out: Path | str | None = None, execution: Execution | None = None) -> list[TuneResult]:
    """``windtunnel tune``: a search per model of ``request`` (all in one pool of workers, the
    scorecard's budget unless ``execution`` gives ``workers``), in ``out`` (default:
    :meth:`TuneRequest.default_out`). Returns one :class:`TuneResult` per model."""
    from windtunnel.config import parse_overrides

    execution = (execution or Execution()).local()
    bases = tune_configs(request.task, request.models, request.profile, parse_overrides(request.overrides))
    out = Path(out) if out is not None else request.default_out()
    return tune_in_folder([(b, request.spec) for b in bases], out, budget_execution(request.profile, execution, bases))
