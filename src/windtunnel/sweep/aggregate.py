"""A sweep's results as tables: one row per run and length, then means and intervals over seeds.

``results.csv`` has one row per (run, evaluation length). ``table.csv`` groups those rows by
everything but the seed and reports, per metric, the mean over seeds with a 95% interval:
Student's t over seeds when there are two or more, else the run's own bootstrap interval over
held-out sequences (the ``ci`` column says which). ``primitives`` scores which inference
primitives each architecture realises, from the rules in the sweep config.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from windtunnel.evaluate.record import METRICS, primitive_score  # noqa: F401  (primitive_score: read here by callers)
from windtunnel.files import atomic_write_text
from windtunnel.sweep.config import SEED_KEY, Primitives
from windtunnel.sweep.expand import SweepRun
from windtunnel.sweep.paper import Cell, paper_value


def run_rows(run: SweepRun, ev: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per evaluation length of a finished run (its ``eval.json``)."""
    cfg = run.config
    main = ev["main_length"]
    rows = []
    for L, s in ev["lengths"].items():
        row: dict[str, Any] = {
            "experiment": run.experiment, "task": cfg.task, "model": cfg.model, "run": run.name,
            "seed": cfg.train.seed, "task_params": json.dumps(cfg.task_params, sort_keys=True),
            **{f"grid:{k}": json.dumps(v) for k, v in run.labels.items() if k != SEED_KEY},
            "length": int(L) if L not in ("None", "null") else None, "main_length": main,
            "is_main": str(L) == str(main), "n_params": ev.get("n_params"), "steps": ev.get("steps"),
            "train_seconds": round(ev.get("train_seconds", 0.0), 2),
        }
        if "steps_to_realise" in ev:  # a run under an early decision (windtunnel.train.decide)
            row.update(steps_to_realise=ev["steps_to_realise"], budget_steps=cfg.train.steps)
        for metric, spec in METRICS.items():
            if spec.eval_key in s:
                e = s[spec.eval_key]
                row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = e["value"], e["lo"], e["hi"]
        base = ev["baselines"].get(str(L), {})
        for metric, spec in METRICS.items():
            have = {name: b[spec.eval_key] for name, b in base.items() if spec.eval_key in b and name != "bayes"}
            if have:
                pick = (min if spec.lower_is_better else max)(have, key=have.get)
                row[f"baseline_{metric}"], row[f"baseline_{metric}_name"] = have[pick], pick
        rows.append(row)
    return rows


def _t_quantile(level: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


def _mean_ci(values: list[float], level: float = 0.95) -> tuple[float, float, float, float]:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = _t_quantile(level, n - 1) * sd / math.sqrt(n) if n > 1 else 0.0
    return mean, mean - half, mean + half, sd


def aggregate(rows: list[dict[str, Any]], paper: str | None = None) -> list[dict[str, Any]]:
    """Group ``rows`` by all but the seed; mean and 95% interval per metric (see module doc)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        key = tuple((k, r[k]) for k in ("experiment", "task", "task_params", "model", "length", "is_main", "main_length"))
        key += tuple(sorted((k, v) for k, v in r.items() if k.startswith("grid:")))
        groups.setdefault(key, []).append(r)
    table = []
    for key, members in groups.items():
        members.sort(key=lambda r: r["seed"])
        out: dict[str, Any] = dict(key)
        out.update(n_seeds=len(members), seeds=" ".join(str(r["seed"]) for r in members),
                   n_params=members[0]["n_params"], steps=members[0]["steps"],
                   train_seconds=round(sum(r["train_seconds"] for r in members) / len(members), 1),
                   runs=" ".join(r["run"] for r in members))
        out["ci"] = f"t over {len(members)} seeds" if len(members) > 1 else "bootstrap over sequences (1 seed)"
        if any("steps_to_realise" in r for r in members):  # the mean over seeds; None unless every seed realised
            reached = [r.get("steps_to_realise") for r in members]
            out["steps_to_realise"] = None if None in reached else sum(reached) / len(reached)
            out["budget_steps"] = members[0].get("budget_steps")
        for metric in METRICS:
            vals = [r[metric] for r in members if r.get(metric) is not None]
            if len(vals) != len(members):
                continue
            if len(vals) > 1:
                mean, lo, hi, sd = _mean_ci(vals)
                lo, hi = max(lo, 0.0), min(hi, 1.0) if metric == "accuracy" else hi  # the metric's own range
            else:
                mean, lo, hi, sd = vals[0], members[0][f"{metric}_lo"], members[0][f"{metric}_hi"], 0.0
            out.update({metric: mean, f"{metric}_lo": lo, f"{metric}_hi": hi, f"{metric}_sd": sd})
            if members[0].get(f"baseline_{metric}") is not None:
                out[f"baseline_{metric}"] = sum(r[f"baseline_{metric}"] for r in members) / len(members)
                out[f"baseline_{metric}_name"] = members[0][f"baseline_{metric}_name"]
            ref = paper_value(paper, Cell(out["task"], out["model"], metric, out["length"], out["main_length"],
                                          json.loads(out["task_params"])))
            if ref is not None:
                out[f"paper_{metric}"], out[f"paper_{metric}_source"] = ref["value"], ref["source"]
        table.append(out)
    return table


def primitives(table: list[dict[str, Any]], rules: Primitives) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {primitive: {score, verdict, value, baseline, ...}}}`` at each task's training length.

    ``score_lo`` and ``score_hi`` are the scores at the ends of the metric's 95% interval (over
    seeds, or the bootstrap with one seed). With grid axes besides the seed, a model's best setting
    counts. Rows of a rule's variant experiments are labelled ``model (variant)``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for prim, rule in rules.rules.items():
        variant_of = rule.experiments()
        for row in table:
            if row["experiment"] not in variant_of or not row["is_main"] or row.get(rule.metric) is None:
                continue
            base = row.get(f"baseline_{rule.metric}")
            if base is None:
                continue
            score = primitive_score(rule.metric, row[rule.metric], base)
            variant = variant_of[row["experiment"]]
            label = row["model"] if variant is None else f"{row['model']} ({variant})"
            prev = out.setdefault(label, {}).get(prim)
            if prev is not None and not (score > prev["score"] or math.isnan(prev["score"])):
                continue
            verdict = "yes" if score >= rules.realised else "partial" if score >= rules.partial else "no"
            ends = sorted(primitive_score(rule.metric, row[f"{rule.metric}_{e}"], base) for e in ("lo", "hi"))
            out[label][prim] = {
                "score": score, "score_lo": ends[0], "score_hi": ends[1], "n_seeds": row["n_seeds"],
                "verdict": verdict, "metric": rule.metric, "value": row[rule.metric],
                "baseline": base, "baseline_name": row[f"baseline_{rule.metric}_name"], "experiment": row["experiment"],
            }
            if "steps_to_realise" in row:
                out[label][prim].update(steps_to_realise=row["steps_to_realise"], budget_steps=row["budget_steps"])
    return out


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows with the union of their keys as columns (first-seen order), written atomically."""
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())
    return path


def read_csv(path: Path) -> list[dict[str, Any]]:
    """A table written by :func:`write_csv`, with numbers, booleans and empty cells restored."""
    def parse(v: str) -> Any:
        if v == "":
            return None
        if v in ("True", "False"):
            return v == "True"
        try:
            return int(v)
        except ValueError:
            pass
        try:
            return float(v)
        except ValueError:
            return v

    with open(path, newline="") as fh:
        return [{k: parse(v) for k, v in r.items()} for r in csv.DictReader(fh)]
