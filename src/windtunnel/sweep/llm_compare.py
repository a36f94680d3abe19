"""Run a comparison of language models: each model one job of the one job runner, then the comparison.

    from windtunnel.llm.compare_config import load_config
    from windtunnel.sweep.llm_compare import run_comparison
    run_comparison(load_config("paper3-offline"), "runs/paper3-offline", Execution())

The folder holds ``compare.json`` (the comparison and its resolved models), one folder per model
with what ``windtunnel llm MODEL`` writes (``llm.json``, ``llm.md``, plots), or ``failed.json``
(the error) for a model that failed, ``models/`` (tiny random-weight models built for it), and
the comparison of :mod:`windtunnel.llm.compare` (``table.csv``, ``summary.json``, ``summary.md``,
figures). Locally the models run one after another in this process (each with every core); with
``--backend ray`` each is one Ray task (``resources`` of the comparison: e.g. one GPU). A model
whose folder holds a finished ``llm.json`` of the same options is skipped, so running the
comparison again continues it; a model that fails is recorded and the others go on.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError
from windtunnel.engine.execution import Execution
from windtunnel.engine.jobs import Job, Outcome, run_jobs
from windtunnel.files import atomic_write_text
from windtunnel.llm.compare_config import MANIFEST, CompareConfig, PlannedModel, plan


def run_model(source: str, analyses: list[str], folder: str, options: dict[str, Any], progress: bool = False) -> dict:
    """One model's job: ``run_llm`` into ``folder`` (``progress``: its bar on stderr); returns
    ``llm.json``'s document."""
    from windtunnel.llm.run import run_llm

    return run_llm(source, analyses, Path(folder), resume=True, progress=progress, **options)


def _same_model(model: PlannedModel, recorded: str | None) -> bool:
    """The run in a folder is of this model: a random model is its folder; a package's file is the
    same file wherever an environment installs the package (package folder and file name)."""
    if model.kind == "random":
        return True
    if model.kind == "package":
        return recorded is not None and Path(recorded).parts[-2:] == Path(model.source).parts[-2:]
    return recorded == model.source


def finished(folder: Path, model: PlannedModel, analyses: list[str]) -> bool:
    """``folder/llm.json`` is this model's finished run with these analyses and options, judged
    against its finished controls; a finished run of other settings is an error (nothing is
    overwritten). A run whose controls are not all finished is not: its job reads the run and
    analyses the controls that are missing."""
    from windtunnel.llm.analysis_pass import finished_run
    from windtunnel.llm.control import finished_controls

    try:
        doc = finished_run(folder, analyses, model.options)
    except ConfigError as exc:
        raise ConfigError(f"model '{model.name}': {exc}") from None
    if doc is None:
        return False
    if not _same_model(model, doc.get("model", {}).get("name")):
        raise ConfigError(f"{folder} holds a run of another model than '{model.name}'; choose another --out or remove "
                          "that folder (nothing was overwritten)")
    return "claims" in doc and finished_controls(folder, analyses, model.options) is not None


def _keep_here(folder: Path):
    """A Ray task on another node wrote its own copy: keep its llm.json here too."""
    def after(doc: dict) -> None:
        if doc and not (folder / "llm.json").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(folder / "llm.json", json.dumps(doc, indent=1, allow_nan=False))
    return after


def _manifest(config: CompareConfig, analyses: list[str], models: list[PlannedModel]) -> dict[str, Any]:
    return {"kind": "llm-compare", "config": config.model_dump(mode="json"), "analyses": analyses,
            "models": [m.describe() for m in models]}


def run_comparison(config: CompareConfig, out: Path | str, execution: Execution | None = None, *,
                   cli_options: dict[str, Any] | None = None, extra_models: list[str] = ()) -> dict[str, Any]:
    """Run every model of ``config`` (plus ``extra_models``) that is not finished in ``out``, then
    write the comparison; returns its ``summary.json`` document. Bad input raises
    :class:`ConfigError` before anything is written."""
    from windtunnel.llm.compare import write_comparison
    from windtunnel.llm.tiny import build_saved

    execution = execution or Execution()
    out = Path(out)
    analyses, models = plan(config, out, cli_options, extra_models)  # every check, before anything is written
    if (out / MANIFEST).is_file():
        old = json.loads((out / MANIFEST).read_text())
        if old.get("kind") != "llm-compare":
            raise ConfigError(f"{out} holds something other than a comparison of language models; choose another --out")
    todo = [m for m in models if not finished(out / m.folder, m, analyses)]
    if execution.backend == "local":
        execution = execution.but(workers=1)  # one model at a time, each with every core
    log = execution.log
    with execution.workspace(out, "comparison") as stop:
        atomic_write_text(out / MANIFEST, json.dumps(_manifest(config, analyses, models), indent=1))
        log(f"comparison {config.name}: {len(models)} models in {out}; {len(models) - len(todo)} finished (skipped), "
            f"{len(todo)} to run")
        for m in todo:
            if m.random is not None:
                build_saved(m.random, m.source)
        res = config.resources.model_dump(exclude_none=True)
        jobs = [Job(m.folder, run_model, (m.source, analyses, str((out / m.folder).resolve()), m.options.model_dump(),
                                          execution.progress),
                    label=f"{m.name} ({m.kind})", resources=res,
                    after=_keep_here(out / m.folder) if execution.backend == "ray" else None) for m in todo]
        outcomes = run_jobs(jobs, execution, stop) if jobs else {}
        record_outcomes(out, models, outcomes)
        return write_comparison(out)


def record_outcomes(out: Path, models: list[PlannedModel], outcomes: dict[str, Outcome]) -> None:
    """``failed.json`` in the folder of each model that failed (its error and time); removed from
    each that finished."""
    for m in models:
        o = outcomes.get(m.folder)
        if o is None:
            continue
        path = out / m.folder / "failed.json"
        if o.status == "failed":
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps({"model": m.name, "source": m.source, "error": o.error,
                                                "seconds": o.seconds,
                                                "when": datetime.datetime.now().isoformat(timespec="seconds")}, indent=1))
        elif o.status == "finished":
            path.unlink(missing_ok=True)
