"""The primitive scorecard of one architecture: a small sweep, scored against exact posteriors.

``windtunnel scorecard MODEL`` trains MODEL (a registered name or a user's
``package.module:Class``) and the reference transformer on the three primitive tunnels of Paper I
(bijection: accumulation; HMM: transport; recall: binding) plus in-context regression
(continuous beliefs), SULA, Kalman filtering (continuous transport), Dirichlet-categorical
counting and change-points (revision), each capacity-matched to the transformer and scored at
every rung of its difficulty ladder, with the budget of
``paper1-quick`` (the quick profiles) or the paper's (``--profile paper``). It is an ordinary
sweep (run folders, resume, the Ray backend, tables, ``windtunnel report``): this module builds
its config (:func:`scorecard_sweep`), tunes what the profile commits no rate for
(:func:`tune_scorecard`), runs it (:func:`run_scorecard`, what the command calls) and reads its
primitives into ``scorecard.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from windtunnel.config import ConfigError, Overrides, as_overrides
from windtunnel.files import atomic_write_text, jsonable
from windtunnel.sweep.config import SweepConfig, _WithOverrides, load_sweep
from windtunnel.sweep.execution import Execution, check_reuse
from windtunnel.sweep.expand import expand
from windtunnel.sweep.folders import default_out
from windtunnel.sweep.markdown import highest_realised
from windtunnel.sweep.primitives import BUDGET, PRIMITIVES, REFERENCE, budget_execution, tune_configs
from windtunnel.sweep.run import SweepOutcome, run_sweep
from windtunnel.sweep.tune import TuneSpec, tune_in_folder
from windtunnel.sweep.tune_files import tune_name
from windtunnel.train.config import load_profile, profile_tasks, tuned_train

SCORECARD_FILE = "scorecard.json"


def rung_label(task: str, rung: dict[str, Any]) -> str:
    """The experiment name of a rung: ``hmm@S2_O2``."""
    return f"{task}@" + "_".join(f"{k}{v}" for k, v in rung.items())


def ladder(profile: str, task: str) -> list[tuple[str, dict[str, Any]]]:
    """(experiment name, task_params overrides) of each rung of ``task`` in ``profile``, easiest
    first (the profile's ``rungs``). The rung that is the profile's own setting keeps the plain task
    name (its runs are those of ``paper1-quick``); a profile without rungs has that one alone."""
    prof = load_profile(profile, task)
    own = prof.get("task_params", {})
    out = []
    for rung in prof.get("rungs", []):
        is_own = all(own.get(k) == v for k, v in rung.items())
        out.append((task, {}) if is_own else (rung_label(task, rung), dict(rung)))
    return out if (task, {}) in out else [*out, (task, {})]


def chosen_primitives(profile: str, primitives: list[str] | None) -> list[str]:
    """``primitives`` checked against the profile (None: every primitive whose tunnel it has)."""
    have = profile_tasks(profile)
    chosen = [p for p, (task, _) in PRIMITIVES.items() if task in have] if primitives is None else primitives
    unknown = [p for p in chosen if p not in PRIMITIVES]
    if unknown or not chosen:
        raise ConfigError(f"primitives {unknown or chosen}: choose from {', '.join(PRIMITIVES)}")
    lacking = [PRIMITIVES[p][0] for p in chosen if PRIMITIVES[p][0] not in have]
    if lacking:
        raise ConfigError(f"profile '{profile}' has no config for task(s) {', '.join(lacking)}; it has: {', '.join(have)}")
    return chosen


def scorecard_models(model: str) -> list[str]:
    return [REFERENCE] if model == REFERENCE else [REFERENCE, model]


class ScorecardRequest(_WithOverrides):
    """One scorecard: ``model`` (a registered architecture or a user's ``package.module:Class``)
    beside the reference transformer, at the ``profile``'s budget, with ``seeds`` seeds, on the
    chosen ``primitives`` (None: every one the profile has a tunnel for), at every rung of their
    ladders (``rungs``), each model's learning rate searched where the profile commits none
    (``tune``); ``overrides`` (``section.field=value`` text, as on the command line) apply to every run."""

    model: str = Field(min_length=1)
    profile: str = "quick"
    seeds: int = Field(1, ge=1, le=100, description="seeds 0..N-1 per run")
    primitives: list[str] | None = None
    rungs: bool = Field(True, description="every rung of each tunnel's difficulty ladder, or the profile's own setting alone")
    tune: bool = Field(True, description="search the learning rate of every model the profile commits none for")
    overrides: list[str] = Field(default_factory=list, description="section.field=value for every run")

    @model_validator(mode="after")
    def _check(self):
        chosen_primitives(self.profile, self.primitives)
        if self.tune and any(k == "train.lr" for k, _ in self.override_pairs):
            raise ValueError("--set train.lr=... fixes the learning rate that the scorecard would tune; add --no-tune")
        return self

    def sweep(self, tuned: dict[str, dict[str, dict[str, Any]]] | None = None) -> SweepConfig:
        """The sweep behind it (:func:`scorecard_sweep`)."""
        return scorecard_sweep(self.model, self.profile, self.seeds, self.primitives, self.rungs, tuned)


@dataclass
class ScorecardOutcome:
    """What :func:`run_scorecard` did: the sweep's outcome and ``scorecard.json``."""

    sweep: SweepOutcome
    doc: dict[str, Any]

    @property
    def out(self) -> Path:
        return self.sweep.out


def run_scorecard(request: ScorecardRequest, out: Path | str | None = None,
                  execution: Execution | None = None) -> ScorecardOutcome:
    """``windtunnel scorecard``: check everything (the model, the overrides on every run, the
    backend, the reuse folders), tune what the profile commits no rate for, run the sweep in
    ``out`` (default: :func:`~windtunnel.sweep.folders.default_out` of its config and the
    overrides as written), and write ``scorecard.json``."""
    execution = execution or Execution()
    sweep = request.sweep()
    expand(sweep, request.override_pairs)  # the model and the overrides, on every run, before anything is written
    folder = Path(out) if out is not None else default_out(sweep, request.overrides)
    check_reuse(execution.reuse, folder)
    with execution.session():  # a Ray cluster that cannot be started or joined, before the tuning writes
        tuned = tune_scorecard(request, folder, execution) if request.tune else None
        if tuned is not None:
            sweep = request.sweep(tuned)
        outcome = run_sweep(sweep, folder, execution, overrides=request.override_pairs)
    doc = write_scorecard(outcome.out, outcome.summary, sweep, request.model, tuned, request.override_pairs)
    return ScorecardOutcome(outcome, doc)


def scorecard_lines(doc: dict[str, Any]) -> list[str]:
    """The scorecard as the command prints it: a line per primitive (each model's verdict and
    score, the highest rung realised where there is a ladder) and the cautions behind it."""
    model, lines = doc["model"], []
    for prim, row in doc["primitives"].items():
        cells = [f"{who}: " + (f"{r['verdict']} {r['score']:.2f}" if r and r.get("score") is not None else "-")
                 for who, r in (("model", row["model"]), ("transformer", row[REFERENCE]))]
        highest = [f"{who}: {doc['highest'][name].get(prim) or 'none'}" for who, name in
                   (("model", model), ("transformer", REFERENCE)) if len(doc["ladder"][prim]) > 1]
        lines.append(f"{prim:<13} ({row['task']}, {row['metric']}): " + "; ".join(cells)
                     + (f"  [highest rung realised: {'; '.join(highest)}]" if highest else ""))
        lines += [f"  caution: {c}" for c in scorecard_cautions(row)]
    return lines


def scorecard_sweep(model: str, profile: str = "quick", seeds: int = 1,
                    primitives: list[str] | None = None, rungs: bool = True,
                    tuned: dict[str, dict[str, dict[str, Any]]] | None = None) -> SweepConfig:
    """The sweep behind a scorecard: one experiment per primitive's task and rung (``rungs``;
    else the profile's own setting alone), MODEL beside the transformer (capacity-matched to it),
    ``seeds`` seeds, one primitive rule per rung (``transport``, ``transport@S2_O2``, ...).
    ``tuned`` gives, per task and model, the settings :mod:`~windtunnel.sweep.tune` found (for
    every rung of that task)."""
    chosen = chosen_primitives(profile, primitives)
    budget = load_sweep(BUDGET[profile]) if profile in BUDGET else None
    experiments, rules = [], {}
    for prim in chosen:
        task, metric = PRIMITIVES[prim]
        by_model = {m: [f"{k}={json.dumps(v)}" for k, v in point.items()]
                    for m, point in (tuned or {}).get(task, {}).items()}
        for name, params in ladder(profile, task) if rungs else [(task, {})]:
            exp = {"task": task, "models": scorecard_models(model), "match_capacity": REFERENCE}
            if name != task:
                exp.update(name=name, overrides=[f"task_params.{k}={json.dumps(v)}" for k, v in params.items()])
            if by_model:
                exp["model_overrides"] = by_model
            experiments.append(exp)
            rules[prim if name == task else f"{prim}@{name.partition('@')[2]}"] = {"experiment": name, "metric": metric}
    doc = {
        "name": f"scorecard-{model.replace(':', '.')}",
        "description": (f"Primitive scorecard of {model} beside the transformer ({profile} profiles, "
                        f"{seeds} seed{'s' if seeds > 1 else ''}; every model matched to the transformer's count)."),
        "profile": profile,
        "paper": "paper1",
        "grid": {"train.seed": list(range(seeds))},
        "experiments": experiments,
        "primitives": {"rules": rules},
    }
    if budget is not None:
        doc.update(overrides=budget.overrides, jobs=budget.jobs)
    return SweepConfig.build(doc, where="scorecard")


def tune_scorecard(request: ScorecardRequest, out: Path, execution: Execution) -> dict[str, dict[str, dict[str, Any]]]:
    """Tune, by :func:`~windtunnel.sweep.tune.tune` at each tunnel's own rung, every model of the
    scorecard whose profile commits no setting for it (the transformer included), all searches at
    once (each stage's candidates share the workers); returns ``{task: {model: best grid point}}``
    for :func:`scorecard_sweep`. The candidates' runs live in ``out`` beside the scorecard's, so
    the winner's run is the scorecard's run; the candidates of ``execution.reuse`` folders (an
    earlier scorecard's) are copied in first."""
    searches = []
    for prim in chosen_primitives(request.profile, request.primitives):
        task, metric = PRIMITIVES[prim]
        committed = load_profile(request.profile, task).get("tuned", {})
        todo = [m for m in scorecard_models(request.model) if m not in committed]
        if todo:
            searches += [(cfg, TuneSpec(metric=metric))
                         for cfg in tune_configs(task, todo, request.profile, request.override_pairs)]
    tuned: dict[str, dict[str, dict[str, Any]]] = {}
    if not searches:
        return tuned
    here = budget_execution(request.profile, execution.local(), [cfg for cfg, _ in searches])
    for res in tune_in_folder(searches, out, here):
        tuned.setdefault(res.task, {})[res.model] = res.best
    return tuned


def tuning_of(out: Path | None, profile: str, task: str, model: str, searched: bool = False,
              overrides: Overrides | None = None) -> dict[str, Any] | None:
    """Where ``model``'s learning rate on ``task`` came from, as the runs were resolved: a
    ``--set train.lr`` override (it applies last), else the profile's committed value (its
    ``tuned`` entry and the docs section of its search table), else, when ``searched`` (the
    scorecard tuned this model on this tunnel), the search in ``out``
    (``tune-<task>-<model>.json``: its best point and its cautions), else None (the profile's
    shared rate)."""
    lr = [v for k, v in as_overrides(overrides) if k == "train.lr"]
    if lr:
        return {"source": "--set", "best": {"train.lr": lr[-1]}, "cautions": []}
    prof = load_profile(profile, task) if task in profile_tasks(profile) else {}
    committed = tuned_train(prof, model)  # what resolve_run applies
    if committed:
        return {"source": prof["tuned"][model].get("_source", f"profile {profile}"), "cautions": [],
                "best": {f"train.{k}": v for k, v in committed.items()}}
    path = Path(out) / f"{tune_name(task, model)}.json" if searched and out is not None else None
    if path is None or not path.is_file():
        return None
    doc = json.loads(path.read_text())
    return {"source": path.name, "best": doc.get("best", {}), "cautions": doc.get("cautions", [])}


def scorecard_doc(summary: dict[str, Any], sweep: SweepConfig, model: str, out: Path | None = None,
                  tuned: dict[str, dict[str, Any]] | None = None, overrides: Overrides | None = None) -> dict[str, Any]:
    """``scorecard.json``: per primitive the model's and the transformer's score, interval and
    verdict at the profile's own rung (``primitives``, with ``tuning``: where each one's learning
    rate came from and the cautions of its search, :func:`tuning_of`; ``tuned`` is what
    :func:`tune_scorecard` returned, ``overrides`` the scorecard's ``--set``), every rung
    (``ladder``, easiest first) and the highest rung each realises (``highest``)."""
    prims = summary.get("primitives") or {}
    rows, ladders = {}, {}
    for name, rule in sweep.primitives.rules.items():
        prim, _, rung = name.partition("@")
        task = rule.experiment.partition("@")[0]
        row = {"task": task, "metric": rule.metric, "experiment": rule.experiment,
               "model": prims.get(model, {}).get(name), REFERENCE: prims.get(REFERENCE, {}).get(name)}
        if not rung:
            rows[prim] = {**row, "tuning": {who: tuning_of(out, sweep.profile, task, who, who in (tuned or {}).get(task, {}),
                                                           overrides) for who in (model, REFERENCE)}}
        ladders.setdefault(prim, []).append({"rung": rung or "profile", **row})
    exps = {e.label(t): e for e in sweep.experiments for t in e.tasks()}
    for rungs in ladders.values():
        for rung in rungs:
            rung["params"] = dict(exps[rung["experiment"]].override_pairs)
    highest = {who: {prim: highest_realised([(r["experiment"], r[key]) for r in rungs]) for prim, rungs in ladders.items()}
               for who, key in ((model, "model"), (REFERENCE, REFERENCE))}
    return {"model": model, "reference": REFERENCE, "profile": sweep.profile, "seeds": sweep.grid["train.seed"],
            "realised": sweep.primitives.realised, "partial": sweep.primitives.partial,
            "finished": summary["finished"], "n_runs": summary["n_runs"], "missing": summary["missing"],
            "primitives": rows, "ladder": ladders, "highest": highest}


def scorecard_cautions(row: dict[str, Any]) -> list[str]:
    """The cautions of the searches behind one primitive's verdicts (a ``primitives`` row of
    ``scorecard.json``), each naming whose search it is: a ✗ from a search that ended on a plateau
    or at its grid's edge is not final until the check it names has run."""
    return [f"{who}'s {row['task']} search ({t['source']}): {c}"
            for who, t in (row.get("tuning") or {}).items() if t for c in t.get("cautions", [])]


def write_scorecard(out: Path, summary: dict[str, Any], sweep: SweepConfig, model: str,
                    tuned: dict[str, dict[str, Any]] | None = None, overrides: Overrides | None = None) -> dict[str, Any]:
    """Write ``scorecard.json`` into the sweep folder ``out`` (a score that is not a number is null)."""
    doc = jsonable(scorecard_doc(summary, sweep, model, out, tuned, overrides))
    atomic_write_text(Path(out) / SCORECARD_FILE, json.dumps(doc, indent=1, allow_nan=False))
    return doc
