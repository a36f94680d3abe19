"""The primitive scorecard of one architecture: a small sweep, scored against exact posteriors.

``windtunnel scorecard MODEL`` trains MODEL (a registered name or a user's
``package.module:Class``) and the reference transformer on the three primitive tunnels of Paper I
(bijection: accumulation; HMM: transport; recall: binding) plus in-context regression
(continuous beliefs), SULA, Kalman filtering (continuous transport), Dirichlet-categorical
counting and change-points (revision), each capacity-matched to the transformer and scored at
every rung of its difficulty ladder, with the budget of
``paper1-quick`` (the quick profiles) or the paper's (``--profile paper``). It is an ordinary
sweep (run folders, resume, the Ray backend, tables, ``windtunnel report``); this module only
builds its config and reads its primitives into ``scorecard.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError, Overrides, as_overrides
from windtunnel.files import atomic_write_text, jsonable
from windtunnel.sweep.config import SweepConfig, load_sweep
from windtunnel.sweep.markdown import highest_realised
from windtunnel.train.config import load_profile, profile_tasks, tuned_train

#: primitive -> (task, metric scored at the training length), in the scorecard's order
PRIMITIVES: dict[str, tuple[str, str]] = {
    "accumulation": ("bijection", "kl_bayes_model"),
    "transport": ("hmm", "kl_bayes_model"),
    "binding": ("recall", "accuracy"),
    "continuous": ("regression", "kl_bayes_model"),
    "sula": ("sula", "kl_bayes_model"),
    "continuous_transport": ("kalman", "kl_bayes_model"),
    "counting": ("dirichlet", "kl_bayes_model"),
    "revision": ("changepoint", "kl_bayes_model"),
}
REFERENCE = "transformer"
#: the shipped sweep whose budget (its overrides, e.g. one thread per run, and jobs) each profile's scorecard takes
BUDGET = {"quick": "paper1-quick", "paper": "paper1"}
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


def budget_overrides(profile: str, overrides: Overrides | None = None) -> list:
    """The overrides of the sweep whose budget a profile's scorecard takes (one thread per run for
    ``quick``), then ``overrides``."""
    budget = load_sweep(BUDGET[profile]) if profile in BUDGET else None
    return [*(budget.override_pairs if budget else []), *as_overrides(overrides)]


def budget_jobs(profile: str, jobs: int | str | None, configs: list) -> int:
    """How many runs train at once: ``jobs``, else the budget sweep's (``auto`` for ``quick``)."""
    from windtunnel.sweep.expand import SweepRun
    from windtunnel.sweep.run import resolve_jobs

    if jobs is None:
        jobs = load_sweep(BUDGET[profile]).jobs if profile in BUDGET else 1
    return resolve_jobs(jobs, [SweepRun(c, c.task) for c in configs])


def tune_configs(task: str, models: list[str], profile: str = "quick", overrides: Overrides | None = None) -> list:
    """The run configs a search starts from: each model on ``task`` at the profile's own rung with
    the scorecard's budget, capacity-matched to the transformer (its runs are the scorecard's)."""
    from windtunnel.sweep.expand import matched_configs

    both = [REFERENCE, *[m for m in models if m != REFERENCE]]
    configs = matched_configs(task, both, profile, budget_overrides(profile, overrides), REFERENCE)
    return [c for c in configs if c.model in models]


def tune_scorecard(model: str, out: Path, profile: str = "quick", primitives: list[str] | None = None,
                   overrides: Overrides | None = None, jobs: int | str | None = None,
                   log: Callable[[str], None] = print, reuse: list[Path] | tuple = ()) -> dict[str, dict[str, dict[str, Any]]]:
    """Tune, by :func:`~windtunnel.sweep.tune.tune` at each tunnel's own rung, every model of the
    scorecard whose profile commits no setting for it (the transformer included), all searches at
    once (:func:`~windtunnel.sweep.tune.tune_many`: each stage's candidates share the workers); returns
    ``{task: {model: best grid point}}`` for :func:`scorecard_sweep`. The candidates' runs live in
    ``out`` beside the scorecard's, so the winner's run is the scorecard's run; ``reuse`` folders'
    candidates (an earlier scorecard's) are copied in first."""
    from windtunnel.sweep.tune import TuneSpec, tune_many_in_folder

    searches = []
    for prim in chosen_primitives(profile, primitives):
        task, metric = PRIMITIVES[prim]
        committed = load_profile(profile, task).get("tuned", {})
        todo = [m for m in scorecard_models(model) if m not in committed]
        if todo:
            searches += [(cfg, TuneSpec(metric=metric)) for cfg in tune_configs(task, todo, profile, overrides)]
    tuned: dict[str, dict[str, dict[str, Any]]] = {}
    if not searches:
        return tuned
    n = budget_jobs(profile, jobs, [cfg for cfg, _ in searches])
    for res in tune_many_in_folder(searches, out, n, log, reuse):
        tuned.setdefault(res.task, {})[res.model] = res.best
    return tuned


def task_metric(task: str) -> str:
    """The metric a task's primitive is scored by (KL for a task outside the scorecard)."""
    return next((metric for t, metric in PRIMITIVES.values() if t == task), "kl_bayes_model")


def tuning_of(out: Path | None, profile: str, task: str, model: str, searched: bool = False,
              overrides: Overrides | None = None) -> dict[str, Any] | None:
    """Where ``model``'s learning rate on ``task`` came from, as the runs were resolved: a
    ``--set train.lr`` override (it applies last), else the profile's committed value (its
    ``tuned`` entry and the docs section of its search table), else, when ``searched`` (the
    scorecard tuned this model on this tunnel), the search in ``out``
    (``tune-<task>-<model>.json``: its best point and its cautions), else None (the profile's
    shared rate)."""
    from windtunnel.sweep.tune import tune_name

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
    for steps in ladders.values():
        for step in steps:
            step["params"] = dict(exps[step["experiment"]].override_pairs)
    highest = {who: {prim: highest_realised([(s["experiment"], s[key]) for s in steps]) for prim, steps in ladders.items()}
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
