"""One scorecard as it is asked for: :class:`ScorecardRequest`, with its learning-rate search
(:class:`ScorecardSearch`: the settings ``windtunnel tune`` takes, with the scorecard's defaults)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from windtunnel.compat import SCORECARD_SEARCH_KEYS, moved_to, scorecard_search
from windtunnel.config import ConfigError
from windtunnel.scorecard.document import ScorecardRuns, chosen_primitives, scorecard_sweep
from windtunnel.scorecard.reference import check_applies, load_reference
from windtunnel.sweep.config import SweepConfig, _WithOverrides
from windtunnel.sweep.expand import SweepRun, expand
from windtunnel.sweep.primitives import PRIMITIVES, REFERENCE
from windtunnel.sweep.shape import ModelSets, parse_model_sets, sets_within
from windtunnel.tune.settings import Search, SearchSettings, TuneSpec

#: the candidates of a scorecard's learning-rate search: the three central rates of the tuning grid
#: (DEFAULT_LRS without 1e-4 and 3.16e-4). Every winner of the sixteen recorded reversals is one of
#: them, each trained to the end (benchmarks/study_candidates.py, docs/results/tuning.md)
SCORECARD_LRS = [1e-3, 3.16e-3, 1e-2]


class ScorecardSearch(SearchSettings):
    """The scorecard's learning-rate search: :class:`~windtunnel.tune.settings.SearchSettings` with
    the scorecard's defaults: every candidate trained to the end (``search = full``), over
    :data:`SCORECARD_LRS` where ``lrs`` is None; the annealed search, where chosen, settles."""

    search: Search = Field("full", description=SearchSettings.model_fields["search"].description)
    lrs: list[float] | None = Field(None, min_length=1, description="the learning rates searched (None: SCORECARD_LRS, "
                                    "1e-3, 3.16e-3 and 1e-2)")
    settle: bool = Field(True, description=SearchSettings.model_fields["settle"].description)


class ScorecardRequest(_WithOverrides):
    """One scorecard: ``model`` (a registered architecture or a user's ``package.module:Class``)
    beside the reference transformer, at the ``profile``'s budget, with ``seeds`` seeds, on the
    chosen ``primitives`` (None: every one the profile has a tunnel for); ``overrides``
    (``section.field=value`` text, as on the command line) apply to every run; ``lr_search`` is
    how a learning rate is searched where ``tune`` searches one."""

    model: str = Field(min_length=1)
    profile: str = "quick"
    seeds: int = Field(1, ge=1, le=100, description="seeds 0..N-1 per run")
    primitives: list[str] | None = None
    rungs: bool = Field(True, description="score the rungs of each tunnel's difficulty ladder, or its own setting alone")
    full_ladder: bool = Field(False, description="every rung of every ladder (else the ladder is searched from the "
                              "profile's own rung: up while realised, down while not)")
    tune: bool = Field(True, description="search the learning rate of every model the profile commits none for")
    lr_search: ScorecardSearch = Field(default_factory=ScorecardSearch, description="how the learning rate is searched "
                                       "(search, lrs, settle, finalists)")
    early_stop: bool = Field(True, description="a run stops once its probe and evaluation agree the primitive is realised")
    reference: str = Field("auto", description="the transformer's results: auto (shipped where the profile ships "
                           "them for these runs, else train), shipped (the package's data), train, none, or a "
                           "folder holding its runs")
    overrides: list[str] = Field(default_factory=list, description="section.field=value for every run")
    model_sets: list[str] = Field(default_factory=list, description="field=value (every tunnel) or TUNNEL.field=value "
                                  "(one tunnel): a field of the scored model's config, for its runs alone")

    _sets: ModelSets = PrivateAttr(default_factory=dict)

    # the search settings' names before they were nested, read with a warning (windtunnel.compat)
    search, lrs, settle, finalists = (moved_to("lr_search", name) for name in SCORECARD_SEARCH_KEYS)

    @model_validator(mode="before")
    @classmethod
    def _flat_search(cls, data: Any) -> Any:
        """The search settings given flat (before ``lr_search``): deprecated, read into it."""
        return scorecard_search(data)

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
        given = {k: v for k in ("lrs", "finalists") if (v := getattr(self.lr_search, k)) is not None}
        if given and not self.tune:
            name, value = next(iter(given.items()))
            raise ValueError(f"lr_search.{name} = {value}: a setting of the learning-rate search; tune = false "
                             "(no search) runs none")
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
        runs = ScorecardRuns(tuned, train_reference=with_ref, decide_early=self.early_stop, model_sets=self._sets)
        return scorecard_sweep(self.model, self.profile, self.seeds, self.primitives, self.rungs, runs)

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
        """How each learning rate is searched (``lr_search``: every candidate to the end, the
        annealed search with the plateau guard, or the plain halving, over its ``lrs`` or
        :data:`SCORECARD_LRS`), ranked by ``metric``; candidates that go to the end decide early."""
        return self.lr_search.spec(SCORECARD_LRS, metric=metric, decide_early=self.early_stop)
