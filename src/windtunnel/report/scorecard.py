"""The scorecard on a report page (``scorecard.json`` of ``windtunnel scorecard``): the verdicts with
their steps to realise, where the reference's results came from, a heat map per ladder (the model
beside the reference, the rungs the ladder search did not need marked), and how fast each
architecture learned each primitive (the probe score over training)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from windtunnel.report import plots
from windtunnel.tables import table

FILES = "report_files"


def load(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / "scorecard.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _steps(cell: dict[str, Any] | None) -> str:
    if not cell or "steps_to_realise" not in cell:
        return "-"
    s = cell["steps_to_realise"]
    return "not realised" if s is None else f"{s:.0f} of {cell['budget_steps']}"


def scorecard_section(folder: Path) -> list[str]:
    """The verdict table, the cautions and unsettled verdicts, the learning plots."""
    from windtunnel.scorecard.score import scorecard_cautions, unscored_text
    from windtunnel.sweep.markdown import score_text

    doc = load(folder)
    if doc is None:
        return []
    ref = doc["reference"]

    def cell(r: dict[str, Any] | None) -> str:
        if r and r.get("error"):
            return html.escape(f"failed: {r['error']}", quote=False)
        if not r or r.get("score") is None:
            return "-"
        return f"{r['verdict']}{'?' if r.get('unsettled') else ''} {score_text(r)}"

    body = [[prim, f"{row['task']} ({row['metric'].replace('_', ' ')})", unscored_text(row) or cell(row["model"]),
             _steps(row["model"]), cell(row[ref]), _steps(row[ref])] for prim, row in doc["primitives"].items()]
    model = html.escape(doc["model"], quote=False)
    source = doc.get("reference_source", "train")
    whence = {"train": "trained here", "shipped": "the results shipped with windtunnel (windtunnel/data/reference)",
              "none": "not included"}.get(source, f"the runs in {source}")
    lines = [f"## Scorecard: {model}", "",
             f"Seeds {', '.join(map(str, doc['seeds']))}; {doc['finished']} of {doc['n_runs']} runs finished. Score = "
             f"fraction of the best baseline's gap to the exact posterior closed at the training length (yes at ≥ "
             f"{doc['realised']}, partial at ≥ {doc['partial']}; 0 is the baseline, below 0 worse than it); brackets: "
             "the scores at the ends of the 95% interval over seeds. Steps to realise: the step at which the held-out "
             "probe had shown the primitive realised and the full evaluation there agreed. The reference: "
             f"{whence}.", "",
             *table(["primitive", "task (metric)", model, "steps to realise", ref, "steps to realise "], body), ""]
    notes = [c for row in doc["primitives"].values() for c in scorecard_cautions(row)]
    unsettled = [f"{prim}: the search stopped {row['model']['unsettled']} while every rate was on the plateau "
                 "(a scorecard without --no-settle trains them to the end)" for prim, row in doc["primitives"].items()
                 if (row["model"] or {}).get("unsettled")]
    if unsettled:
        lines += ["Unsettled verdicts (marked ?): a stopped learning rate could still turn them.", "",
                  *(f"- {html.escape(u, quote=False)}" for u in unsettled), ""]
    left_out = [f"{prim}: {row['reason']}" + (f"; it would fit with --model-set {' or '.join(row['fits'])}"
                                               if row.get("fits") else "")
                for prim, row in doc["primitives"].items() if row.get("not_scored")]
    if left_out:
        lines += ["Not scored: the capacity pre-flight could not match the model to the transformer's count on these "
                  "tunnels, so the scorecard went on without them.", "",
                  *(f"- {html.escape(u, quote=False)}" for u in left_out), ""]
    if notes:
        lines += ["Cautions of the learning-rate searches behind these verdicts (a verdict from a search on a "
                  "plateau or at its grid's edge is final only after the check named):", "",
                  *(f"- {html.escape(c, quote=False)}" for c in notes), ""]
    return lines + _learning_section(folder, doc)


def ladder_section(folder: Path) -> list[str]:
    """A heat map per laddered primitive: the model and the reference, every rung; the rungs the
    ladder search did not need read "not needed"."""
    doc = load(folder)
    if doc is None:
        return []
    lines = []
    for i, (prim, rungs) in enumerate(doc["ladder"].items()):
        if len(rungs) < 2:
            continue
        who = {doc["model"]: "model", doc["reference"]: doc["reference"]}
        scores = {label: {r["rung"]: (r[key] or {}).get("score") for r in rungs} for label, key in who.items()}
        unneeded = {label: {r["rung"] for r in rungs if r.get("needed") is False} for label in who}
        name = f"ladder-{i}_{re.sub(r'[^A-Za-z0-9_-]', '_', prim)}.png"
        plots.ladder_heatmap(scores, Path(folder) / FILES / name, title=f"{prim}: score per rung (outlined: realised)",
                             realised=doc["realised"], unneeded=unneeded)
        lines += [f"![{prim}: scores per rung]({FILES}/{name})", ""]
    return ["### Ladder heat maps", "", *lines] if lines else []


def _learning_section(folder: Path, doc: dict[str, Any]) -> list[str]:
    """The probe score over training at each primitive's own rung, the model beside the reference."""
    lines = []
    for i, (prim, row) in enumerate(doc["primitives"].items()):
        curves, marks, budget = {}, {}, None
        for label, key in ((doc["model"], "model"), (doc["reference"], doc["reference"])):
            curve = _curve(folder, doc, row, key)
            if curve:
                curves[label] = curve
                marks[label] = (row[key] or {}).get("steps_to_realise")
                budget = budget or (row[key] or {}).get("budget_steps")
        if not curves:
            continue
        name = f"realise-{i}_{re.sub(r'[^A-Za-z0-9_-]', '_', prim)}.png"
        plots.realise_plot({k: (list(s), list(v)) for k, (s, v) in curves.items()}, marks, Path(folder) / FILES / name,
                           threshold=doc["realised"], budget=budget, title=f"{prim} ({row['task']}): probe score over training")
        lines += [f"![{prim}: probe score over training]({FILES}/{name})", ""]
    return ["### How fast each primitive is learned", "", *lines] if lines else []


def _curve(folder: Path, doc: dict[str, Any], row: dict[str, Any], key: str) -> tuple[list[int], list[float]] | None:
    """A model's probe-score curve at a primitive's own rung: the shipped reference's, or read from
    its run in the folder."""
    from windtunnel.scorecard.reference import load_reference, probe_curve
    from windtunnel.sweep.manifest import read_manifest

    who = doc["model"] if key == "model" else doc["reference"]
    if key != "model" and doc.get("reference_source") == "shipped":
        data = load_reference(doc["profile"])
        rung = data.by_rule().get(_rule_of(doc, row)) if data else None
        return (list(s for s, _ in rung.probe_scores), list(v for _, v in rung.probe_scores)) if rung else None
    where = Path(doc["reference_source"]) if key != "model" and doc.get("reference_source") not in (None, "train", "none") \
        else Path(folder)
    try:
        _, runs = read_manifest(where)
    except Exception:  # noqa: BLE001  a folder of runs without a manifest: no curve, the table stands
        return None
    run = next((r for r in runs if r.experiment == row["experiment"] and r.config.model == who), None)
    if run is None or not (where / run.name / "metrics.jsonl").is_file():
        return None
    pairs = probe_curve(where / run.name, row["metric"])
    return [s for s, _ in pairs], [v for _, v in pairs]


def _rule_of(doc: dict[str, Any], row: dict[str, Any]) -> str:
    return next(p for p, r in doc["primitives"].items() if r is row)
