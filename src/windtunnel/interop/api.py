"""The public Python entry points: a trained run back as a model (:func:`load_run`) and a run's
or a sweep's results as one tidy ``pandas.DataFrame`` (:func:`results`).

Both are re-exported lazily by the package root (``windtunnel.load_run``, ``windtunnel.results``),
so ``import windtunnel`` loads neither torch's training stack nor pandas. Both read folders
through :class:`~windtunnel.train.rundir.RunDir` and, for sweeps, the sweep's own aggregation
(:func:`~windtunnel.sweep.aggregate.run_rows` and :func:`~windtunnel.sweep.aggregate.aggregate`,
what writes ``results.csv`` and ``table.csv``), so their numbers are the tables' numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from windtunnel.config import ConfigError, require
from windtunnel.evaluate.record import METRICS as METRIC_SPECS
from windtunnel.sweep.aggregate import aggregate, run_rows
from windtunnel.sweep.expand import SweepRun
from windtunnel.sweep.paper import paper_names
from windtunnel.sweep.run import is_finished, read_manifest
from windtunnel.tasks import Task
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir

if TYPE_CHECKING:
    import pandas

#: the metrics of the tidy table, named as in the sweep tables (``entropy_error`` is eval.json's
#: ``entropy_error_mean_abs``, the mean over sequences and positions of |H_model - H_Bayes|, bits)
METRICS = tuple(METRIC_SPECS)

#: the columns of :func:`results` before the flattened config fields
COLUMNS = (
    "experiment", "run", "task", "model", "length", "main_length", "is_main", "metric",
    "value", "lo", "hi", "mean", "mean_lo", "mean_hi", "sd", "n_seeds", "ci",
    "baseline", "baseline_name", "paper", "paper_source", "n_params", "steps", "train_seconds",
)


@dataclass(frozen=True, eq=False)
class LoadedRun:
    """A trained run, opened: what :func:`load_run` returns."""

    path: Path
    config: RunConfig  #: the resolved config (``config.json``)
    task: Task
    model: torch.nn.Module  #: on the CPU, in eval mode, with the weights of checkpoint ``step``
    step: int
    evaluation: dict[str, Any] | None  #: ``eval.json``, or None when the run was not evaluated


def load_run(path: Path | str, step: int | None = None) -> LoadedRun:
    """The run in folder ``path`` (made by ``windtunnel train``, or one run of a sweep): its task,
    its model in eval mode with the weights of the checkpoint at ``step`` (None: the newest), the
    resolved config and the evaluation (``eval.json``, None before the run is evaluated).

    A folder that is not a run, a corrupt config or checkpoint, or a run without a checkpoint
    raises the errors ``windtunnel eval`` gives (:class:`~windtunnel.config.ConfigError`,
    :class:`~windtunnel.train.checkpoint.CheckpointError`), each naming the file."""
    run = RunDir.open(path)
    config = run.config  # a corrupt config.json is named before its checkpoints are looked at
    at, _ = run.checkpoint(step)
    task, model = run.load_model(at)
    model.eval()
    return LoadedRun(path=run.path, config=config, task=task, model=model, step=at, evaluation=_evaluation(run))


def results(path: Path | str) -> pandas.DataFrame:
    """A run's or a sweep's results, tidy: one row per run x evaluation length x metric.

    ``path`` is a run folder (``config.json``; it must have been evaluated) or a sweep folder
    (``sweep.json``, as ``windtunnel sweep`` and ``windtunnel run`` write it; its finished runs
    count, the unfinished ones are listed in ``df.attrs["missing"]``). Columns:

    - ``experiment`` (None for a single run), ``run`` (the run's folder name), ``task``, ``model``,
      ``length``, ``main_length``, ``is_main`` (the training length), ``metric`` (one of
      :data:`METRICS`);
    - ``value``, ``lo``, ``hi``: the run's estimate and its 95% bootstrap interval over held-out
      sequences (``eval.json``; ``results.csv``);
    - ``mean``, ``mean_lo``, ``mean_hi``, ``sd``, ``n_seeds``, ``ci``: the mean over the seeds of
      the run's group and its 95% interval (``table.csv``: Student's t over seeds, or the
      bootstrap with one seed; ``ci`` says which);
    - ``baseline``, ``baseline_name``: the best of the task's baselines; ``paper``,
      ``paper_source``: the paper's number where there is one (the sweep's ``paper``; for a
      single run, the first known paper that reports this task and model);
    - ``n_params``, ``steps``, ``train_seconds``;
    - every field of the run's resolved config, flattened: ``task_params.V``,
      ``model_params.d_model``, ``train.lr``, ``train.seed``, ``eval.lengths`` (lists as JSON text).

    Needs pandas (the ``data`` extra); without it a :class:`~windtunnel.config.ConfigError` gives
    the command that installs it."""
    pd = require("pandas", "data", "windtunnel.results")
    folder = Path(path)
    if (folder / "sweep.json").is_file():
        rows, configs, paper, missing = _sweep_rows(folder)
    elif RunDir(folder).is_run():
        rows, configs, paper, missing = _run_rows(folder)
    else:
        raise ConfigError(f"{folder} is neither a run folder (no config.json) nor a sweep folder (no sweep.json)")
    tidy = _tidy(rows, aggregate(rows, paper) if rows else [], configs)
    columns = list(COLUMNS)
    for r in tidy:
        columns.extend(k for k in r if k not in columns)
    df = pd.DataFrame(tidy, columns=columns)
    df.attrs["missing"] = missing
    return df


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
def _evaluation(run: RunDir) -> dict[str, Any] | None:
    try:
        return run.eval()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the evaluation {run.eval_path}: {exc}; "
                          f"`windtunnel eval {run.path}` writes it again") from None


def _sweep_rows(folder: Path):
    """``results.csv``'s rows of the sweep's finished runs (as ``write_tables`` builds them)."""
    sweep, runs = read_manifest(folder)
    rows, configs, missing = [], {}, []
    for run in runs:  # a run shared by two experiments gives rows to both
        if is_finished(folder / run.name, run.config):
            rows.extend(run_rows(run, RunDir(folder / run.name).eval()))
            configs[run.name] = run.config
        elif run.name not in missing:
            missing.append(run.name)
    return rows, configs, sweep.paper, missing


def _run_rows(folder: Path):
    """One run's rows, as a sweep would give them (its folder name as the run's name)."""
    run = RunDir.open(folder)
    ev = _evaluation(run)
    if ev is None:
        raise ConfigError(f"{folder} has not been evaluated (no eval.json); `windtunnel eval {folder}` evaluates it")
    rows = run_rows(SweepRun(run.config, None), ev)  # type: ignore[arg-type]  # no experiment
    name = run.path.resolve().name
    for r in rows:
        r["run"] = name
    paper = next((p for p in paper_names() if _any_paper_value(rows, p)), None)
    return rows, {name: run.config}, paper, []


def _any_paper_value(rows: list[dict[str, Any]], paper: str) -> bool:
    return any(k.startswith("paper_") for row in aggregate(rows, paper) for k in row)


def flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys (``{"train": {"lr": 1e-3}}`` -> ``{"train.lr": 1e-3}``); lists
    (and empty dicts) as JSON text, so that every cell can be grouped on and written to parquet."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        elif isinstance(v, (list, tuple, dict)):
            out[f"{prefix}{k}"] = json.dumps(v)
        else:
            out[f"{prefix}{k}"] = v
    return out


def _tidy(rows: list[dict[str, Any]], table: list[dict[str, Any]],
          configs: dict[str, RunConfig]) -> list[dict[str, Any]]:
    """Wide rows (one per run and length) -> one per run, length and metric, each with its
    group's mean over seeds (matched by experiment, run and length) and the run's config."""
    groups = {(g["experiment"], name, g["length"]): g for g in table for name in g["runs"].split()}
    flat = {name: flatten(cfg.model_dump(mode="json")) for name, cfg in configs.items()}
    out = []
    for r in rows:
        g = groups[(r["experiment"], r["run"], r["length"])]
        for m in METRICS:
            if r.get(m) is None:
                continue
            out.append({
                "experiment": r["experiment"], "run": r["run"], "task": r["task"], "model": r["model"],
                "length": r["length"], "main_length": r["main_length"], "is_main": r["is_main"], "metric": m,
                "value": r[m], "lo": r[f"{m}_lo"], "hi": r[f"{m}_hi"],
                "mean": g.get(m), "mean_lo": g.get(f"{m}_lo"), "mean_hi": g.get(f"{m}_hi"), "sd": g.get(f"{m}_sd"),
                "n_seeds": g["n_seeds"], "ci": g["ci"],
                "baseline": r.get(f"baseline_{m}"), "baseline_name": r.get(f"baseline_{m}_name"),
                "paper": g.get(f"paper_{m}"), "paper_source": g.get(f"paper_{m}_source"),
                "n_params": r["n_params"], "steps": r["steps"], "train_seconds": r["train_seconds"],
                **{k: v for k, v in flat[r["run"]].items() if k not in ("task", "model")},
            })
    return out
