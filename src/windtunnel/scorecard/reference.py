"""The reference transformer of a scorecard as data: its verdict at every rung of every ladder,
shipped with the package, so that a scorecard trains only the user's model.

A primitive's score is measured against the task's own baselines, never against the transformer;
the transformer's results are context beside it. They are the same in every scorecard of a
profile (the same runs, the same content hashes), so the package ships them
(``windtunnel/data/reference/<profile>.json``): per rung the run's name (its config's hash), the
score and its interval, the verdict, the probe's learning curve and the steps to realise, with
the torch version, the commit, the command and the machine they came from. They are validated
when read (:class:`ReferenceData`), and used only where the scorecard's own reference runs would
have exactly those names (the same configs); otherwise the scorecard says so and asks for
``--reference train`` or a folder of runs.

Made by ``python scripts/ship_reference.py FOLDER`` from a scorecard of the transformer trained
to the full budget on every rung (``windtunnel scorecard transformer --no-tune --full-ladder
--no-early-stop --reference train``).
"""

from __future__ import annotations

import json
import platform
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from windtunnel.config import ConfigError, StrictConfig
from windtunnel.evaluate.record import METRICS, primitive_score, realised_at
from windtunnel.sweep.expand import SweepRun
from windtunnel.sweep.primitives import REFERENCE
from windtunnel.train.rundir import RunDir

SCHEMA = 1


class ReferenceRung(StrictConfig):
    """The reference's result at one rung of one primitive's ladder."""

    rule: str = Field(description="the primitive rule: 'transport', or 'transport@S2_O2' for another rung")
    experiment: str
    run: str = Field(description="the run folder's name: task, model and the content hash of its config")
    n_params: int
    steps: int = Field(description="steps trained")
    budget_steps: int
    metric: Literal["entropy_error", "kl_bayes_model", "accuracy"]
    value: float
    lo: float
    hi: float
    baseline: float
    baseline_name: str
    score: float
    score_lo: float
    score_hi: float
    verdict: Literal["yes", "partial", "no"]
    steps_to_realise: int | None = Field(description="the probe's step of realising (two probes in a row), if realised")
    probe_scores: list[tuple[int, float]] = Field(description="the probe's primitive score at each probe: the learning curve")

    def cell(self) -> dict[str, Any]:
        """As the scorecard's primitives hold a model's result at a rung."""
        return {"score": self.score, "score_lo": self.score_lo, "score_hi": self.score_hi, "n_seeds": 1,
                "verdict": self.verdict, "metric": self.metric, "value": self.value, "baseline": self.baseline,
                "baseline_name": self.baseline_name, "experiment": self.experiment,
                "steps_to_realise": self.steps_to_realise, "budget_steps": self.budget_steps}


class ReferenceData(StrictConfig):
    """A profile's shipped reference, with where it came from."""

    schema_version: Literal[1] = SCHEMA
    profile: str
    model: Literal["transformer"] = REFERENCE
    seeds: list[int]
    torch: str = Field(description="the torch version the runs were trained with")
    commit: str = Field(description="the windtunnel commit they were trained at")
    command: str
    date: str
    machine: str
    concurrent: str = Field(description="what else ran on the machine meanwhile (times are not compared, numbers are)")
    rungs: list[ReferenceRung]

    def by_rule(self) -> dict[str, ReferenceRung]:
        return {r.rule: r for r in self.rungs}


def shipped_path(profile: str):
    return resources.files("windtunnel") / "data" / "reference" / f"{profile}.json"


def load_reference(profile: str) -> ReferenceData | None:
    """The shipped reference of ``profile`` (validated), or None when none is shipped."""
    path = shipped_path(profile)
    if not path.is_file():
        return None
    return ReferenceData.build(json.loads(path.read_text()), where=f"shipped reference ({path})")


def check_applies(data: ReferenceData, runs: list[SweepRun]) -> None:
    """The shipped runs are exactly the reference runs the scorecard would train (the same names:
    the same configs), at every rung it scores; a :class:`ConfigError` naming the first that is not."""
    shipped = {r.experiment: r.run for r in data.rungs}
    for run in runs:
        if shipped.get(run.experiment) != run.name:
            have = shipped.get(run.experiment)
            raise ConfigError(
                f"the shipped reference ({data.profile}, torch {data.torch}, commit {data.commit[:10]}) was trained "
                f"as {have or 'no run'} at {run.experiment}, but this scorecard's reference run there is {run.name} "
                "(an override, another seed or another version changes it): use --reference train (train it here), "
                "--reference FOLDER (runs of your own) or --reference none")


def probe_curve(run_dir: Path, metric: str) -> list[tuple[int, float]]:
    """A run's probe score at each probe: its logged probe values against the best baseline on the
    same probe sequences (the same score the early decision reads)."""
    from windtunnel.evaluate.evaluator import probe_baselines, sample_eval
    from windtunnel.tasks import make_task

    run = RunDir(run_dir)
    tc = run.config.train
    task = make_task(run.config.task, run.config.task_params)
    key = METRICS[metric].probe_key
    base = probe_baselines(task, sample_eval(task, tc.eval_probe_size, tc.seed, "probe"))[key]
    return [(r["step"], primitive_score(metric, r[key], base)) for r in run.metrics() if key in r]


def build_reference(folder: Path, provenance: dict[str, str]) -> ReferenceData:
    """The reference data of a scorecard folder of the transformer, every rung trained to its end."""
    import torch

    from windtunnel.sweep.manifest import read_manifest

    sweep, runs = read_manifest(folder)
    summary = json.loads((Path(folder) / "summary.json").read_text())
    cells = (summary.get("primitives") or {}).get(REFERENCE, {})
    by_experiment = {r.experiment: r for r in runs if r.config.model == REFERENCE}
    rungs = []
    for rule_name, rule in sweep.primitives.rules.items():
        cell, run = cells.get(rule_name), by_experiment.get(rule.experiment)
        if cell is None or run is None:
            raise ConfigError(f"{folder}: no finished reference run for {rule_name}; the reference needs every rung")
        ev = RunDir(Path(folder) / run.name).eval()
        curve = probe_curve(Path(folder) / run.name, rule.metric)
        realised = realised_at(curve, sweep.primitives.realised) if cell["verdict"] == "yes" else None
        rungs.append(ReferenceRung(
            rule=rule_name, experiment=rule.experiment, run=run.name, n_params=ev["n_params"], steps=ev["steps"],
            budget_steps=run.config.train.steps, metric=rule.metric, value=cell["value"],
            lo=_table_end(summary, rule.experiment, rule.metric, "lo"),
            hi=_table_end(summary, rule.experiment, rule.metric, "hi"),
            baseline=cell["baseline"], baseline_name=cell["baseline_name"], score=cell["score"],
            score_lo=cell["score_lo"], score_hi=cell["score_hi"], verdict=cell["verdict"],
            steps_to_realise=realised if realised is not None or cell["verdict"] != "yes" else run.config.train.steps,
            probe_scores=curve))
    return ReferenceData(profile=sweep.profile, seeds=sweep.grid.get("train.seed", [0]), torch=torch.__version__,
                         machine=provenance.get("machine") or f"{platform.machine()} {platform.processor() or ''}".strip(),
                         rungs=rungs, **{k: v for k, v in provenance.items() if k != "machine"})


def _table_end(summary: dict[str, Any], experiment: str, metric: str, end: str) -> float:
    row = next(r for r in summary["table"] if r["experiment"] == experiment and r["model"] == REFERENCE and r["is_main"])
    return row[f"{metric}_{end}"]
