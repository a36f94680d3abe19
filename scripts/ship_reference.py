"""Write the shipped reference of a profile from a scorecard of the transformer trained to its full
budget on every rung (src/windtunnel/data/reference/<profile>.json), with its provenance:

    windtunnel scorecard transformer --no-tune --full-ladder --no-early-stop --reference train --out FOLDER
    python scripts/ship_reference.py FOLDER --commit SHA --concurrent "what else ran"

The file is validated when the scorecard reads it (windtunnel.scorecard.reference.ReferenceData);
tests/sweep/test_reference.py checks it against its schema and, with the slow tests, that a
retrained reference run reproduces its numbers within their intervals.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from windtunnel.provenance import provenance
from windtunnel.scorecard.reference import build_reference, shipped_path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--commit", help="the commit the runs were trained at (default: this checkout's HEAD)")
    ap.add_argument("--concurrent", default="nothing", help="what else ran on the machine meanwhile")
    ap.add_argument("--command", help="the command that trained the folder (default: the scorecard command above)")
    args = ap.parse_args()
    command = args.command or (f"windtunnel scorecard transformer --no-tune --full-ladder --no-early-stop "
                               f"--reference train --out {args.folder}")
    stamp = datetime.datetime.fromtimestamp((args.folder / "summary.json").stat().st_mtime, datetime.timezone.utc)
    data = build_reference(args.folder, provenance(command, concurrent=args.concurrent, root=ROOT,
                                                   commit=args.commit or None, date=stamp.date().isoformat()))
    out = Path(str(shipped_path(data.profile)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data.model_dump(mode="json"), indent=1) + "\n")
    print(f"written: {out} ({len(data.rungs)} rungs)")


if __name__ == "__main__":
    main()
