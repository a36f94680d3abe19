"""What a search is asked to do: :class:`TuneSpec`, the spec a search runs (its grid and how its
candidates are compared), and :class:`SearchSettings`, the choices a user makes of it (which
search, over which learning rates, and the annealed search's two options), shared by
``windtunnel tune`` and the scorecard. :func:`named_search` turns a search named by those choices
into the spec's settings (the annealed search is :data:`SEARCH`'s settings under the ones named).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import AliasChoices, Field, model_validator

from windtunnel.config import ConfigError, StrictConfig
from windtunnel.evaluate.record import ScoredMetric
from windtunnel.sweep.config import Grid
from windtunnel.tune.rules import PLATEAU_SPREAD

#: np.logspace(-4, -2, 5), to three significant digits
DEFAULT_LRS = [1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2]
#: the search `windtunnel tune` and the scorecard run: annealed comparisons (a cooldown branch of
#: 0.2 x the comparison step), the plateau guard at a probe score of 0.5, ties kept, and at the last
#: comparison every rate within 15% of the leader trained to the end (measured on the sixteen
#: recorded reversals: 14 of 16 against 10 at 2%, docs/results/tuning.md); TuneSpec() alone is the
#: plain halving of before
SEARCH: dict[str, Any] = {"cooldown": 0.2, "guard": 0.5, "keep_ties": True, "finalists": 0.15}
#: how a search compares its candidates: every candidate trained to the end, the annealed search
#: with the plateau guard (:data:`SEARCH`), or the plain successive halving
Search = Literal["full", "annealed", "halving"]


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
    cooldown: float = Field(0.0, ge=0, le=1, description="compare each candidate after annealing it: a branch from the "
                            "comparison step s whose learning rate decays linearly to 0 over cooldown x s steps (0: "
                            "compare the runs as they are)")
    guard: float | None = Field(None, ge=0, le=1, description="plateau guard: while the leader's probe score is below "
                                "it, no candidate is stopped (None: off)")
    settle: bool = Field(False, description="when the guard holds at the last comparison, train every candidate it kept "
                         "to the end (else keep the leader and record the others as unsettled)")
    keep_ties: bool = Field(False, description="keep every candidate within 2% of the leader at a comparison (at the "
                            "last one, within `finalists`)")
    finalists: float = Field(PLATEAU_SPREAD, ge=0, lt=1, description="with keep_ties, at the last comparison: every "
                             "candidate within this relative spread of the leader trains to the end, and the best at "
                             "the end wins (a wider spread never picks worse, and costs its finalists)")
    keep_points: bool = Field(False, description="keep each candidate's resumable checkpoint at each comparison (in "
                              "points/), so that other cooldowns can be branched from it later (a study of the search)")
    decide_early: bool = Field(False, description="candidates trained to the end stop where their probe and evaluation "
                               "agree that the primitive is realised (windtunnel.train.decide)")

    @model_validator(mode="after")
    def _check(self):
        r = self.compare_at
        if any(not 0 < f < 1 for f in r) or any(b <= a for a, b in zip(r, r[1:])):
            raise ValueError(f"compare_at = {r}: fractions of the run, increasing, each in (0, 1)")
        if self.finalists != PLATEAU_SPREAD and (self.full or not self.keep_ties):
            search = ("the full search (every candidate trained to the end)" if self.full else
                      "a search that keeps no ties (the plain halving, or keep_ties = false)")
            raise ValueError(f"finalists = {self.finalists:g}: the spread of the rates trained to the end after the "
                             f"annealed search's last comparison (its ties kept); {search} has no such comparison")
        return self

    def to_json(self) -> dict[str, Any]:
        """As ``tune-*.json`` records it (the comparison settings only where there are comparisons)."""
        doc = self.model_dump(mode="json", by_alias=True)
        off = {"cooldown": 0.0, "guard": None, "settle": False, "keep_ties": False, "keep_points": False,
               "decide_early": False, "finalists": PLATEAU_SPREAD}  # as searches were before them
        return {k: v for k, v in doc.items() if not (k in off and (v == off[k] or (self.full and k != "decide_early")))}


def named_search(named: dict[str, Any]) -> dict[str, Any]:
    """The settings of a :class:`TuneSpec` whose search is named: ``search`` (full, annealed or
    halving; ``full: true`` or ``halving: true`` name it too; none: annealed) over the settings
    given. The annealed search is :data:`SEARCH`'s settings under the ones given (``"keep_ties":
    false`` drops its finalists' spread with the ties); the full search and the plain halving are
    what is given alone."""
    named = dict(named)
    halving, search = bool(named.pop("halving", False)), named.pop("search", None)
    if named.get("full") and halving:
        raise ValueError("full and halving: choose one search (search = full, annealed or halving)")
    implied = "full" if named.get("full") else "halving" if halving else None
    if search is not None and search not in ("full", "annealed", "halving"):
        raise ValueError(f"search = {search!r}: full, annealed or halving")
    if search is not None and implied is not None and search != implied:
        raise ValueError(f"search = {search!r} and {implied} = true disagree: give search alone")
    search = search or implied or "annealed"
    if search == "full":
        named["full"] = True
    elif search == "annealed":
        defaults = {k: v for k, v in SEARCH.items() if not (k == "finalists" and named.get("keep_ties") is False)}
        named = {**defaults, **named}
    return named


class SearchSettings(StrictConfig):
    """A learning-rate search as a user chooses it: which search (``search``), over which rates
    (``lrs``; None: the caller's grid), and the annealed search's two choices (``settle``,
    ``finalists``). ``windtunnel tune`` and the scorecard take these settings, with the same
    options; :meth:`spec` is the :class:`TuneSpec` they run. The defaults are ``windtunnel
    tune``'s (the scorecard's are :class:`~windtunnel.scorecard.request.ScorecardSearch`)."""

    search: Search = Field("annealed", description="how a learning rate is searched: full (every candidate trained to "
                           "the end, the best at the end wins), annealed (annealed comparisons with the plateau guard) "
                           "or halving (the plain successive halving: no cooldown, guard or ties)")
    lrs: list[float] | None = Field(None, min_length=1, description="the learning rates searched (None: the caller's "
                                    "grid)")
    settle: bool = Field(False, description="the annealed search: where the plateau guard could not rule out a stopped "
                         "rate, train it to the end, so that no verdict is left undecided (False: the faster search "
                         "that marks such a verdict ?)")
    finalists: float | None = Field(None, ge=0, lt=1, description="the annealed search's spread at its last comparison: "
                                    "every rate within it of the leader trains to the end (None: the default, 0.15)")

    @model_validator(mode="after")
    def _check(self):
        if self.lrs is not None and (any(not (math.isfinite(x) and x > 0) for x in self.lrs)
                                     or len(set(self.lrs)) != len(self.lrs)):
            raise ValueError(f"lrs = {self.lrs}: distinct learning rates, each positive and finite")
        TuneSpec.model_validate(named_search(self.named()))  # the spec's own rules (finalists: a last comparison)
        return self

    def named(self, lrs: list[float] | None = None, **settings: Any) -> dict[str, Any]:
        """These settings, with the spec's other ``settings`` (``metric``, ``grid``, ...), as a
        :class:`TuneSpec` mapping that names its search (:func:`named_search` applies the search's
        own): the rates (``lrs`` where these name none) as the grid's ``train.lr``, ``settle``
        where the search is annealed, ``finalists`` where given."""
        doc: dict[str, Any] = {"search": self.search, **settings}
        rates = self.lrs if self.lrs is not None else lrs
        if rates is not None:
            grid = dict(doc.get("grid") or {})
            if "train.lr" in grid:
                raise ConfigError("lrs and the grid's train.lr: give the learning rates once")
            doc["grid"] = {**grid, "train.lr": list(rates)}
        if self.search == "annealed":
            doc["settle"] = self.settle
        if self.finalists is not None:
            doc["finalists"] = self.finalists
        return doc

    def spec(self, lrs: list[float] | None = None, **settings: Any) -> TuneSpec:
        """The :class:`TuneSpec` of this search (over ``lrs`` where these settings name no rates),
        with the spec's other ``settings`` (``metric``, ``decide_early``, ...)."""
        return TuneSpec.build(named_search(self.named(lrs, **settings)), where="search")
