"""The report page of one run (``windtunnel report RUN``): calibration against the exact posterior at
every evaluated length, the baselines, the plots, training, geometry and the config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from windtunnel.evaluate.metrics import ABS_MEAN_KEY
from windtunnel.evaluate.record import METRICS, SCORED_METRICS
from windtunnel.report import plots
from windtunnel.report.shared import FILES, geometry_section, image, main_curves, probe_curve
from windtunnel.report.text import _config_block
from windtunnel.tables import table


def _ci(m: dict[str, float] | None, digits: int = 4) -> str:
    if m is None:
        return "-"
    return f"{m['value']:.{digits}f} [{m['lo']:.{digits}f}, {m['hi']:.{digits}f}]"


def _calibration_tables(ev: dict[str, Any]) -> list[str]:
    """A run's calibration at each evaluated length (the headline metrics of
    :data:`~windtunnel.evaluate.record.METRICS`, with the entropy error's other aggregation beside
    it, each with its interval) and its baselines' (the scored metrics)."""
    e = METRICS["entropy_error"]
    columns = [(e.eval_key, e.heading, e.digits), (ABS_MEAN_KEY, "|mean dH| (bits)", e.digits),
               *((m.eval_key, m.heading, m.digits) for m in METRICS.values() if m is not e)]
    body = [[f"{L}" + (" (train)" if L == str(ev["main_length"]) else ""), *(_ci(s.get(k), d) for k, _, d in columns)]
            for L, s in ev["lengths"].items()]
    lines = table(["length", *(h for _, h, _ in columns)], body)
    scored = [METRICS[m] for m in SCORED_METRICS]
    body = [[name, L, *(f"{b[m.eval_key]:.{m.digits}f}" if m.eval_key in b else "-" for m in scored)]
            for L, base in ev["baselines"].items() for name, b in base.items()]
    return lines + [""] + table(["baseline", "length", *(m.heading for m in scored)], body)


def run_report(run_dir: Path) -> tuple[str, str]:
    from windtunnel.train.rundir import RunDir

    run = RunDir(run_dir)
    cfg = run.config
    ev = run.eval()
    title = f"windtunnel report: run {run_dir.name}"
    lines = [f"# {title}", "",
             f"Task **{cfg.task}** `{json.dumps(cfg.task_params)}`, model **{cfg.model}**, profile `{cfg.profile}`, "
             f"seed {cfg.train.seed}, {cfg.train.steps} steps of batch {cfg.train.batch_size}.", ""]
    if ev is None:
        lines += ["**This run has no evaluation yet** (`windtunnel train` resumes it; `windtunnel eval` evaluates "
                  "its last checkpoint).", ""]
    else:
        lines += [f"{ev['n_params']:,} parameters, {ev['steps']} steps, {ev['train_seconds']:.0f} s of training.", "",
                  "## Calibration against the exact posterior", ""]
        lines += _calibration_tables(ev)
        files = run_dir / FILES
        plots.calibration_plot({"model": main_curves(ev)}, files / "calibration.png", title=f"{cfg.task}: {cfg.model}")
        lines += ["", image(f"{FILES}/calibration.png", "calibration"), ""]
        if len(ev["lengths"]) > 1:
            plots.length_plot({L: {**s, "step": s["step"]} for L, s in ev["lengths"].items()}, files / "lengths.png",
                              title="length generalisation")
            lines += ["## Length generalisation", "", image(f"{FILES}/lengths.png", "length generalisation"), ""]
        steps, err = probe_curve(run_dir)
        if steps:
            plots.training_curves_plot({cfg.model: (steps, err)}, files / "training.png", title="training")
            lines += ["## Training", "", image(f"{FILES}/training.png", "training curve"), ""]
    geo = geometry_section(run_dir, ".", level=3)
    if geo:
        lines += ["## Geometry", ""] + geo
    lines += ["## Run config", ""] + _config_block(cfg.model_dump(mode="json"))
    return title, "\n".join(lines)
