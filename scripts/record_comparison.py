"""Record a comparison of language models as committed data: results/llm/<name>.json holds the
comparison's summary.json (what ``windtunnel llm --config NAME --out DIR`` wrote) with its
provenance, for the results renderer (scripts/results/llm.py) to turn into the docs' tables:

    /usr/bin/time -v -o time.txt windtunnel llm --config paper3-offline --out DIR
    python scripts/record_comparison.py DIR --concurrent "nothing" [--time time.txt]

``--time`` reads GNU time's verbose report (wall clock, user + system CPU, peak resident memory).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import re
from pathlib import Path

from windtunnel.provenance import provenance as record_provenance

ROOT = Path(__file__).resolve().parents[1]


def gnu_time(path: Path) -> dict[str, str]:
    """wall_time, cpu_time and peak_rss from ``/usr/bin/time -v``'s report."""
    text = path.read_text()

    def field(label: str) -> str:
        m = re.search(rf"^\s*{re.escape(label)}.*: (\S+)$", text, re.M)  # the value after the line's last ": "
        if not m:
            raise SystemExit(f"{path}: no '{label}' line (is it /usr/bin/time -v's report?)")
        return m[1]

    parts = [float(x) for x in field("Elapsed (wall clock) time").split(":")]
    wall = sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
    cpu = float(field("User time")) + float(field("System time"))
    return {"wall_time": f"{wall:.0f} s", "cpu_time": f"{cpu:.0f} s",
            "peak_rss": f"{int(field('Maximum resident set size')) // 1024} MiB (the largest process)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="the comparison's --out folder (its summary.json)")
    ap.add_argument("--concurrent", required=True, help="what else ran on the machine meanwhile")
    ap.add_argument("--time", type=Path, help="/usr/bin/time -v's report of the run")
    ap.add_argument("--commit", help="the commit it ran at (default: this checkout's HEAD)")
    ap.add_argument("--note", help="anything else a reader needs (e.g. the comparison re-read by later code)")
    ap.add_argument("--command", help="the command as run (default: the comparison of the config into the folder)")
    args = ap.parse_args()
    summary = json.loads((args.folder / "summary.json").read_text())
    ended = args.time or args.folder / "summary.json"  # when the run ended (the comparison may be re-read later)
    stamp = datetime.datetime.fromtimestamp(ended.stat().st_mtime, datetime.timezone.utc)
    provenance = record_provenance(args.command or f"windtunnel llm --config {summary['name']} --out {args.folder}",
                                   concurrent=args.concurrent, root=ROOT, commit=args.commit or None,
                                   date=stamp.isoformat(timespec="seconds"))
    seconds = sum(r.get("seconds") or 0 for r in summary["rows"])
    provenance |= {"note": args.note} if args.note else {}
    provenance |= gnu_time(args.time) if args.time else {"wall_time": f"{seconds:.0f} s summed over the models' own timings"}
    record = {"title": f"The comparison {summary['name']}: {summary['description']}", "provenance": provenance,
              "summary": summary}
    out = ROOT / "results" / "llm" / f"{summary['name']}.json"
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    runs = keep_runs(args.folder, ROOT / "results" / "llm" / summary["name"])
    print(f"written: {out} and {len(runs)} llm.json files under {out.with_suffix('')}; now run: make results")


def keep_runs(folder: Path, dest: Path) -> list[Path]:
    """Every model's and control's ``llm.json`` of the comparison in ``folder``, gzipped into ``dest``
    under the same relative paths (``<model>/llm.json.gz``, ``<model>/control/<label>/llm.json.gz``),
    so that the verdicts can be judged again from the files they came from. The models' paths on
    this machine are written relative to the comparison folder."""
    written = []
    for path in sorted(folder.glob("*/llm.json")) + sorted(folder.glob("*/control/*/llm.json")):
        doc = json.loads(path.read_text())
        for key in ("name", "path"):
            value = doc["model"].get(key)
            if isinstance(value, str) and Path(value).is_absolute():
                p = Path(value)
                doc["model"][key] = str(p.relative_to(folder.resolve())) if p.is_relative_to(folder.resolve()) else p.name
        target = dest / path.relative_to(folder).with_suffix(".json.gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.GzipFile(target, "wb", mtime=0) as fh:  # mtime 0: the same document gives the same bytes
            fh.write(json.dumps(doc, allow_nan=False).encode())
        written.append(target)
    return written


if __name__ == "__main__":
    main()
