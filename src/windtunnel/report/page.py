"""`windtunnel report DIR`: one self-contained page (``report.html`` and ``report.md``) for a run or a sweep.

The page is written as markdown first (plots in ``report_files/``); the HTML is that markdown
rendered with Python-Markdown, every image inlined as a base64 data URI, so the single
``report.html`` opens in a browser from disk with no server and no other files.

A sweep page (any folder with ``sweep.json``, including `windtunnel run`'s) has: the comparison
table of every experiment with the paper's numbers beside ours, the inference primitives, and per
experiment the per-position calibration of all architectures, length generalisation, accuracy
(associative recall), training curves, and the geometric diagnostics of every run that has them.
A run page has the same for one run.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError
from windtunnel.evaluate.record import METRICS
from windtunnel.files import atomic_write_text
from windtunnel.report import plots, scorecard
from windtunnel.report.run_page import run_report
from windtunnel.report.shared import FILES, geometry_section, image, main_curves, probe_curve, read_eval, still_learning
from windtunnel.report.standalone import to_html
from windtunnel.report.text import _config_block, _demote
from windtunnel.tables import table


# ---------------------------------------------------------------------------------------
# A sweep
# ---------------------------------------------------------------------------------------
def sweep_report(folder: Path) -> tuple[str, str]:
    from windtunnel.sweep import read_manifest
    from windtunnel.sweep.markdown import sweep_markdown
    from windtunnel.sweep.run import is_finished, summarise

    sweep, runs = read_manifest(folder)
    old = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").is_file() else {}
    summary, _ = summarise(folder, sweep, runs, old.get("failed"))  # from what has finished; no file is rewritten
    title = f"windtunnel report: sweep {sweep.name}"
    lines = [sweep_markdown(summary, sweep, title), ""]
    # under the summary's ladder table: a scorecard's heat maps hold its reference and the rungs it skipped
    lines += scorecard.ladder_section(folder) if scorecard.load(folder) else sweep_ladders_section(folder, sweep, summary)
    lines += scorecard.scorecard_section(folder)
    lines += tune_section(folder)
    lines += claims_section(folder, runs)
    # each experiment's primitive metric (the sweep's rules)
    rule_metric = {e: r.metric for r in (sweep.primitives.rules.values() if sweep.primitives else []) for e in r.experiments()}
    for i, exp in enumerate(dict.fromkeys(r.experiment for r in runs)):
        members = [r for r in runs if r.experiment == exp and is_finished(folder / r.name, r.config)]
        if members:
            rows = [r for r in summary["table"] if r["experiment"] == exp]
            lines += experiment_section(folder, exp, f"{i}_" + re.sub(r"[^A-Za-z0-9_-]", "_", exp), members, rows,
                                        rule_metric.get(exp))
    lines += ["## Sweep config", ""] + _config_block(sweep.model_dump(mode="json"))
    return title, "\n".join(lines)


def _grid_label(row: dict[str, Any]) -> str:
    """A table row's model and non-seed grid point (its ``grid:`` columns), as a legend label."""
    grid = " ".join(f"{k.removeprefix('grid:')}={v}" for k, v in row.items() if k.startswith("grid:"))
    return f"{row['model']} {grid}".strip()


def experiment_section(folder: Path, exp: str, slug: str, members: list, rows: list[dict[str, Any]],
                       rule_metric: str | None) -> list[str]:
    """One experiment of a sweep: calibration of every architecture, length generalisation,
    accuracy (when the experiment is read by it), training curves, geometry and its runs.
    ``members``: its finished runs; ``rows``: its rows of the summary table; ``rule_metric``: its
    primitive's metric in the sweep's rules (None: no rule). Accuracy is shown when that rule, or
    the scorecard's metric for the experiment's task (:func:`~windtunnel.scorecard.score.task_metric`),
    is accuracy."""
    from windtunnel.sweep.primitives import task_metric

    files = folder / FILES
    lines = [f"## {html.escape(exp, quote=False)}", ""]
    chosen = _one_per_setting(members)
    evals = {label: read_eval(folder / r.name) for label, r in chosen.items()}
    labelled = {f"{label} ({ev['n_params'] / 1e6:.2f}M)": ev for label, ev in evals.items()}

    plots.calibration_plot({k: main_curves(ev) for k, ev in labelled.items()}, files / f"{slug}_calibration.png",
                           title=f"{exp}: model vs exact Bayes entropy (training length)")
    lines += ["### Per-position calibration", "", image(f"{FILES}/{slug}_calibration.png", f"{exp} calibration"), ""]
    lines += _lengths_section(files, exp, slug, rows, labelled)
    if "accuracy" in (rule_metric, task_metric(members[0].config.task)):
        lines += _accuracy_section(files, exp, slug, rows)
    lines += _training_section(folder, exp, slug, chosen, rule_metric)
    for r in members:
        geo = geometry_section(folder / r.name, r.name, level=4)
        if geo:
            lines += [f"### Geometry: {r.name}", ""] + geo
    body = []
    for r in members:
        ev = read_eval(folder / r.name)
        body.append([f"`{r.name}`", r.config.model, html.escape(str(r.labels), quote=False), f"{ev['n_params']:,}",
                     ev["steps"], f"{ev['train_seconds']:.0f}"])
    return lines + ["### Runs", ""] + table(["run", "model", "grid point", "params", "steps", "train s"], body) + [""]


def _lengths_section(files: Path, exp: str, slug: str, rows: list[dict[str, Any]],
                     labelled: dict[str, dict[str, Any]]) -> list[str]:
    """Length generalisation, when the experiment was evaluated at more than one length."""
    lengths = sorted({r["length"] for r in rows if r["length"] is not None})
    if len(lengths) <= 1:
        return []
    per_model: dict[str, list] = {}
    for r in rows:
        per_model.setdefault(_grid_label(r), []).append(
            (r["length"], r["entropy_error"], r["entropy_error_lo"], r["entropy_error_hi"]))
    train_len = next((r["main_length"] for r in rows), None)
    plots.length_comparison_plot(per_model, files / f"{slug}_lengths.png", train_length=train_len,
                                 title=f"{exp}: length generalisation")
    longest = str(max(lengths))
    plots.calibration_plot({k: main_curves(ev, longest) for k, ev in labelled.items() if longest in ev["lengths"]},
                           files / f"{slug}_calibration_longest.png",
                           title=f"{exp}: calibration at length {longest}")
    return ["### Length generalisation", "",
            f"Trained at length {train_len}; evaluated at {', '.join(map(str, lengths))} (values in the table above).", "",
            image(f"{FILES}/{slug}_lengths.png", f"{exp} length generalisation"), "",
            image(f"{FILES}/{slug}_calibration_longest.png", f"{exp} calibration at length {longest}"), ""]


def _accuracy_section(files: Path, exp: str, slug: str, rows: list[dict[str, Any]]) -> list[str]:
    """Accuracy at the query positions of every architecture at the training length."""
    main_rows = [r for r in rows if r["is_main"] and r.get("accuracy") is not None]
    if not main_rows:
        return []
    labels = [html.escape(_grid_label(r), quote=False) for r in main_rows]
    acc = {label: (r["accuracy"], r["accuracy_lo"], r["accuracy_hi"]) for label, r in zip(labels, main_rows)}
    base = main_rows[0].get("baseline_accuracy")
    plots.accuracy_plot(acc, files / f"{slug}_accuracy.png", chance=base,
                        chance_label=main_rows[0].get("baseline_accuracy_name") or "baseline",
                        title=f"{exp}: accuracy at the query positions")
    d = METRICS["accuracy"].digits
    body = [[label, f"{r['accuracy']:.{d}f} [{r['accuracy_lo']:.{d}f}, {r['accuracy_hi']:.{d}f}]",
             "-" if r.get("paper_accuracy") is None else f"{r['paper_accuracy']:.{d}f}"]
            for label, r in zip(labels, main_rows)]
    if base is not None:
        body.append([f"baseline: {main_rows[0].get('baseline_accuracy_name')}", f"{base:.{d}f}", ""])
    return (["### Accuracy", ""] + table(["model", f"{METRICS['accuracy'].heading} [95% CI]", "paper"], body)
            + ["", image(f"{FILES}/{slug}_accuracy.png", f"{exp} accuracy"), ""])


def _training_section(folder: Path, exp: str, slug: str, chosen: dict[str, Any], rule_metric: str | None
                      ) -> list[str]:
    """The held-out probe during training in the primitive's metric (runs logged before the
    probe had it fall back to the entropy error), and which runs were still learning."""
    for metric in dict.fromkeys((rule_metric or "entropy_error", "entropy_error")):
        curves = {label: c for label, r in chosen.items() if (c := probe_curve(folder / r.name, metric))[0]}
        if curves:
            break
    if not curves:
        return []
    plots.training_curves_plot(curves, folder / FILES / f"{slug}_training.png", title=f"{exp}: training ({metric})",
                               metric=metric)
    said = METRICS[metric].label
    lines = ["### Training", "", f"The held-out probe's {said} during training.", "",
             image(f"{FILES}/{slug}_training.png", f"{exp} training curves"), ""]
    learning = {k: v for k, v in ((k, still_learning(*c, metric)) for k, c in curves.items()) if v}
    if learning:
        lines += ["Still learning at the end of the budget (the probe improved over the last quarter of "
                  "training): " + "; ".join(f"{html.escape(k, quote=False)} ({said} "
                                             f"{a:.4g} -> {b:.4g})" for k, (a, b) in learning.items()) + ".", ""]
    return lines


def sweep_ladders_section(folder: Path, sweep: Any, summary: dict[str, Any]) -> list[str]:
    """A sweep's difficulty ladders (a scorecard's too): a heat map per primitive scored at several
    rungs, a row per architecture, a column per rung; the table of the hardest rungs realised is in
    the summary above."""
    from windtunnel.sweep.markdown import ladder_rules

    prims = summary.get("primitives") or {}
    ladders = ladder_rules(list(sweep.primitives.rules)) if sweep.primitives and prims else {}
    if not ladders:
        return []
    lines = ["### Ladder heat maps", ""]
    for i, (prim, names) in enumerate(ladders.items()):
        scores = {model: {n: (per.get(n) or {}).get("score") for n in names} for model, per in prims.items()}
        name = f"ladder-{i}_{re.sub(r'[^A-Za-z0-9_-]', '_', prim)}.png"  # the index keeps cleaned names apart
        plots.ladder_heatmap(scores, folder / FILES / name, title=f"{prim}: score per rung (outlined: realised)",
                             realised=sweep.primitives.realised)
        lines += [image(f"{FILES}/{name}", "scores per rung"), ""]
    return lines


def tune_section(folder: Path) -> list[str]:
    """Every tuning search in the folder (``tune-*.json``): the probe metric against the learning
    rate per architecture and task, and each search's table."""
    from windtunnel.tune.outputs import read_tunes, tune_name

    docs = [d for d in read_tunes(folder) if "train.lr" in d["spec"]["grid"]]
    if not docs:
        return []
    lines = ["## Tuning", "",
             "Searches over the learning rate (`windtunnel tune`): by successive halving every candidate trains to "
             "the first rung, the best resume to the next, the winner to the end; a `--full` search trains every "
             "candidate to the end. A line per rung: the held-out probe of the candidates that reached it.", ""]
    for task in dict.fromkeys(d["task"] for d in docs):
        mine = [d for d in docs if d["task"] == task]
        per_model: dict[str, dict[int, list]] = {}
        for d in mine:
            for c in d["candidates"]:
                # a line per model and value of the grid's other axes (e.g. a curriculum or not)
                other = ", ".join(f"{k.rpartition('.')[2]}={json.dumps(v, separators=(',', ':'))}"
                                  for k, v in c["point"].items() if k != "train.lr")
                rungs = per_model.setdefault(d["model"] + (f" {other}" if other else "")
                                             + (" (every candidate to the end)" if d["spec"]["full"] else ""), {})
                for step, value in c["scores"].items():
                    if value is not None:
                        rungs.setdefault(int(step), []).append((c["point"]["train.lr"], value))
        slug = re.sub(r"[^A-Za-z0-9_-]", "_", task)
        plots.tune_plot(per_model, folder / FILES / f"tune_{slug}.png", mine[0]["metric"], title=f"{task}: tuning")
        lines += [f"### {html.escape(task, quote=False)}", "", image(f"{FILES}/tune_{slug}.png", f"{task} tuning"), ""]
        for d in mine:
            md = folder / f"{tune_name(d['task'], d['model'], d['spec']['full'])}.md"
            if md.is_file():
                lines += [_demote(md.read_text(), 1), ""]
    return lines


def claims_section(folder: Path, runs: list) -> list[str]:
    """Paper I's geometric claims (:mod:`windtunnel.geometry.claims`) against the diagnosed runs
    (per task and architecture, the lowest seed that has ``diagnostics.json``)."""
    from windtunnel.geometry import claims

    found: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(runs, key=lambda r: r.config.train.seed):
        path = folder / r.name / "diagnostics.json"
        key = (r.config.task, r.config.model)
        if key not in found and path.is_file():
            found[key] = json.loads(path.read_text()).get("results", {})
    rows = claims.check(found)
    if not rows:
        return []
    body = [[r["claim"], r["run"], r["paper"], r["measured"], f"**{r['verdict']}**"] for r in rows]
    return ["## Paper I's geometric claims at this scale", "",
            "Rules: `windtunnel.geometry.claims` (holds / partly / does not hold, each against its null).", ""] + table(
        ["claim", "run", "Paper I", "measured here", "verdict"], body) + [""]


def _one_per_setting(members: list) -> dict[str, Any]:
    """One run per model and non-seed grid point (the lowest seed), labelled for plot legends."""
    from windtunnel.sweep.config import SEED_KEY

    chosen: dict[str, Any] = {}
    for r in sorted(members, key=lambda r: r.config.train.seed):
        grid = " ".join(f"{k}={v}" for k, v in r.labels.items() if k != SEED_KEY)
        chosen.setdefault(f"{r.config.model} {grid}".strip(), r)
    return chosen


# ---------------------------------------------------------------------------------------
# The page (a run's: windtunnel.report.run_page; the HTML: windtunnel.report.standalone)
# ---------------------------------------------------------------------------------------
def write_report(folder: Path | str) -> dict[str, Path]:
    """Write ``report.md`` and ``report.html`` into a sweep folder, a run directory, or a folder of
    ``windtunnel llm`` (one model or a comparison: :mod:`windtunnel.report.llm_page`)."""
    from windtunnel.report.llm_page import is_llm_folder, llm_report
    from windtunnel.train.rundir import RunDir

    folder = Path(folder)
    if (folder / "sweep.json").is_file():
        title, md = sweep_report(folder)
    elif RunDir(folder).is_run():
        title, md = run_report(folder)
    elif is_llm_folder(folder):
        title, md = llm_report(folder)
    elif list(folder.glob("tune-*.json")):
        title = f"windtunnel report: tuning in {folder.name}"
        md = "\n".join([f"# {title}", "", *tune_section(folder)])
    else:
        raise ConfigError(
            f"{folder} is neither a sweep folder (sweep.json, from `windtunnel sweep` or `windtunnel run`), "
            "a run directory (config.json, from `windtunnel train`), nor a `windtunnel llm` folder (llm.json or "
            "compare.json)"
        )
    atomic_write_text(folder / "report.md", md)
    atomic_write_text(folder / "report.html", to_html(md, folder, title))
    return {"markdown": folder / "report.md", "html": folder / "report.html"}
