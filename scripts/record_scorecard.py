"""Record a timed scorecard as committed data: results/scorecard-cost/<name>.json holds its verdicts
per primitive (the model's, the reference's beside it, the highest rung each realises, the steps to
realise), how many runs it trained, and its wall and CPU time from GNU time's report:

    PYTHONPATH=examples /usr/bin/time -v -o time.txt windtunnel scorecard my_mixer:EMAMixer --out DIR
    python scripts/record_scorecard.py DIR --time time.txt --concurrent "nothing" [--name measured]
    python scripts/record_scorecard.py DIR --concurrent "..." --command "..." --name settled  # not timed

The results renderer (scripts/results/mixers_scorecard.py, main_job.py) shows it.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from record_comparison import gnu_time

from windtunnel.provenance import provenance as record_provenance

ROOT = Path(__file__).resolve().parents[1]


def _cell(cell: dict | None) -> str:
    if not cell or cell.get("score") is None:
        return "-"
    return f"{cell['verdict']}{'?' if cell.get('unsettled') else ''} {cell['score']:.2f}"


def rows(doc: dict) -> list[dict]:
    model = doc["model"]
    out = []
    for prim, row in doc["primitives"].items():
        ladder = doc["ladder"][prim]
        cell = row["model"] or {}
        lr = (row.get("tuning", {}).get(model) or {}).get("best", {}).get("train.lr")
        out.append({"primitive": prim, "tunnel": row["task"], "model": _cell(row["model"]),
                    "lr": f"{lr:g}" if lr is not None else "-",
                    "reference": _cell(row[doc["reference"]]),
                    "highest_rung_model": doc["highest"][model].get(prim) or "none",
                    "highest_rung_reference": doc["highest"][doc["reference"]].get(prim) or "none",
                    "rungs_trained": f"{sum(1 for r in ladder if r.get('needed', True))} of {len(ladder)}",
                    "steps_to_realise": (f"{cell['steps_to_realise']:.0f} of {cell['budget_steps']}"
                                         if cell.get("steps_to_realise") is not None else "-")})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="the scorecard's --out folder (its scorecard.json)")
    ap.add_argument("--time", type=Path, help="/usr/bin/time -v's report of the run (omit for a run not timed)")
    ap.add_argument("--concurrent", required=True, help="what else ran on the machine meanwhile")
    ap.add_argument("--command", help="the command as run (default: the scorecard of the model into the folder)")
    ap.add_argument("--commit", help="the commit it ran at (default: this checkout's HEAD)")
    ap.add_argument("--name", default="measured", help="the record's name under results/scorecard-cost/")
    args = ap.parse_args()
    doc = json.loads((args.folder / "scorecard.json").read_text())
    stamp = datetime.datetime.fromtimestamp((args.folder / "scorecard.json").stat().st_mtime, datetime.timezone.utc)
    runs = sum(1 for d in args.folder.iterdir() if (d / "config.json").is_file())
    command = args.command or f"/usr/bin/time -v windtunnel scorecard {doc['model']} --out {args.folder}"
    provenance = record_provenance(command, concurrent=args.concurrent, root=ROOT, commit=args.commit or None,
                                   date=stamp.isoformat(timespec="seconds"), **(gnu_time(args.time) if args.time else {}),
                                   reference_source=doc.get("reference_source", "train"),
                                   run_folders=f"{runs} (the searches' candidates and cooldown branches included)")
    timed = f": {provenance['wall_time']} wall" if args.time else " (not timed)"
    record = {"title": f"The scorecard of {doc['model']} ({doc['profile']} profile), every primitive, tuning included"
                       f"{timed}",
              "provenance": provenance,
              "columns": [{"key": k, "label": v} for k, v in (
                  ("primitive", "primitive"), ("tunnel", "tunnel"), ("model", "verdict, score"),
                  ("lr", "its learning rate"),
                  ("reference", "reference transformer"), ("highest_rung_model", "highest rung realised"),
                  ("highest_rung_reference", "reference's highest rung"), ("rungs_trained", "rungs trained"),
                  ("steps_to_realise", "steps to realise"))],
              "rows": rows(doc)}
    out = ROOT / "results" / "scorecard-cost" / f"{args.name}.json"
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"written: {out}; now run: make results")


if __name__ == "__main__":
    main()
