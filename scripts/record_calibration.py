"""Record the per-position calibration curves of trained runs as results data.

    python scripts/record_calibration.py results/main-job/calibration.json RUN_DIR [RUN_DIR ...] \\
        --command "windtunnel run" --concurrent "what ran beside it" [--commit SHA] [--title "..."]

Reads each run's ``eval.json`` (the curves at its main length: the model's predictive entropy,
the exact posterior's, and their absolute difference per prediction index k) and writes one
record with its provenance, which ``scripts/results/main_job.py`` draws as the calibration plot.
A ``windtunnel run`` output folder may be given for RUN_DIR: its run folders are read.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "results"))
from _tables import dump_json  # noqa: E402

from windtunnel.provenance import provenance  # noqa: E402


def curves(run: Path) -> tuple[str, dict]:
    ev = json.loads((run / "eval.json").read_text())
    config = json.loads((run / "config.json").read_text())
    main = str(ev["main_length"])
    return config["model"], ev["lengths"][main]["curves"] | {"step": ev["lengths"][main]["step"]}


def runs_of(path: Path) -> list[Path]:
    """A run folder, or the evaluated runs of a sweep folder in the sweep's order."""
    if (path / "eval.json").exists():
        return [path]
    if (path / "sweep.json").exists():
        names = [r["name"] for r in json.loads((path / "sweep.json").read_text())["runs"]]
        return [path / n for n in names if (path / n / "eval.json").exists()]
    return sorted(p.parent for p in path.glob("*/eval.json"))


def record(paths: list[Path], command: str, concurrent: str, commit: str, title: str) -> dict:
    models, k, h_bayes = {}, None, None
    for run in (r for p in paths for r in runs_of(p)):
        name, c = curves(run)
        k, h_bayes = c["step"], [round(v, 5) for v in c["h_bayes"]]
        models[name] = {"h_model": [round(v, 5) for v in c["h_model"]], "abs_dh": [round(v, 6) for v in c["abs_dh"]]}
    if not models:
        raise SystemExit("no run folder with an eval.json among the paths")
    return {"title": title, "provenance": provenance(
        command, concurrent=concurrent, root=ROOT, commit=commit or None,
        machine=f"the project's 2-core CPU machine ({platform.machine()})"),
        "k": k, "h_bayes": h_bayes, "models": models}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--command", required=True)
    ap.add_argument("--concurrent", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--title", default="The main job's calibration: predictive entropy per position against Bayes")
    a = ap.parse_args()
    rec = record(a.runs, a.command, a.concurrent, a.commit, a.title)
    a.out.write_text(dump_json(rec))
    print(f"{a.out}: {', '.join(rec['models'])}")


if __name__ == "__main__":
    main()
