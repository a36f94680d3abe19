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
what makes and reads it is in :mod:`~windtunnel.scorecard.document`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from windtunnel.config import ConfigError
from windtunnel.engine.execution import Execution, check_reuse
from windtunnel.scorecard.document import (  # noqa: F401  (the scorecard's parts, read from here by callers)
    SCORECARD_FILE,
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
from windtunnel.scorecard.preflight import Sizing, preflight, preflight_lines, unmatched
from windtunnel.scorecard.reference import check_applies, load_reference
from windtunnel.sweep.config import SweepConfig, _WithOverrides
from windtunnel.sweep.expand import SweepRun, expand
from windtunnel.sweep.manifest import MANIFEST, default_out, read_manifest
from windtunnel.sweep.primitives import PRIMITIVES, REFERENCE, budget_execution, tune_configs
from windtunnel.sweep.run import SweepError, SweepOutcome, run_sweep, summarise
from windtunnel.sweep.shape import ModelSets, parse_model_sets, sets_within
from windtunnel.train.config import RunConfig, load_profile
from windtunnel.tune.search import SEARCH, TuneError, TuneSpec, tune_in_folder

#: the candidates of a scorecard's learning-rate search: the three central rates of the tuning grid
#: (DEFAULT_LRS without 1e-4 and 3.16e-4). Every winner of the sixteen recorded reversals is one of
#: them, each trained to the end (benchmarks/study_candidates.py, docs/results/tuning.md)
SCORECARD_LRS = [1e-3, 3.16e-3, 1e-2]
#: how the scorecard searches a learning rate: every candidate to the end (the default), the annealed
#: search with the plateau guard, or the plain successive halving
Search = Literal["full", "annealed", "halving"]


class ScorecardRequest(_WithOverrides):
    """One scorecard: ``model`` (a registered architecture or a user's ``package.module:Class``)
    beside the reference transformer, at the ``profile``'s budget, with ``seeds`` seeds, on the
    chosen ``primitives`` (None: every one the profile has a tunnel for); ``overrides``
    (``section.field=value`` text, as on the command line) apply to every run."""

    model: str = Field(min_length=1)
    profile: str = "quick"
    seeds: int = Field(1, ge=1, le=100, description="seeds 0..N-1 per run")
    primitives: list[str] | None = None
    rungs: bool = Field(True, description="score the rungs of each tunnel's difficulty ladder, or its own setting alone")
    full_ladder: bool = Field(False, description="every rung of every ladder (else the ladder is searched from the "
                              "profile's own rung: up while realised, down while not)")
    tune: bool = Field(True, description="search the learning rate of every model the profile commits none for")
    search: Search = Field("full", description="how a learning rate is searched: full (every candidate trained to the "
                           "end, the best at the end wins), annealed (annealed comparisons with the plateau guard) or "
                           "halving (the plain successive halving: no cooldown, guard or ties)")
    lrs: list[float] | None = Field(None, min_length=1, description="the learning rates searched (None: SCORECARD_LRS, "
                                    "1e-3, 3.16e-3 and 1e-2)")
    settle: bool = Field(True, description="the annealed search: where the plateau guard could not rule out a stopped "
                         "rate, train it to the end, so that no verdict is left undecided (False: the faster search "
                         "that marks such a verdict ?)")
    finalists: float | None = Field(None, ge=0, lt=1, description="the annealed search's spread at its last comparison: "
                                    "every rate within it of the leader trains to the end (None: the default, 0.15)")
    early_stop: bool = Field(True, description="a run stops once its probe and evaluation agree the primitive is realised")
    reference: str = Field("auto", description="the transformer's results: auto (shipped where the profile ships "
                           "them for these runs, else train), shipped (the package's data), train, none, or a "
                           "folder holding its runs")
    overrides: list[str] = Field(default_factory=list, description="section.field=value for every run")
    model_sets: list[str] = Field(default_factory=list, description="field=value (every tunnel) or TUNNEL.field=value "
                                  "(one tunnel): a field of the scored model's config, for its runs alone")

    _sets: ModelSets = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _old_search_flags(cls, data: Any) -> Any:
        """``full`` and ``halving`` (booleans, before ``search``): deprecated, read as ``search``."""
        if not isinstance(data, dict) or not {"full", "halving"} & data.keys():
            return data
        data = dict(data)
        full, halving = bool(data.pop("full", False)), bool(data.pop("halving", False))
        old = "halving" if halving else "full" if full else "annealed"
        if full and halving:
            raise ValueError("full and halving: choose one search (search = full, annealed or halving)")
        if data.get("search", old) != old:
            raise ValueError(f"search = {data['search']!r} and the old flags full = {full}, halving = {halving} "
                             "disagree: give search alone")
        warnings.warn("ScorecardRequest's full and halving are deprecated: search = 'full', 'annealed' or 'halving' "
                      "(removed in 0.6)", DeprecationWarning, stacklevel=2)
        return {**data, "search": old}

    @model_validator(mode="after")
    def _check(self):
        chosen = chosen_primitives(self.profile, self.primitives)
        self._sets = parse_model_sets(self.model_sets, self.model, [PRIMITIVES[p][0] for p in chosen])
        both = {k.removeprefix("model_params.") for k, _ in self.override_pairs} & {
            name for fields in self._sets.values() for name in fields}
        if both:
            raise ValueError(f"{', '.join(sorted(both))}: set by --set model_params (every run) and by --model-set "
                             "(the model alone); choose one")
        if self.tune and any(k == "train.lr" for k, _ in self.override_pairs):
            raise ValueError("--set train.lr=... fixes the learning rate that the scorecard would tune; add --no-tune")
        if self.finalists is not None and (self.search != "annealed" or not self.tune):
            why = f"search = {self.search}" if self.tune else "tune = false (no search)"
            raise ValueError(f"finalists = {self.finalists:g}: the spread of the rates trained to the end after the "
                             f"annealed search's last comparison; {why} has no such comparison")
        if self.lrs is not None:
            if not self.tune:
                raise ValueError("lrs: the rates of the learning-rate search; tune = false runs none")
            if any(not (math.isfinite(x) and x > 0) for x in self.lrs) or len(set(self.lrs)) != len(self.lrs):
                raise ValueError(f"lrs = {self.lrs}: distinct learning rates, each positive and finite")
        if self.reference not in ("auto", "shipped", "train", "none") and not Path(self.reference).is_dir():
            raise ValueError(f"reference = {self.reference!r}: auto, shipped, train, none, or a folder holding the "
                             "transformer's runs")
        return self

    @property
    def reference_source(self) -> str:
        """Where the transformer's results come from: ``auto`` resolved (the shipped data where the
        profile ships them and they are this scorecard's reference runs, else trained here), and
        ``train`` when the model is the transformer."""
        if self.model == REFERENCE:
            return "train"
        if self.reference == "auto":
            return "train" if self.auto_reason() else "shipped"
        return self.reference

    def auto_reason(self) -> str | None:
        """Why ``auto`` trains the reference (None: the shipped data apply): none ships for the
        profile, or its runs are not this scorecard's (an override, a seed, another version)."""
        return self._auto_reason

    @cached_property
    def _auto_reason(self) -> str | None:  # read once: the shipped file and the reference's runs
        data = load_reference(self.profile)
        if data is None:
            return f"no reference ships for profile '{self.profile}'"
        try:
            check_applies(data, self.reference_runs())
        except ConfigError:
            return (f"the shipped reference of profile '{self.profile}' was trained with other settings than this "
                    "scorecard's (an override or a seed changes its runs)")
        return None

    def reference_runs(self) -> list[SweepRun]:
        """The transformer's runs this scorecard would train (the overrides applied)."""
        ref_sweep = scorecard_sweep(REFERENCE, self.profile, self.seeds, self.primitives, self.rungs)
        return [r for r in expand(ref_sweep, self.override_pairs) if r.config.model == REFERENCE]

    @property
    def trains_reference(self) -> bool:
        return self.reference_source == "train"

    def sweep(self, tuned: dict[str, dict[str, dict[str, Any]]] | None = None, *, reference: bool | None = None) -> SweepConfig:
        """The sweep behind it (:func:`scorecard_sweep`): the model's runs, and the reference's where
        it is trained (``reference`` overrides: the reference's runs alone are read from data)."""
        with_ref = self.trains_reference if reference is None else reference
        return scorecard_sweep(self.model, self.profile, self.seeds, self.primitives, self.rungs, tuned,
                               train_reference=with_ref, decide_early=self.early_stop, model_sets=self._sets)

    @property
    def sets(self) -> ModelSets:
        """``model_sets`` parsed: tunnel (None: every one) -> field -> value."""
        return self._sets

    def scoring(self, primitives: list[str]) -> ScorecardRequest:
        """This scorecard on ``primitives`` alone (the others left out by the pre-flight or a failed search)."""
        sets = sets_within(self.model_sets, [PRIMITIVES[p][0] for p in primitives])
        return ScorecardRequest.build({**self.model_dump(), "primitives": primitives, "model_sets": sets},
                                      where="scorecard")

    def search_spec(self, metric: str) -> TuneSpec:
        """How each learning rate is searched (``search``) over ``lrs``: every candidate to the end,
        the annealed search with the plateau guard, or the plain halving; candidates that go to the
        end decide early."""
        doc = {"full": True} if self.search == "full" else {} if self.search == "halving" else {
            **SEARCH, "settle": self.settle, **({"finalists": self.finalists} if self.finalists is not None else {})}
        grid = {"train.lr": list(self.lrs if self.lrs is not None else SCORECARD_LRS)}
        return TuneSpec.build({**doc, "grid": grid, "metric": metric, "decide_early": self.early_stop},
                              where="scorecard search")


@dataclass
class ScorecardOutcome:
    """What :func:`run_scorecard` did: the sweep's outcome and ``scorecard.json``."""

    sweep: SweepOutcome
    doc: dict[str, Any]

    @property
    def out(self) -> Path:
        return self.sweep.out


@dataclass
class ScorecardPlan:
    """What a scorecard will do, known before anything trains: the pre-flight (``sizings``, every
    tunnel and rung), the primitives it leaves out (``left_out``: primitive -> the rung that cannot
    be matched) and the request on the others (``scored``)."""

    request: ScorecardRequest
    scored: ScorecardRequest
    sizings: list[Sizing]
    left_out: dict[str, Sizing]

    def lines(self, out: Path | str | None = None) -> list[str]:
        """The pre-flight and the planned runs, as ``--dry-run`` prints them."""
        from windtunnel.engine.folders import is_finished

        req = self.scored
        sweep = req.sweep()
        runs = expand(sweep, req.override_pairs)
        folder = Path(out) if out is not None else default_out(sweep, req.overrides)
        first = {e for e in {r.experiment for r in runs} if "@" not in e}
        lines = [*preflight_lines(self.sizings), "Planned runs:"]
        if req.tune:
            rates = ", ".join(f"{x:g}" for x in req.search_spec("kl_bayes_model").grid["train.lr"])
            how = {"full": "each trained to the end", "annealed": "the annealed search",
                   "halving": "successive halving"}[req.search]
            lines += [f"  search: {name} on {PRIMITIVES[prim][0]} (the learning rate at {rates}, {how}; "
                      "its winner is the run below)"
                      for prim in chosen_primitives(req.profile, req.primitives)
                      for name in _searched(req, PRIMITIVES[prim][0])]
        for r in runs:
            when = "first" if r.experiment in first or req.full_ladder or not req.rungs else "if the ladder needs it"
            state = "finished" if is_finished(folder / r.name, r.config) else when
            lines.append(f"  {r.name:<44} {r.experiment:<20} {r.config.train.steps} steps  [{state}]")
        if not req.trains_reference:
            lines.append(f"  the transformer's results: {req.reference_source} (not trained)")
        lines.append(f"{len(runs)} runs at most; folder {folder}; nothing trained (--dry-run)")
        return lines


def plan_scorecard(request: ScorecardRequest) -> ScorecardPlan:
    """The pre-flight of ``request``: its model sized on every tunnel and rung; a primitive with a
    rung that cannot be matched is left out (a :class:`ConfigError` when none is left)."""
    sizings = preflight(request.sweep(), request.model, request.override_pairs, request.sets)
    left_out = unmatched(sizings)
    kept = [p for p in chosen_primitives(request.profile, request.primitives) if p not in left_out]
    if not kept:
        raise ConfigError("no tunnel of the scorecard can be matched to the transformer's count: "
                          + "; ".join(f"{p}: {s.error}" for p, s in left_out.items()))
    return ScorecardPlan(request, request.scoring(kept) if left_out else request, sizings, left_out)


def _searched(request: ScorecardRequest, task: str) -> list[str]:
    """The models whose learning rate a scorecard searches on ``task`` (the profile commits none)."""
    committed = load_profile(request.profile, task).get("tuned", {})
    return [m for m in scorecard_models(request.model, request.trains_reference) if m not in committed]


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
        outcome, skipped, failed_runs = _climb(request, sweep, runs, folder, execution,
                                               _replaced(folder, runs, tuned or {}))
    summary = dict(outcome.summary)
    if reference is not None:
        summary["primitives"] = {**(summary.get("primitives") or {}), REFERENCE: reference}
    doc = scorecard_doc(summary, sweep, request.model, outcome.out, tuned, request.override_pairs, skipped=skipped,
                        reference=request.reference_source)
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


def _climb(request: ScorecardRequest, sweep: SweepConfig, runs: list[SweepRun], folder: Path,
           execution: Execution, retired: dict[str, str]) -> tuple[SweepOutcome, set[str], dict[str, str]]:
    """Run the scorecard's sweep: every rung at once (``full_ladder``), or each primitive's ladder
    searched from the profile's own rung, up while it is realised and down while it is not, a
    stage at a time (each a stage of the whole sweep, so the folder takes the scorecard run again);
    returns the last stage's outcome, the experiments it did not need, and the runs that failed
    (name -> error: each ends its primitive's ladder and is not tried again by a later stage)."""
    experiments = {r.experiment for r in runs}
    if request.full_ladder or not request.rungs:
        outcome = _stage(sweep, folder, execution, request, runs, runs, retired)
        return outcome, set(), dict(outcome.failed)
    ladders = {prim: [rule for rule in sweep.primitives.rules if rule.partition("@")[0] == prim]
               for prim in chosen_primitives(request.profile, request.primitives)}
    rules = sweep.primitives.rules
    steps = {prim: Climb(_rung_order(request.profile, prim, names)) for prim, names in ladders.items()}
    chosen = {rules[c.current].experiment for c in steps.values()}
    failed: dict[str, str] = {}
    while True:
        stage = [r for r in runs if r.experiment in chosen and r.name not in failed]
        outcome = _stage(sweep, folder, execution, request, stage, runs, retired)
        failed.update(outcome.failed)
        cells = (outcome.summary.get("primitives") or {}).get(request.model, {})
        more = {rules[nxt].experiment for c in steps.values() if (nxt := c.next(cells.get(c.current))) is not None}
        if not more - chosen:
            return outcome, experiments - chosen, failed
        chosen |= more


def _stage(sweep: SweepConfig, folder: Path, execution: Execution, request: ScorecardRequest, runs: list[SweepRun],
           plan: list[SweepRun], retired: dict[str, str]) -> SweepOutcome:
    """One stage of the scorecard's sweep; a run that fails (its error in ``failed``) ends its
    primitive's ladder there, and the others go on."""
    try:
        return run_sweep(sweep, folder, execution, overrides=request.override_pairs, runs=runs, plan=plan,
                         retired=retired)
    except SweepError as exc:
        if exc.outcome is None:
            raise
        return exc.outcome


def _rung_order(profile: str, prim: str, names: list[str]) -> list[str]:
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
        todo = _searched(request, task)
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
