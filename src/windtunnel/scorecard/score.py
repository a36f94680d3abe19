"""The primitive scorecard of one architecture: a small sweep, scored against exact posteriors.

``windtunnel scorecard MODEL`` scores MODEL (a registered name or a user's ``package.module:Class``)
on the inference primitives: Paper I's three tunnels (bijection: accumulation; HMM: transport;
recall: binding) plus in-context regression (continuous beliefs), SULA, Kalman filtering (continuous
transport), Dirichlet-categorical counting and change-points (revision), capacity-matched to the
reference transformer, with the budget of ``paper1-quick`` (the quick profiles) or the paper's
(``--profile paper``). How it gets a decisive answer fast:

- **the reference is data**: the transformer's results at every rung ship with the package
  (:mod:`~windtunnel.scorecard.reference`); only MODEL trains (other sources: ``--reference train|FOLDER|none``);
- **the learning rate is searched** where the profile commits none: the three central rates of the
  tuning grid (:data:`SCORECARD_LRS`), each trained to the end, the best at the end wins
  (:mod:`~windtunnel.tune.search`; ``--search annealed``: the annealed search with the plateau guard);
- **runs decide early**: a run stops once its probe and its full evaluation agree that the
  primitive is realised (:mod:`windtunnel.train.decide`; ``--no-early-stop``: the full budget);
- **the ladder is searched, not swept**: the profile's own rung first, then up while realised
  and down while not (``--full-ladder``: every rung).

It is an ordinary sweep (run folders, resume, the Ray backend, tables, ``windtunnel report``);
what makes and reads it is in :mod:`~windtunnel.scorecard.document`. Its parts: the request
(:mod:`~windtunnel.scorecard.request`), the plan made before anything trains
(:mod:`~windtunnel.scorecard.plan`) and the ladder search (:mod:`~windtunnel.scorecard.climb`);
their public names import from here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError
from windtunnel.engine.execution import Execution, check_reuse
from windtunnel.scorecard.climb import Climb, Stages, climb_ladders, rung_order  # noqa: F401  (Climb: read from here)
from windtunnel.scorecard.document import (  # noqa: F401  (the scorecard's parts, read from here by callers)
    SCORECARD_FILE,
    ScorecardProvenance,
    ScorecardRuns,
    chosen_primitives,
    ladder,
    rung_label,
    scorecard_cautions,
    scorecard_doc,
    scorecard_models,
    scorecard_sweep,
    tuning_of,
    unscored_text,
    write_scorecard,
)
from windtunnel.scorecard.plan import ScorecardPlan, plan_scorecard, searched_models
from windtunnel.scorecard.reference import check_applies, load_reference
from windtunnel.scorecard.request import SCORECARD_LRS, ScorecardRequest, ScorecardSearch  # noqa: F401  (read from here)
from windtunnel.sweep.config import SweepConfig
from windtunnel.sweep.expand import SweepRun, expand
from windtunnel.sweep.manifest import MANIFEST, default_out, read_manifest
from windtunnel.sweep.primitives import PRIMITIVES, REFERENCE, budget_execution, tune_configs
from windtunnel.sweep.run import SweepOutcome, summarise
from windtunnel.train.config import RunConfig
from windtunnel.tune.search import TuneError, tune_in_folder
from windtunnel.tune.settings import Search  # noqa: F401  (read from here by callers)

#: a primitive's rule names easiest rung first (:func:`~windtunnel.scorecard.climb.rung_order`),
#: under the name benchmarks/study_agreement.py reads from here
_rung_order = rung_order


@dataclass
class ScorecardOutcome:
    """What :func:`run_scorecard` did: the sweep's outcome and ``scorecard.json``."""

    sweep: SweepOutcome
    doc: dict[str, Any]

    @property
    def out(self) -> Path:
        return self.sweep.out


def run_scorecard(request: ScorecardRequest, out: Path | str | None = None,
                  execution: Execution | None = None, plan: ScorecardPlan | None = None) -> ScorecardOutcome:
    """``windtunnel scorecard``: check everything (the model, the overrides on every run, the
    reference, the backend, the reuse folders), size the model on every tunnel (the pre-flight,
    :func:`plan_scorecard`; a tunnel it cannot be matched on is left out), tune what the profile
    commits no rate for, run the sweep in ``out`` (default:
    :func:`~windtunnel.sweep.manifest.default_out` of its config and the overrides as written), rung
    by rung unless ``full_ladder``, and write ``scorecard.json``. A search or a run that fails
    leaves its primitive with the error; the others complete."""
    execution = execution or Execution()
    plan = plan or plan_scorecard(request)
    request = plan.scored
    sweep = request.sweep()
    runs = expand(sweep, request.override_pairs)  # the model and the overrides, on every run, before anything is written
    reference = _reference_cells(request, sweep)  # checked before anything is written too
    folder = Path(out) if out is not None else default_out(sweep, request.overrides)
    check_reuse(execution.reuse, folder)
    errors: dict[str, dict[str, str]] = {}  # primitive -> who -> error
    with execution.session():  # a Ray cluster that cannot be started or joined, before the tuning writes
        tuned = None
        if request.tune:
            tuned, failed = tune_scorecard(request, folder, execution)
            for prim in chosen_primitives(request.profile, request.primitives):
                for (task, who), error in failed.items():
                    if task == PRIMITIVES[prim][0]:
                        errors.setdefault(prim, {})[who] = f"the learning-rate search failed: {error}"
            if errors:
                kept = [p for p in chosen_primitives(request.profile, request.primitives) if p not in errors]
                if not kept:
                    raise ConfigError("every search of the scorecard failed: " + "; ".join(failed.values()))
                request = request.scoring(kept)
        if tuned is not None:
            sweep = request.sweep(tuned)
            runs = expand(sweep, request.override_pairs)
        stages = Stages(sweep, folder, execution, request.override_pairs, runs, _replaced(folder, runs, tuned or {}))
        outcome, skipped, failed_runs = climb_ladders(request, stages)
    summary = dict(outcome.summary)
    if reference is not None:
        summary["primitives"] = {**(summary.get("primitives") or {}), REFERENCE: reference}
    doc = scorecard_doc(summary, sweep, request.model, ScorecardProvenance(
        outcome.out, tuned, request.override_pairs, skipped=skipped, reference=request.reference_source))
    if request.reference == "auto" and request.model != REFERENCE and request.auto_reason():
        doc["reference_note"] = f"{request.auto_reason()}: the transformer was trained here"
    _mark_unsettled(doc)
    _mark_failed(doc, runs, failed_runs)
    _add_unscored(doc, plan, errors)
    return ScorecardOutcome(outcome, write_scorecard(outcome.out, doc))


def _reference_cells(request: ScorecardRequest, sweep: SweepConfig) -> dict[str, dict[str, Any]] | None:
    """The transformer's cells (rule -> result) where it is not trained: the shipped data (checked
    to be the very runs this scorecard's would be), a folder's runs, or none."""
    if request.trains_reference or request.reference_source == "none":
        return None
    ref_runs = request.reference_runs()
    ref_sweep = scorecard_sweep(REFERENCE, request.profile, request.seeds, request.primitives, request.rungs)
    if request.reference_source == "shipped":
        data = load_reference(request.profile)
        if data is None:
            raise ConfigError(f"no reference is shipped for profile '{request.profile}': use --reference train, "
                              "--reference FOLDER or --reference none")
        check_applies(data, ref_runs)
        wanted = set(sweep.primitives.rules)
        return {rule: rung.cell() for rule, rung in data.by_rule().items() if rule in wanted}
    summary, _ = summarise(Path(request.reference), ref_sweep, ref_runs)
    return (summary.get("primitives") or {}).get(REFERENCE, {})


def _replaced(folder: Path, runs: list[SweepRun], tuned: dict[str, dict[str, dict[str, Any]]]) -> dict[str, str]:
    """The runs of ``folder``'s manifest that a search has replaced since (``--settle`` changed a
    winner): name -> why, for each listed run not in ``runs`` that is one of them but for the
    tuned settings of its model on its tunnel."""
    if not (folder / MANIFEST).is_file():
        return {}
    _, listed = read_manifest(folder)
    names, replaced = {r.name for r in runs}, {}
    for old in listed:
        point = tuned.get(old.config.task, {}).get(old.config.model)
        if old.name in names or not point:
            continue
        rest = _without(old.config, point)
        if any((new.experiment, new.labels) == (old.experiment, old.labels) and _without(new.config, point) == rest
               for new in runs):
            replaced[old.name] = "replaced by the same run at " + ", ".join(
                f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items())
    return replaced


def _without(config: RunConfig, point: dict[str, Any]) -> dict[str, Any]:
    """``config`` as a document, the dotted keys of ``point`` removed."""
    doc = config.model_dump(mode="json")
    for key in point:
        section, _, name = key.rpartition(".")
        (doc.get(section, {}) if section else doc).pop(name, None)
    return doc


def _mark_unsettled(doc: dict[str, Any]) -> None:
    """A verdict short of realised whose search stopped rates it could not rule out says so."""
    for row in doc["primitives"].values():
        mine = (row.get("tuning") or {}).get(doc["model"]) or {}
        if mine.get("unsettled") and row["model"] and row["model"].get("verdict") != "yes":
            row["model"]["unsettled"] = mine["unsettled"]


def _mark_failed(doc: dict[str, Any], runs: list[SweepRun], failed: dict[str, str]) -> None:
    """A cell whose run failed holds its error (every ladder entry, and the primitive's own rung);
    the failed runs are listed (``failed``) and counted among the runs not finished."""
    doc["failed"] = dict(failed)
    late = [name for name in failed if name not in doc["missing"]]  # failed at an earlier stage of the climb
    doc["missing"], doc["n_runs"] = [*doc["missing"], *late], doc["n_runs"] + len(late)
    by_cell = {(r.experiment, "model" if r.config.model == doc["model"] else REFERENCE): failed[r.name]
               for r in runs if r.name in failed}
    for prim, rungs in doc["ladder"].items():
        for entry in rungs:
            for who in ("model", REFERENCE):
                if entry[who] is None and (entry["experiment"], who) in by_cell:
                    entry[who] = {"error": by_cell[entry["experiment"], who]}
                    if entry["rung"] == "profile":
                        doc["primitives"][prim][who] = entry[who]


def _add_unscored(doc: dict[str, Any], plan: ScorecardPlan, errors: dict[str, dict[str, str]]) -> None:
    """The primitives the scorecard left out, in their places: the pre-flight's (``not_scored``:
    ``capacity``, with the reason and what would fit) and those whose search failed (the error in
    the cell); ``preflight`` records every tunnel's sizing, and each ladder entry (the model's run
    there) its ``shape``: field -> value and where it came from."""
    rows = {}
    for prim in chosen_primitives(plan.request.profile, plan.request.primitives):
        task, metric = PRIMITIVES[prim]
        if prim in doc["primitives"]:
            rows[prim] = doc["primitives"][prim]
        elif prim in plan.left_out:
            s = plan.left_out[prim]
            rows[prim] = {"task": task, "metric": metric, "experiment": task, "model": None, REFERENCE: None,
                          "not_scored": "capacity", "reason": f"{s.experiment}: {s.error}", "fits": s.fits}
        else:
            rows[prim] = {"task": task, "metric": metric, "experiment": task,
                          **{who: {"error": errors[prim][name]} if name in errors[prim] else None
                             for who, name in (("model", doc["model"]), (REFERENCE, REFERENCE))}}
    doc["primitives"] = rows
    doc["preflight"] = [s.to_json() for s in plan.sizings]
    shapes = {s.experiment: s.shape for s in plan.sizings if s.ok}
    for rungs in doc["ladder"].values():  # each run of the model: its shape, and where each field came from
        for entry in rungs:
            entry["shape"] = shapes.get(entry["experiment"], {})


def tune_scorecard(request: ScorecardRequest, out: Path, execution: Execution
                   ) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[tuple[str, str], str]]:
    """Tune, at each tunnel's own rung, every model the scorecard trains whose profile commits no
    setting for it, all searches at once (each stage's candidates share the workers); returns
    ``{task: {model: best grid point}}`` for :func:`scorecard_sweep`. The candidates' runs live in
    ``out`` beside the scorecard's, so the winner's run is the scorecard's run; the candidates of
    ``execution.reuse`` folders (an earlier scorecard's) are copied in first. Also returns the
    searches whose every candidate failed, ``{(task, model): error}`` (the others' results stand)."""
    searches = []
    for prim in chosen_primitives(request.profile, request.primitives):
        task, metric = PRIMITIVES[prim]
        todo = searched_models(request, task)
        if todo:
            searches += [(cfg, request.search_spec(metric))
                         for cfg in tune_configs(task, todo, request.profile, request.override_pairs, request.sets)]
    tuned: dict[str, dict[str, dict[str, Any]]] = {}
    if not searches:
        return tuned, {}
    here = budget_execution(request.profile, execution.local(), [cfg for cfg, _ in searches])
    try:
        results, failed = tune_in_folder(searches, out, here), {}
    except TuneError as exc:
        results, failed = exc.results, exc.errors
    for res in results:
        tuned.setdefault(res.task, {})[res.model] = res.best
    return tuned, failed


def scorecard_lines(doc: dict[str, Any]) -> list[str]:
    """The scorecard as the command prints it: a line per primitive (each model's verdict, score and
    steps to realise, the highest rung realised where there is a ladder) and the cautions behind it."""
    model, lines = doc["model"], []
    for prim, row in doc["primitives"].items():
        if row.get("not_scored"):
            lines.append(f"{prim:<13} ({row['task']}, {row['metric']}): {unscored_text(row)}: {row['reason']}")
            lines += [f"  would fit with --model-set {fit}" for fit in row.get("fits", [])]
            continue
        cells = [f"{who}: {_verdict_text(r)}" for who, r in (("model", row["model"]), ("transformer", row[REFERENCE]))]
        highest = [f"{who}: {doc['highest'][name].get(prim) or 'none'}" for who, name in
                   (("model", model), ("transformer", REFERENCE)) if len(doc["ladder"].get(prim, [])) > 1]
        lines.append(f"{prim:<13} ({row['task']}, {row['metric']}): " + "; ".join(cells)
                     + (f"  [highest rung realised: {'; '.join(highest)}]" if highest else ""))
        lines += [f"  caution: {c}" for c in scorecard_cautions(row)]
        if (row["model"] or {}).get("unsettled"):
            lines.append(f"  unsettled: the search stopped {row['model']['unsettled']} while every rate was on the plateau; "
                         "run again without --no-settle to train them to the end")
    return lines


def _verdict_text(cell: dict[str, Any] | None) -> str:
    if cell and cell.get("error"):
        return f"failed: {cell['error']}"
    if not cell or cell.get("score") is None:
        return "-"
    text = f"{cell['verdict']}{'?' if cell.get('unsettled') else ''} {cell['score']:.2f}"
    if cell.get("steps_to_realise") is not None:
        text += f" (realised by step {cell['steps_to_realise']:.0f} of {cell['budget_steps']})"
    return text
