"""What a scorecard will do, known before anything trains: :class:`ScorecardPlan` (the capacity
pre-flight, the primitives it leaves out, the request on the others), made by
:func:`plan_scorecard`, and the runs ``--dry-run`` lists."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from windtunnel.config import ConfigError
from windtunnel.scorecard.document import chosen_primitives, scorecard_models
from windtunnel.scorecard.preflight import Sizing, preflight, preflight_lines, unmatched
from windtunnel.scorecard.request import ScorecardRequest
from windtunnel.sweep.expand import expand
from windtunnel.sweep.manifest import default_out
from windtunnel.sweep.primitives import PRIMITIVES
from windtunnel.train.config import load_profile


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
                   "halving": "successive halving"}[req.lr_search.search]
            lines += [f"  search: {name} on {PRIMITIVES[prim][0]} (the learning rate at {rates}, {how}; "
                      "its winner is the run below)"
                      for prim in chosen_primitives(req.profile, req.primitives)
                      for name in searched_models(req, PRIMITIVES[prim][0])]
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


def searched_models(request: ScorecardRequest, task: str) -> list[str]:
    """The models whose learning rate a scorecard searches on ``task`` (the profile commits none)."""
    committed = load_profile(request.profile, task).get("tuned", {})
    return [m for m in scorecard_models(request.model, request.trains_reference) if m not in committed]
