"""Tune a training setting of one architecture on one wind tunnel: successive halving over a grid.

One protocol for every architecture, the transformer included (``windtunnel tune``, and
``windtunnel scorecard`` for a model whose profile commits no value). The candidates are the
points of a grid (by default five log-spaced learning rates from 1e-4 to 1e-2, as zoology's
``np.logspace(-4, -2, 4)`` with one point more). Each candidate is the very run a sweep would
train with that setting (same content-hashed folder, same schedule, same data), so nothing is
thrown away:

1. every candidate trains to the first rung (10% of ``train.steps`` by default) and pauses with a
   resumable checkpoint; the held-out probe (``probe_*`` in ``metrics.jsonl``, sequences of the
   ``probe`` split, never the evaluation's) scores it there;
2. the best ``ceil(n / eta)`` resume to the next rung (30%), and so on; after the last rung one
   candidate is left;
3. the winner resumes to the end and is evaluated: it is the run the scorecard or sweep then
   reuses.

With the defaults (5 candidates, rungs 10% and 30%, eta 2) the search costs 5 x 0.1 + 3 x 0.2 +
0.7 = 1.8 runs' steps, the winner's own run included. ``full=True`` trains every candidate to the
end instead (the reference the halving is checked against in docs/sweeps.md). A candidate whose
loss turns non-finite counts as the worst. The table of every candidate at every rung it
reached is written as ``tune-<task>-<model>.json`` / ``.csv`` / ``.md`` in the folder, with the
search's cautions (:func:`cautions`): a winner at the grid's edge, and candidates that were still
indistinguishable at the last comparison (a plateau, where halving ranks by noise).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from windtunnel.config import ConfigError, StrictConfig
from windtunnel.files import atomic_write_text, jsonable
from windtunnel.interrupt import StopFlag, stop_on_signals
from windtunnel.lock import folder_lock
from windtunnel.sweep.aggregate import LOWER_IS_BETTER, write_csv
from windtunnel.sweep.config import Grid
from windtunnel.sweep.expand import grid_points
from windtunnel.sweep.run import Job, in_processes, tokens_to
from windtunnel.tables import table
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
    rungs: list[float] = Field(
        default_factory=lambda: [0.1, 0.3],
        description="fractions of train.steps at which the candidates are compared (increasing, in (0, 1))")
    eta: float = Field(2.0, gt=1, le=100, description="keep ceil(n / eta) candidates at each rung but the last, which keeps one")
    metric: Literal["kl_bayes_model", "entropy_error", "accuracy"] = Field(
        "kl_bayes_model", description="probe metric that ranks the candidates (ties: lower probe KL)")
    full: bool = Field(False, description="train every candidate to the end (no halving)")

    @model_validator(mode="after")
    def _check(self):
        r = self.rungs
        if any(not 0 < f < 1 for f in r) or any(b <= a for a, b in zip(r, r[1:])):
            raise ValueError(f"rungs = {r}: fractions of the run, increasing, each in (0, 1)")
        return self


@dataclass
class TuneResult:
    task: str
    model: str
    metric: str
    rung_steps: list[int]
    candidates: list[dict[str, Any]]
    winner: dict[str, Any]
    seconds: float = 0.0
    cautions: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    together: int = 1  # searches run together (tune_many): ``seconds`` is then the wall time of them all

    @property
    def best(self) -> dict[str, Any]:
        """The winning grid point (``{"train.lr": 0.001}``)."""
        return dict(self.winner["point"])


def tune_name(task: str, model: str, full: bool = False) -> str:
    """``tune-<task>-<model>`` (``-full`` for a search without halving, so both can share a folder)."""
    return f"tune-{task}-{model.replace(':', '.')}" + ("-full" if full else "")


def candidate_configs(base: RunConfig, grid: dict[str, list[Any]]) -> list[tuple[dict[str, Any], RunConfig]]:
    """(grid point, run config) for every point of ``grid`` applied to ``base``."""
    out = []
    for point in grid_points(grid):
        doc = apply_overrides(base.model_dump(mode="json"), list(point.items()))
        out.append((point, RunConfig.build(doc, where=f"tune candidate {point}")))
    return out


def rung_steps(config: RunConfig, fractions: list[float]) -> list[int]:
    """The steps of the rungs: each fraction of ``train.steps`` snapped to the probe's grid
    (multiples of ``eval_every``, so that a run trained without pauses has its probe there too),
    at least one probe interval in and before the end; repeats dropped."""
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
    for row in reversed(RunDir(run_dir).metrics(step)):
        if row.get("step") == step and f"probe_{metric}" in row:
            return float(row[f"probe_{metric}"])
    return None


def train_to(config: dict[str, Any], run_dir: str, stop_at: int | None) -> None:
    """Train (or resume) one candidate to ``stop_at`` (None: to the end, then evaluate)."""
    from windtunnel.train.trainer import train

    train(RunConfig.build(config, where="run"), Path(run_dir), progress=False, stop_at=stop_at)


def _rank_key(metric: str, score: float | None, kl: float | None) -> tuple[float, float]:
    """Sort key, best first: a missing or non-finite score (a diverged run) ranks last."""
    def finite(v: float | None) -> float:
        return v if v is not None and math.isfinite(v) else math.inf

    primary = finite(score) if LOWER_IS_BETTER[metric] else -score if score is not None and math.isfinite(score) else math.inf
    return primary, finite(kl)


class _Search:
    """One search's state between its stages (rungs, then the end), so that several searches can
    train each stage's candidates in one pool (:func:`tune_many`)."""

    def __init__(self, base: RunConfig, out: Path, spec: TuneSpec, log: Callable[[str], None]):
        self.base, self.out, self.spec, self.log = base, out, spec, log
        self.rows = [{"point": p, "run": c.run_name(), "config": c, "scores": {}, "status": "running"}
                     for p, c in candidate_configs(base, spec.grid)]
        self.steps_at = [] if spec.full else rung_steps(base, spec.rungs)
        self.stages = [*self.steps_at, base.train.steps]
        self.alive, self.i, self.t0 = list(range(len(self.rows))), 0, time.perf_counter()
        self.error: str | None = None

    @property
    def done(self) -> bool:
        return self.i == len(self.stages)

    def work(self) -> list[Job]:
        """The alive candidates' training to this stage's step (the last stage: to the end)."""
        s, final = self.stages[self.i], self.i == len(self.stages) - 1
        self.log(f"tune {self.base.task} {self.base.model}: {len(self.alive)} candidate(s) to step {s}"
                 + (" (the end)" if final else ""))
        return [Job(self.rows[j]["run"], train_to, (self.rows[j]["config"].model_dump(mode="json"),
                                                    str(self.out / self.rows[j]["run"]), None if final else s))
                for j in self.alive]

    def advance(self, failed: dict[str, str]) -> None:
        """Read the probes of this stage, keep the best ``ceil(n / eta)`` (one after the last rung)."""
        rows, s, final, spec = self.rows, self.stages[self.i], self.i == len(self.stages) - 1, self.spec
        for j in self.alive:
            r = rows[j]
            if r["run"] in failed:
                r["status"], r["error"] = "failed", failed[r["run"]]
            r["scores"][s] = probe_at(self.out / r["run"], s, spec.metric)
            r["kl"] = probe_at(self.out / r["run"], s, "kl_bayes_model")
        alive = [j for j in self.alive if rows[j]["status"] != "failed"]
        if not alive:
            self.error = (f"tune {self.base.task} {self.base.model}: every candidate failed ("
                          + "; ".join(f"{r['point']}: {r.get('error')}" for r in rows) + ")")
            self.i = len(self.stages)
            return
        alive.sort(key=lambda j: _rank_key(spec.metric, rows[j]["scores"][s], rows[j]["kl"]))
        keep = len(alive) if final else 1 if self.i == len(self.steps_at) - 1 else math.ceil(len(alive) / spec.eta)
        for j in alive[keep:]:
            rows[j]["status"] = f"stopped at step {s}"
        self.alive, self.i = alive[:keep], self.i + 1

    def result(self, together: int = 1) -> TuneResult:
        """The winner, its evaluation, the cautions; writes the search's table files."""
        base, spec, rows = self.base, self.spec, self.rows
        for j in self.alive:
            rows[j]["status"] = "finished"
        winner = rows[self.alive[0]]
        winner["status"] = "winner"
        ev = RunDir(self.out / winner["run"]).eval() or {}
        main = ev.get("lengths", {}).get(str(ev.get("main_length")), {})
        winner["eval"] = {k: main[k]["value"] for k in ("kl_bayes_model", "entropy_error_mean_abs", "accuracy") if k in main}
        result = TuneResult(base.task, base.model, spec.metric, self.stages,
                            [{k: v for k, v in r.items() if k != "config"} for r in rows],
                            {k: v for k, v in winner.items() if k != "config"}, time.perf_counter() - self.t0,
                            together=together)
        result.cautions = [*cautions(spec, result.candidates, result.best, self.steps_at),
                           *curriculum_cautions([r["config"] for r in rows], self.steps_at)]
        result.files = write_tune(self.out, result, spec, base)
        self.log(f"tune {base.task} {base.model}: best {result.best} (probe {spec.metric} "
                 f"{winner['scores'][base.train.steps]:.4g}) in {result.seconds:.0f} s"
                 + (f" (with {together - 1} other search(es) run together)" if together > 1 else ""))
        for c in result.cautions:
            self.log(f"  caution: {c}")
        return result


def _work_cost(job: Job) -> int:
    """Tokens a stage's job trains on at most (to its target step): the pool starts the longest
    first, so that the last to finish are short."""
    config, _, stop_at = job.args
    tc = config["train"]
    return tokens_to(config["task"], config["task_params"], tc["batch_size"], stop_at or tc["steps"])


def tune_many(searches: list[tuple[RunConfig, Path | str, TuneSpec | None]], jobs: int = 1,
              log: Callable[[str], None] = print, stop: StopFlag | None = None) -> list[TuneResult]:
    """Several searches ``(base, out, spec)`` at once: each stage's candidates of every search
    train in one pool of ``jobs`` workers (longest first), so that no worker waits while one
    search's last candidate finishes; each search ranks and cuts its own candidates as
    :func:`tune` does, with the same runs and the same result."""
    stop = stop or StopFlag()
    state = [_Search(base, Path(out), spec or TuneSpec(), log) for base, out, spec in searches]
    seen: dict[Path, str] = {}
    for x in state:  # one run folder in two searches would be trained by two processes at once
        for r in x.rows:
            where = (x.out / r["run"]).resolve()
            if where in seen:
                raise ConfigError(f"tune: the candidate {r['run']} belongs to two searches run together "
                                  f"({seen[where]} and {x.base.task} {x.base.model}); run them one after the other")
            seen[where] = f"{x.base.task} {x.base.model}"
    while not all(x.done for x in state):
        active = [x for x in state if not x.done]
        work = sorted((job for x in active for job in x.work()), key=_work_cost, reverse=True)
        failed = in_processes(work, jobs, log, stop) if jobs > 1 else _in_this_process(work, log, stop)
        for x in active:
            x.advance(failed)
    results = [x.result(len(state)) for x in state if x.error is None]
    errors = [x.error for x in state if x.error is not None]
    if errors:  # the other searches' tables are written
        raise ConfigError("; ".join(errors))
    return results


def tune(base: RunConfig, out: Path | str, spec: TuneSpec | None = None, jobs: int = 1,
         log: Callable[[str], None] = print, stop: StopFlag | None = None) -> TuneResult:
    """Successive halving of ``spec.grid`` around ``base`` (see the module doc); the runs live
    in ``out/<run name>``, the table in ``out/tune-<task>-<model>.*``. Finished and paused
    candidates are reused, so calling it again continues the search."""
    return tune_many([(base, out, spec)], jobs, log, stop)[0]


def cautions(spec: TuneSpec, candidates: list[dict[str, Any]], best: dict[str, Any], steps_at: list[int]) -> list[str]:
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
        scores = [c["scores"].get(s) for c in candidates if c["scores"].get(s) is not None]
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
                       f"{math.ceil(cur.until * c.train.steps)}): use --full, or --rungs after {cur.until:g}")
            break
    return out


def _in_this_process(work: list[Job], log, stop: StopFlag) -> dict[str, str]:
    """Run the jobs one after another here; a run that fails (a non-finite loss) is reported."""
    from windtunnel.train.trainer import TrainingError

    failed = {}
    for job in work:
        stop.check()
        try:
            job.fn(*job.args)
        except TrainingError as exc:
            failed[job.name] = str(exc).splitlines()[0]
            log(f"  {job.name}: {failed[job.name]}")
    return failed


def tune_rows(result: TuneResult) -> list[dict[str, Any]]:
    """One flat row per candidate: the grid values, the probe at each rung it reached, its status."""
    rows = []
    for c in result.candidates:
        row: dict[str, Any] = {"task": result.task, "model": result.model, **c["point"], "run": c["run"]}
        for s in result.rung_steps:
            row[f"probe_{result.metric}@{s}"] = c["scores"].get(s)
        row["status"] = c["status"]
        rows.append(row)
    return rows


def write_tune(out: Path, result: TuneResult, spec: TuneSpec, base: RunConfig) -> dict[str, Path]:
    """``tune-<task>-<model>.json`` (the spec, the base config, every candidate), ``.csv`` and ``.md``."""
    stem = out / tune_name(result.task, result.model, spec.full)
    doc = {"task": result.task, "model": result.model, "metric": result.metric, "spec": spec.model_dump(mode="json"),
           "rung_steps": result.rung_steps, "base": base.model_dump(mode="json"), "best": result.best,
           "winner": result.winner, "candidates": result.candidates, "seconds": result.seconds,
           "together": result.together,
           "cautions": result.cautions}
    paths = {k: stem.parent / f"{stem.name}.{ext}" for k, ext in (("json", "json"), ("csv", "csv"), ("markdown", "md"))}
    atomic_write_text(paths["json"], json.dumps(jsonable(doc), indent=1, allow_nan=False))
    rows = tune_rows(result)
    write_csv(paths["csv"], rows)
    atomic_write_text(paths["markdown"], tune_markdown(doc))
    return paths


def tune_markdown(doc: dict[str, Any]) -> str:
    """The search table: a row per candidate, the probe at each rung, which one won."""
    steps = doc["rung_steps"]
    keys = list(doc["spec"]["grid"])
    head = [*keys, *[f"probe {doc['metric']} @ {s}" for s in steps], "status"]
    body = []
    for c in doc["candidates"]:
        scores = {int(k): v for k, v in c["scores"].items()}  # JSON keys are text
        body.append([*(f"{c['point'][k]:g}" if isinstance(c["point"][k], float) else str(c["point"][k]) for k in keys),
                     *("" if scores.get(s) is None else f"{scores[s]:.4f}" for s in steps), c["status"]])
    w = doc["winner"]
    lines = [f"### tune: {doc['model']} on {doc['task']}", "",
             ("Every candidate trained to the end" if doc["spec"].get("full") else "Successive halving")
             + f" over {', '.join(keys)}, scored by the held-out probe's {doc['metric']}; "
             f"best: {', '.join(f'{k} = {v}' for k, v in doc['best'].items())}"
             + (f" (its evaluation: KL {w['eval']['kl_bayes_model']:.4f} bits)" if "kl_bayes_model" in w.get("eval", {}) else "")
             + f"; {doc['seconds']:.0f} s"
             + (f" (the wall time of {doc['together']} searches run together)" if doc.get("together", 1) > 1 else "")
             + ".", "", *table(head, body)]
    lines += ["", *(f"- Caution: {c}" for c in doc.get("cautions", []))] if doc.get("cautions") else []
    return "\n".join(lines) + "\n"


def read_tunes(folder: Path) -> list[dict[str, Any]]:
    """Every ``tune-*.json`` in ``folder``, oldest first."""
    paths = sorted(Path(folder).glob("tune-*.json"), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in paths]


def tune_many_in_folder(searches: list[tuple[RunConfig, TuneSpec | None]], out: Path | str, jobs: int = 1,
                        log: Callable[[str], None] = print, reuse: list[Path] | tuple = ()) -> list[TuneResult]:
    """:func:`tune_many` of the searches ``(base, spec)``, all in ``out``, locked against a second
    writer (what ``windtunnel tune`` and the scorecard run). Every candidate's config is checked first; the candidates
    that a ``reuse`` folder holds, finished or paused, are copied in (:func:`~windtunnel.sweep.run.reuse_runs`)."""
    from windtunnel.sweep.run import check_reuse, reuse_runs

    check_reuse(reuse, out)
    candidates = [c for base, spec in searches for _, c in candidate_configs(base, (spec or TuneSpec()).grid)]
    with folder_lock(Path(out), "sweep"), stop_on_signals() as stop:
        reuse_runs(candidates, Path(out), reuse, log, stop)
        return tune_many([(base, out, spec) for base, spec in searches], jobs, log, stop)
