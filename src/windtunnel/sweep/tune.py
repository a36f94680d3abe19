"""Tune a training setting of one architecture on one wind tunnel: successive halving over a grid.

One protocol for every architecture, the transformer included (``windtunnel tune``, and
``windtunnel scorecard`` for a model whose profile commits no value). The candidates are the
points of a grid (by default five log-spaced learning rates from 1e-4 to 1e-2, as zoology's
``np.logspace(-4, -2, 4)`` with one point more). Each candidate is the very run a sweep would
train with that setting (same content-hashed folder, same schedule, same data), so nothing is
thrown away:

1. every candidate trains to the first comparison point (10% of ``train.steps`` by default) and
   pauses with a resumable checkpoint; the held-out probe (``probe_*`` in ``metrics.jsonl``,
   sequences of the ``probe`` split, never the evaluation's) scores it there;
2. the best ``ceil(n / eta)`` resume to the next comparison point (30%), and so on; after the
   last one candidate is left;
3. the winner resumes to the end and is evaluated: it is the run the scorecard or sweep then
   reuses.

With the defaults (5 candidates, compared at 10% and 30%, eta 2) the search costs 5 x 0.1 + 3 x
0.2 + 0.7 = 1.8 runs' steps, the winner's own run included. ``full=True`` trains every candidate
to the end instead. A candidate whose loss turns non-finite counts as the worst. Every stage's
candidates run through the one job runner (:func:`~windtunnel.sweep.jobs.run_jobs`). The table of
every candidate at every point it reached is written as ``tune-<task>-<model>.json`` / ``.csv`` /
``.md`` (:mod:`~windtunnel.sweep.tune_files`) with the search's cautions (:func:`cautions`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, model_validator

from windtunnel.config import ConfigError, StrictConfig
from windtunnel.evaluate.record import METRICS, Evaluation, ScoredMetric
from windtunnel.interrupt import StopFlag, stop_on_signals
from windtunnel.lock import folder_lock
from windtunnel.sweep.config import Grid
from windtunnel.sweep.execution import Execution, legacy_execution
from windtunnel.sweep.expand import grid_points
from windtunnel.sweep.folders import reuse_runs
from windtunnel.sweep.jobs import Job, failures, run_jobs
from windtunnel.sweep.primitives import budget_execution, task_metric, tune_configs
from windtunnel.sweep.run import tokens_to
from windtunnel.sweep.tune_files import tune_name, write_tune
from windtunnel.train.config import RunConfig, apply_overrides
from windtunnel.train.rundir import RunDir

#: np.logspace(-4, -2, 5), to three significant digits
DEFAULT_LRS = [1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2]
#: candidates whose probes at the last comparison lie within this relative spread are called tied
PLATEAU_SPREAD = 0.02


class TuneSpec(StrictConfig):
    """What is searched and how candidates are compared."""

    grid: Grid = Field(default_factory=lambda: {"train.lr": list(DEFAULT_LRS)},
                       description="section.field -> candidate values (cartesian product)")
    compare_at: list[float] = Field(
        default_factory=lambda: [0.1, 0.3], validation_alias=AliasChoices("compare_at", "rungs"), serialization_alias="rungs",
        description="fractions of train.steps at which the candidates are compared (increasing, in (0, 1)); "
                    "written 'rungs' in tune-*.json, its name before ladder rungs had it")
    eta: float = Field(2.0, gt=1, le=100, description="keep ceil(n / eta) candidates at each comparison but the last, "
                                                      "which keeps one")
    metric: ScoredMetric = Field("kl_bayes_model", description="probe metric that ranks the candidates (ties: lower probe KL)")
    full: bool = Field(False, description="train every candidate to the end (no halving)")

    @model_validator(mode="after")
    def _check(self):
        r = self.compare_at
        if any(not 0 < f < 1 for f in r) or any(b <= a for a, b in zip(r, r[1:])):
            raise ValueError(f"compare_at = {r}: fractions of the run, increasing, each in (0, 1)")
        return self

    def to_json(self) -> dict[str, Any]:
        """As ``tune-*.json`` records it."""
        return self.model_dump(mode="json", by_alias=True)


class TuneRequest(StrictConfig):
    """One ``windtunnel tune`` call: ``models`` searched on ``task`` at the profile's own setting
    with its scorecard's budget, the ``overrides`` (``section.field=value`` text) applied to every
    candidate. A ``spec`` given as a mapping without ``metric`` ranks by the task's primitive
    metric (accuracy for recall, else KL)."""

    task: str
    models: list[str] = Field(min_length=1, description="architectures, each searched on its own, all in one pool")
    profile: str = "quick"
    overrides: list[str] = Field(default_factory=list, description="section.field=value for every candidate")
    spec: TuneSpec = Field(default_factory=TuneSpec)

    @model_validator(mode="before")
    @classmethod
    def _task_metric(cls, doc: Any) -> Any:
        if isinstance(doc, dict) and not isinstance(doc.get("spec", {}), TuneSpec) and "metric" not in doc.get("spec", {}):
            doc = {**doc, "spec": {**doc.get("spec", {}), "metric": task_metric(str(doc.get("task")))}}
        return doc

    @model_validator(mode="after")
    def _distinct(self):
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"models = {self.models}: each architecture once")
        return self

    def default_out(self) -> Path:
        """``runs/tune-<task>-<model>`` (``runs/tune-<task>`` for several models; ``-full`` without halving)."""
        if len(self.models) == 1:
            return Path("runs") / tune_name(self.task, self.models[0], self.spec.full)
        return Path("runs") / (f"tune-{self.task}" + ("-full" if self.spec.full else ""))


@dataclass
class Candidate:
    """One point of a search's grid and its run: its probe at each comparison it reached
    (``scores``: step -> value), its probe KL at the last one (the tie-break), and its status:
    ``running``, ``stopped at step N``, ``failed`` (with ``error``), ``finished`` or ``winner``
    (with ``eval``, its evaluation's headline numbers)."""

    point: dict[str, Any]
    config: RunConfig
    scores: dict[int, float | None] = field(default_factory=dict)
    status: str = "running"
    kl: float | None = None
    error: str | None = None
    eval: dict[str, float] | None = None

    @property
    def run(self) -> str:
        return self.config.run_name()

    def to_json(self) -> dict[str, Any]:
        """As ``tune-*.json`` records it."""
        doc = {"point": self.point, "run": self.run, "scores": self.scores, "status": self.status}
        if self.error is not None:
            doc["error"] = self.error
        doc["kl"] = self.kl
        if self.eval is not None:
            doc["eval"] = self.eval
        return doc


@dataclass
class TuneResult:
    task: str
    model: str
    metric: str
    rung_steps: list[int]  #: the steps at which candidates were compared, then the end
    candidates: list[dict[str, Any]]  #: each :class:`Candidate` as ``tune-*.json`` records it
    winner: dict[str, Any]
    seconds: float = 0.0
    cautions: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    together: int = 1  # searches run together (tune_many): ``seconds`` is then the wall time of them all

    @property
    def best(self) -> dict[str, Any]:
        """The winning grid point (``{"train.lr": 0.001}``)."""
        return dict(self.winner["point"])


def candidate_configs(base: RunConfig, grid: dict[str, list[Any]]) -> list[tuple[dict[str, Any], RunConfig]]:
    """(grid point, run config) for every point of ``grid`` applied to ``base``."""
    out = []
    for point in grid_points(grid):
        doc = apply_overrides(base.model_dump(mode="json"), list(point.items()))
        out.append((point, RunConfig.build(doc, where=f"tune candidate {point}")))
    return out


def rung_steps(config: RunConfig, fractions: list[float]) -> list[int]:
    """The steps at which candidates are compared: each fraction of ``train.steps`` snapped to the
    probe's grid (multiples of ``eval_every``, so that a run trained without pauses has its probe
    there too), at least one probe interval in and before the end; repeats dropped."""
    tc = config.train
    every = tc.eval_every or max(1, tc.steps // 10)
    steps = []
    for f in fractions:
        s = max(every, round(f * tc.steps / every) * every)
        if s < tc.steps and s not in steps:
            steps.append(s)
    return steps


def probe_at(run_dir: Path, step: int, metric: str) -> float | None:
    """The probe's ``metric`` logged at ``step`` (None when the run has no probe there)."""
    key = METRICS[metric].probe_key
    for row in reversed(RunDir(run_dir).metrics(step)):
        if row.get("step") == step and key in row:
            return float(row[key])
    return None


def train_to(config: dict[str, Any], run_dir: str, stop_at: int | None) -> None:
    """Train (or resume) one candidate to ``stop_at`` (None: to the end, then evaluate)."""
    from windtunnel.train.trainer import train

    train(RunConfig.build(config, where="run"), Path(run_dir), progress=False, stop_at=stop_at)


def _rank_key(metric: str, score: float | None, kl: float | None) -> tuple[float, float]:
    """Sort key, best first: a missing or non-finite score (a diverged run) ranks last."""
    def finite(v: float | None) -> float:
        return v if v is not None and math.isfinite(v) else math.inf

    if score is None or not math.isfinite(score):
        return math.inf, finite(kl)
    return (score if METRICS[metric].lower_is_better else -score), finite(kl)


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

    @property
    def done(self) -> bool:
        return self.i == len(self.stages)

    def work(self) -> list[Job]:
        """The alive candidates' training to this stage's step (the last stage: to the end)."""
        s, final = self.stages[self.i], self.i == len(self.stages) - 1
        self.log(f"tune {self.base.task} {self.base.model}: {len(self.alive)} candidate(s) to step {s}"
                 + (" (the end)" if final else ""))
        jobs = []
        for c in self.alive:
            tc = c.config.train
            cost = tokens_to(c.config.task, c.config.task_params, tc.batch_size, tc.steps if final else s)
            jobs.append(Job(c.run, train_to, (c.config.model_dump(mode="json"), str(self.out / c.run), None if final else s),
                            cost=cost))
        return jobs

    def advance(self, failed: dict[str, str]) -> None:
        """Read the probes of this stage, keep the best ``ceil(n / eta)`` (one after the last comparison)."""
        s, final, spec = self.stages[self.i], self.i == len(self.stages) - 1, self.spec
        for c in self.alive:
            if c.run in failed:
                c.status, c.error = "failed", failed[c.run]
            c.scores[s] = probe_at(self.out / c.run, s, spec.metric)
            c.kl = probe_at(self.out / c.run, s, "kl_bayes_model")
        alive = [c for c in self.alive if c.status != "failed"]
        if not alive:
            self.error = (f"tune {self.base.task} {self.base.model}: every candidate failed ("
                          + "; ".join(f"{c.point}: {c.error}" for c in self.candidates) + ")")
            self.i = len(self.stages)
            return
        alive.sort(key=lambda c: _rank_key(spec.metric, c.scores[s], c.kl))
        keep = len(alive) if final else 1 if self.i == len(self.steps_at) - 1 else math.ceil(len(alive) / spec.eta)
        for c in alive[keep:]:
            c.status = f"stopped at step {s}"
        self.alive, self.i = alive[:keep], self.i + 1

    def result(self, together: int = 1) -> TuneResult:
        """The winner, its evaluation, the cautions; writes the search's table files."""
        base, spec = self.base, self.spec
        for c in self.alive:
            c.status = "finished"
        winner = self.alive[0]
        winner.status = "winner"
        winner.eval = Evaluation(RunDir(self.out / winner.run).eval() or {}).headline()
        records = [c.to_json() for c in self.candidates]
        result = TuneResult(base.task, base.model, spec.metric, self.stages, records, winner.to_json(),
                            time.perf_counter() - self.t0, together=together)
        result.cautions = [*cautions(spec, self.candidates, result.best, self.steps_at),
                           *curriculum_cautions([c.config for c in self.candidates], self.steps_at)]
        result.files = write_tune(self.out, {
            "task": result.task, "model": result.model, "metric": result.metric, "spec": spec.to_json(),
            "rung_steps": result.rung_steps, "base": base.model_dump(mode="json"), "best": result.best,
            "winner": result.winner, "candidates": result.candidates, "seconds": result.seconds,
            "together": result.together, "cautions": result.cautions})
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
    execution = legacy_execution("tune_many", execution, legacy, ("jobs", "log")).local()
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
        for x in active:
            x.advance(failed)
    results = [x.result(len(state)) for x in state if x.error is None]
    errors = [x.error for x in state if x.error is not None]
    if errors:  # the other searches' tables are written
        raise ConfigError("; ".join(errors))
    return results


def tune(base: RunConfig, out: Path | str, spec: TuneSpec | None = None, execution: Execution | None = None,
         stop: StopFlag | None = None, **legacy: Any) -> TuneResult:
    """Successive halving of ``spec.grid`` around ``base`` (see the module doc); the runs live
    in ``out/<run name>``, the table in ``out/tune-<task>-<model>.*``. Finished and paused
    candidates are reused, so calling it again continues the search."""
    execution = legacy_execution("tune", execution, legacy, ("jobs", "log"))
    return tune_many([(base, out, spec)], execution, stop)[0]


def tune_in_folder(searches: list[tuple[RunConfig, TuneSpec | None]], out: Path | str,
                   execution: Execution) -> list[TuneResult]:
    """:func:`tune_many` of the searches ``(base, spec)``, all in ``out``, locked against a second
    writer (what ``windtunnel tune`` and the scorecard run). The candidates that a folder of
    ``execution.reuse`` holds, finished or paused, are copied in first
    (:func:`~windtunnel.sweep.folders.reuse_runs`)."""
    candidates = [c for base, spec in searches for _, c in candidate_configs(base, (spec or TuneSpec()).grid)]
    with folder_lock(Path(out), "sweep"), stop_on_signals() as stop:
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


def cautions(spec: TuneSpec, candidates: list[Candidate], best: dict[str, Any], steps_at: list[int]) -> list[str]:
    """What a reader of the search should check before trusting its winner:

    - **edge**: on a numeric axis with three or more values, the winner took the smallest or the
      largest, so the optimum may lie outside the grid (the next search should extend it that way);
    - **plateau**: at the last comparison before the end, the candidates still compared there had
      probes within ``PLATEAU_SPREAD`` (2%) of each other, so halving may have ranked noise (and
      stopped a candidate that would have left the plateau later): ``--full`` is the check.
    """
    out = []
    for key, values in spec.grid.items():
        nums = sorted({v for v in values if isinstance(v, int | float) and not isinstance(v, bool)})
        v = best.get(key)
        if len(nums) >= 3 and v in (nums[0], nums[-1]):
            side, step = ("upper", nums[-1] / nums[-2]) if v == nums[-1] else ("lower", nums[0] / nums[1])
            more = ",".join(f"{x:.3g}" for x in sorted(v * step ** i for i in range(3)))
            out.append(f"best {key} = {v:g} is the grid's {side} edge: the optimum may lie beyond it "
                       f"(search on: --grid {key}={more})")
    if steps_at:
        s = steps_at[-1]
        scores = [c.scores.get(s) for c in candidates if c.scores.get(s) is not None]
        finite = [x for x in scores if math.isfinite(x)]
        if len(finite) >= 2:
            lo, hi = min(finite), max(finite)
            spread = (hi - lo) / max(abs(lo), abs(hi), 1e-12)
            if spread < PLATEAU_SPREAD:
                out.append(f"the {len(finite)} candidates compared at step {s} were within {100 * spread:.1f}% "
                           f"of each other ({spec.metric} {lo:.4g} to {hi:.4g}): a plateau, where the ranking "
                           f"may be noise; train every candidate to the end (--full) before calling a result final")
    return out


def curriculum_cautions(configs: list[RunConfig], steps_at: list[int]) -> list[str]:
    """A candidate with a curriculum compared at a rung before its curriculum reaches the full
    task is scored on a task it has not trained on yet (the probes are at the full task)."""
    out = []
    for c in configs:
        cur = c.train.curriculum
        if cur is not None and steps_at and steps_at[0] < cur.until * c.train.steps:
            out.append(f"a candidate with train.curriculum ({cur.param} from {cur.start}) was compared at step "
                       f"{steps_at[0]}, before its curriculum reaches the full task (step "
                       f"{math.ceil(cur.until * c.train.steps)}): use --full, or --compare-at after {cur.until:g}")
            break
    return out
