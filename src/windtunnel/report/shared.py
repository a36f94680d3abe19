"""What the report pages read of a run folder: its evaluation, its probe curves (and whether it was
still learning), its calibration curves and its geometry section; the page's plot folder."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from windtunnel.evaluate.record import METRICS, Evaluation
from windtunnel.report.text import _demote

#: the folder beside a page that holds its plots
FILES = "report_files"


def read_eval(run_dir: Path) -> dict[str, Any] | None:
    from windtunnel.train.rundir import RunDir

    return RunDir(run_dir).eval()


def probe_curve(run_dir: Path, metric: str = "entropy_error") -> tuple[list[int], list[float]]:
    """The held-out checks of ``metric`` logged during training (its probe key in ``metrics.jsonl``,
    ``probe_<metric>``: :data:`~windtunnel.evaluate.record.METRICS`)."""
    from windtunnel.train.rundir import RunDir

    key = METRICS[metric].probe_key
    rows = [r for r in RunDir(run_dir).metrics() if key in r]
    return [r["step"] for r in rows], [r[key] for r in rows]


#: a run is "still learning" when its probe metric improved by more than this over the last quarter
STILL_LEARNING = {"relative": 0.10, "accuracy": 0.02}


def still_learning(steps: list[int], values: list[float], metric: str) -> tuple[float, float] | None:
    """``(value a quarter of the run before the end, final value)`` when the probe metric still
    improved over the last quarter of training by more than :data:`STILL_LEARNING` (10% of an
    error, or 0.02 of accuracy); None when it had levelled off (or the curve is too short)."""
    if len(steps) < 3:
        return None
    cut = steps[-1] - (steps[-1] - steps[0]) / 4
    before = [v for s, v in zip(steps, values) if s <= cut][-1]
    last = values[-1]
    if not METRICS[metric].lower_is_better:  # accuracy: an absolute gain
        return (before, last) if last - before > STILL_LEARNING["accuracy"] else None
    return (before, last) if last < (1 - STILL_LEARNING["relative"]) * before else None


def main_curves(ev: dict[str, Any], length: str | None = None) -> dict[str, Any]:
    s = Evaluation(ev).at(length)
    return {**s["curves"], "step": s["step"]}


def image(rel: str, alt: str) -> str:
    return f"![{alt}]({rel})"


def geometry_section(run_dir: Path, rel: str, level: int = 3) -> list[str]:
    """A run's diagnostics.md (its title and list of plot links dropped, its sections at heading
    ``level``) followed by its geometry plots inlined."""
    md_path = run_dir / "diagnostics.md"
    if not md_path.is_file():
        return []
    text = md_path.read_text().split("\n## Plots", 1)[0]
    text = re.sub(r"\A# [^\n]*\n", "", text)
    lines = [_demote(text, level - 2), ""]
    for p in sorted((run_dir / "plots" / "geometry").glob("*.png")):
        lines += [image(f"{rel}/plots/geometry/{p.name}", p.stem.replace("_", " ")), ""]
    return lines
