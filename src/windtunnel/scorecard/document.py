"""What a scorecard is made of and what it writes: the sweep behind it (one experiment per
primitive's tunnel and rung), where each verdict's learning rate came from, and ``scorecard.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windtunnel.compat import legacy_group
from windtunnel.config import ConfigError, Overrides, as_overrides
from windtunnel.files import atomic_write_text, jsonable
from windtunnel.sweep.config import SweepConfig, load_sweep
from windtunnel.sweep.markdown import highest_realised
from windtunnel.sweep.primitives import BUDGET, PRIMITIVES, REFERENCE
from windtunnel.sweep.shape import ModelSets, model_pairs, pair_texts
from windtunnel.train.config import load_profile, profile_tasks, tuned_train
from windtunnel.tune.outputs import tune_name

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


def scorecard_models(model: str, train_reference: bool = True) -> list[str]:
    """The architectures a scorecard trains: the model, and the reference beside it when it is trained."""
    return [REFERENCE] if model == REFERENCE else [REFERENCE, model] if train_reference else [model]


@dataclass(frozen=True)
class ScorecardRuns:
    """How a scorecard's runs train beyond its profile (:func:`scorecard_sweep`): the settings its
    searches found (``tuned``: per task and model, the grid point :mod:`~windtunnel.tune.search`
    found, for every rung of that task), the transformer trained beside the model
    (``train_reference``), the runs decided early (``decide_early``), and the fields pinned on the
    model's runs (``model_sets``)."""

    tuned: dict[str, dict[str, dict[str, Any]]] | None = None
    train_reference: bool = True
    decide_early: bool = False
    model_sets: ModelSets | None = None


def scorecard_sweep(model: str, profile: str = "quick", seeds: int = 1, primitives: list[str] | None = None,
                    rungs: bool = True, runs: ScorecardRuns | None = None, **legacy: Any) -> SweepConfig:
    """The sweep behind a scorecard: one experiment per primitive's task and rung (``rungs``;
    else the profile's own setting alone), MODEL capacity-matched to the transformer (trained
    beside it with ``runs.train_reference``), ``seeds`` seeds, one primitive rule per rung
    (``transport``, ``transport@S2_O2``, ...), its runs decided early (``runs.decide_early``), with
    the settings its searches found (``runs.tuned``). MODEL's own overrides on each tunnel (its
    ``model_overrides``) are its shape (:func:`~windtunnel.sweep.shape.model_pairs`: a user's model
    takes the transformer's, and ``runs.model_sets`` pins fields), then its tuned settings."""
    runs = legacy_group("scorecard_sweep", runs, legacy, ScorecardRuns)
    tuned, model_sets = runs.tuned, runs.model_sets
    chosen = chosen_primitives(profile, primitives)
    budget = load_sweep(BUDGET[profile]) if profile in BUDGET else None
    experiments, rules = [], {}
    for prim in chosen:
        task, metric = PRIMITIVES[prim]
        by_model = {m: pair_texts(list(point.items())) for m, point in (tuned or {}).get(task, {}).items()}
        shape = pair_texts(model_pairs(task, model, profile, model_sets))
        if shape:
            by_model[model] = [*shape, *by_model.get(model, [])]
        for name, params in ladder(profile, task) if rungs else [(task, {})]:
            exp = {"task": task, "models": scorecard_models(model, runs.train_reference), "match_capacity": REFERENCE}
            if name != task:
                exp.update(name=name, overrides=pair_texts([(f"task_params.{k}", v) for k, v in params.items()]))
            if by_model:
                exp["model_overrides"] = {m: items for m, items in by_model.items() if m in exp["models"]}
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
    if runs.decide_early:
        doc["decide_early"] = True
    return SweepConfig.build(doc, where="scorecard")


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
    found = [Path(out) / f"{tune_name(task, model, full)}.json" for full in (False, True)] if searched and out else []
    path = next((p for p in found if p.is_file()), None)
    if path is None:
        return None
    doc = json.loads(path.read_text())
    out_doc = {"source": path.name, "best": doc.get("best", {}), "cautions": doc.get("cautions", [])}
    if doc.get("unsettled"):
        out_doc["unsettled"] = doc["unsettled"]
    return out_doc


@dataclass(frozen=True)
class ScorecardProvenance:
    """Where a scorecard's numbers came from (:func:`scorecard_doc`): its folder (``out``, where the
    searches' tables are), the searches it ran (``tuned``: what
    :func:`~windtunnel.scorecard.score.tune_scorecard` returned), its ``--set`` (``overrides``), the
    rungs its ladder search did not need (``skipped``), and where the transformer's results came
    from (``reference``: ``train``, ``shipped``, a folder, ``none``)."""

    out: Path | None = None
    tuned: dict[str, dict[str, Any]] | None = None
    overrides: Overrides | None = None
    skipped: set[str] | frozenset = frozenset()
    reference: str = "train"


def scorecard_doc(summary: dict[str, Any], sweep: SweepConfig, model: str,
                  provenance: ScorecardProvenance | None = None, **legacy: Any) -> dict[str, Any]:
    """``scorecard.json``: per primitive the model's and the transformer's score, interval and
    verdict at the profile's own rung (``primitives``, with ``tuning``: where each one's learning
    rate came from and the cautions of its search, :func:`tuning_of`), every rung (``ladder``,
    easiest first; a rung the ladder search did not need is marked ``"needed": false``) and the
    highest rung each realises (``highest``); ``reference_source`` where the transformer's results
    did not come from training it (``provenance``: where each of these came from)."""
    src = legacy_group("scorecard_doc", provenance, legacy, ScorecardProvenance)
    out, tuned, overrides = src.out, src.tuned, src.overrides
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
        entry = {"rung": rung or "profile", **row}
        if rule.experiment in src.skipped:
            entry["needed"] = False
        ladders.setdefault(prim, []).append(entry)
    exps = {e.label(t): e for e in sweep.experiments for t in e.tasks()}
    for rungs in ladders.values():
        for rung in rungs:
            rung["params"] = dict(exps[rung["experiment"]].override_pairs)
    highest = {who: {prim: highest_realised([(r["experiment"], r[key]) for r in rungs]) for prim, rungs in ladders.items()}
               for who, key in ((model, "model"), (REFERENCE, REFERENCE))}
    doc = {"model": model, "reference": REFERENCE, "profile": sweep.profile, "seeds": sweep.grid["train.seed"],
           "realised": sweep.primitives.realised, "partial": sweep.primitives.partial,
           "finished": summary["finished"], "n_runs": summary["n_runs"], "missing": summary["missing"],
           "primitives": rows, "ladder": ladders, "highest": highest}
    if src.reference != "train":
        doc["reference_source"] = src.reference
    return doc


def unscored_text(row: dict[str, Any]) -> str | None:
    """Why a primitive of ``scorecard.json`` has no verdict: ``not scored: capacity`` (the pre-flight
    left its tunnel out), or None (it was scored; a failed run's cell holds its ``error``)."""
    return f"not scored: {row['not_scored']}" if row.get("not_scored") else None


def scorecard_cautions(row: dict[str, Any]) -> list[str]:
    """The cautions of the searches behind one primitive's verdicts (a ``primitives`` row of
    ``scorecard.json``), each naming whose search it is: a ✗ from a search that ended on a plateau
    or at its grid's edge is not final until the check it names has run."""
    return [f"{who}'s {row['task']} search ({t['source']}): {c}"
            for who, t in (row.get("tuning") or {}).items() if t for c in t.get("cautions", [])]


def write_scorecard(out: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """Write ``scorecard.json`` (:func:`scorecard_doc`) into the sweep folder ``out`` (a score that
    is not a number is null)."""
    doc = jsonable(doc)
    atomic_write_text(Path(out) / SCORECARD_FILE, json.dumps(doc, indent=1, allow_nan=False))
    return doc
