"""A search's files: ``tune-<task>-<model>.json`` (the spec, the base config, every candidate,
the cautions), ``.csv`` (one row per candidate) and ``.md`` (the table), and reading them back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from windtunnel.files import atomic_write_text, jsonable
from windtunnel.sweep.aggregate import write_csv
from windtunnel.tables import table


def tune_name(task: str, model: str, full: bool = False) -> str:
    """``tune-<task>-<model>`` (``-full`` for a search without halving, so both can share a folder)."""
    return f"tune-{task}-{model.replace(':', '.')}" + ("-full" if full else "")


def tune_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row per candidate: the grid values, the probe at each comparison it reached, its status."""
    rows = []
    for c in doc["candidates"]:
        row: dict[str, Any] = {"task": doc["task"], "model": doc["model"], **c["point"], "run": c["run"]}
        for s in doc["rung_steps"]:
            row[f"probe_{doc['metric']}@{s}"] = c["scores"].get(s)
        row["status"] = c["status"]
        rows.append(row)
    return rows


def write_tune(out: Path, doc: dict[str, Any]) -> dict[str, Path]:
    """Write a search's ``doc`` (what ``tune-*.json`` holds) as its three files; returns their paths."""
    stem = out / tune_name(doc["task"], doc["model"], doc["spec"].get("full", False))
    paths = {k: stem.parent / f"{stem.name}.{ext}" for k, ext in (("json", "json"), ("csv", "csv"), ("markdown", "md"))}
    atomic_write_text(paths["json"], json.dumps(jsonable(doc), indent=1, allow_nan=False))
    write_csv(paths["csv"], tune_rows(doc))
    atomic_write_text(paths["markdown"], tune_markdown(doc))
    return paths


def tune_markdown(doc: dict[str, Any]) -> str:
    """The search table: a row per candidate, the probe at each rung, which one won."""
    steps = doc["rung_steps"]
    keys = list(doc["spec"]["grid"])
    head = [*keys, *[f"probe {doc['metric']} @ {s}" for s in steps], "status"]
    body = []
    for c in doc["candidates"]:
        scores = {int(k): v for k, v in c["scores"].items()}  # JSON keys are text
        body.append([*(f"{c['point'][k]:g}" if isinstance(c["point"][k], float) else str(c["point"][k]) for k in keys),
                     *("" if scores.get(s) is None else f"{scores[s]:.4f}" for s in steps), c["status"]])
    w = doc["winner"]
    lines = [f"### tune: {doc['model']} on {doc['task']}", "",
             ("Every candidate trained to the end" if doc["spec"].get("full") else "Successive halving")
             + f" over {', '.join(keys)}, scored by the held-out probe's {doc['metric']}; "
             f"best: {', '.join(f'{k} = {v}' for k, v in doc['best'].items())}"
             + (f" (its evaluation: KL {w['eval']['kl_bayes_model']:.4f} bits)" if "kl_bayes_model" in w.get("eval", {}) else "")
             + f"; {doc['seconds']:.0f} s"
             + (f" (the wall time of {doc['together']} searches run together)" if doc.get("together", 1) > 1 else "")
             + ".", "", *table(head, body)]
    lines += ["", *(f"- Caution: {c}" for c in doc.get("cautions", []))] if doc.get("cautions") else []
    return "\n".join(lines) + "\n"


def read_tunes(folder: Path) -> list[dict[str, Any]]:
    """Every ``tune-*.json`` in ``folder``, oldest first."""
    paths = sorted(Path(folder).glob("tune-*.json"), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in paths]
