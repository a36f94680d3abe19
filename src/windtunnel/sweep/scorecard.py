"""The primitive scorecard of one architecture: a small sweep, scored against exact posteriors.

``windtunnel scorecard MODEL`` trains MODEL (a registered name or a user's
``package.module:Class``) and the reference transformer on the three primitive tunnels of Paper I
(bijection: accumulation; HMM: transport; recall: binding) plus in-context regression
(continuous beliefs) and SULA, each capacity-matched to the transformer, with the budget of
``paper1-quick`` (the quick profiles) or the paper's (``--profile paper``). It is an ordinary
sweep (run folders, resume, the Ray backend, tables, ``windtunnel report``); this module only
builds its config and reads its primitives into ``scorecard.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError
from windtunnel.files import atomic_write_text, jsonable
from windtunnel.sweep.config import SweepConfig, load_sweep
from windtunnel.train.config import profile_tasks

#: primitive -> (task, metric scored at the training length), in the scorecard's order
PRIMITIVES: dict[str, tuple[str, str]] = {
    "accumulation": ("bijection", "kl_bayes_model"),
    "transport": ("hmm", "kl_bayes_model"),
    "binding": ("recall", "accuracy"),
    "continuous": ("regression", "kl_bayes_model"),
    "sula": ("sula", "kl_bayes_model"),
}
REFERENCE = "transformer"
#: the shipped sweep whose budget (its overrides, e.g. one thread per run, and jobs) each profile's scorecard takes
BUDGET = {"quick": "paper1-quick", "paper": "paper1"}
SCORECARD_FILE = "scorecard.json"


def scorecard_sweep(model: str, profile: str = "quick", seeds: int = 1,
                    primitives: list[str] | None = None) -> SweepConfig:
    """The sweep behind a scorecard: one experiment per primitive's task, MODEL beside the
    transformer (capacity-matched to it), ``seeds`` seeds, the primitive rules."""
    have = profile_tasks(profile)
    if primitives is None:  # every primitive whose tunnel the profile has (paper: the three of Paper I)
        chosen = [p for p, (task, _) in PRIMITIVES.items() if task in have]
    else:
        chosen = primitives
    unknown = [p for p in chosen if p not in PRIMITIVES]
    if unknown or not chosen:
        raise ConfigError(f"primitives {unknown or chosen}: choose from {', '.join(PRIMITIVES)}")
    lacking = [PRIMITIVES[p][0] for p in chosen if PRIMITIVES[p][0] not in have]
    if lacking:
        raise ConfigError(f"profile '{profile}' has no config for task(s) {', '.join(lacking)}; it has: {', '.join(have)}")
    models = [REFERENCE] if model == REFERENCE else [REFERENCE, model]
    budget = load_sweep(BUDGET[profile]) if profile in BUDGET else None
    doc = {
        "name": f"scorecard-{model.replace(':', '.')}",
        "description": (f"Primitive scorecard of {model} beside the transformer ({profile} profiles, "
                        f"{seeds} seed{'s' if seeds > 1 else ''}; every model matched to the transformer's count)."),
        "profile": profile,
        "paper": "paper1",
        "grid": {"train.seed": list(range(seeds))},
        "experiments": [{"task": PRIMITIVES[p][0], "models": models, "match_capacity": REFERENCE} for p in chosen],
        "primitives": {"rules": {p: {"experiment": PRIMITIVES[p][0], "metric": PRIMITIVES[p][1]} for p in chosen}},
    }
    if budget is not None:
        doc.update(overrides=budget.overrides, jobs=budget.jobs)
    return SweepConfig.build(doc, where="scorecard")


def scorecard_doc(summary: dict[str, Any], sweep: SweepConfig, model: str) -> dict[str, Any]:
    """``scorecard.json``: per primitive the model's and the transformer's score, interval and verdict."""
    prims = summary.get("primitives") or {}
    rows = {}
    for prim, rule in sweep.primitives.rules.items():
        rows[prim] = {"task": rule.experiment, "metric": rule.metric,
                      "model": prims.get(model, {}).get(prim), REFERENCE: prims.get(REFERENCE, {}).get(prim)}
    return {"model": model, "reference": REFERENCE, "profile": sweep.profile, "seeds": sweep.grid["train.seed"],
            "realised": sweep.primitives.realised, "partial": sweep.primitives.partial,
            "finished": summary["finished"], "n_runs": summary["n_runs"], "missing": summary["missing"],
            "primitives": rows}


def write_scorecard(out: Path, summary: dict[str, Any], sweep: SweepConfig, model: str) -> dict[str, Any]:
    """Write ``scorecard.json`` into the sweep folder ``out`` (a score that is not a number is null)."""
    doc = jsonable(scorecard_doc(summary, sweep, model))
    atomic_write_text(Path(out) / SCORECARD_FILE, json.dumps(doc, indent=1, allow_nan=False))
    return doc
