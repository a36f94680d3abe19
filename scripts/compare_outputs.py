"""Compare two output trees of windtunnel (run, sweep, scorecard, search folders) file by file,
leaving out what depends on the clock: the bit-for-bit check of a change that must not change
results (an engine refactor), run as

    python scripts/compare_outputs.py BEFORE AFTER

Every file of BEFORE must be in AFTER with the same content, except:

- times: keys and columns named ``seconds``, ``train_seconds``, ``started``, ``generated`` (JSON,
  JSON lines, CSV), the ``train s`` column of markdown tables, ``N s`` in prose;
- resumable checkpoints, which are written every ``train.resume_every_s`` seconds: only the
  checkpoints both trees have are compared (weights, tensor by tensor), and each tree must have
  the final one;
- the command logs (``log-*.txt``), locks and the HTML pages (their markdown is compared).

Prints each difference and exits 1 if there is any.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

TIME_KEYS = re.compile(r"(^|_)(seconds|started|generated|date|time|timestamp|wall)$")
SKIP = (re.compile(r"(^|/)log-[^/]*\.txt$"), re.compile(r"\.lock"), re.compile(r"\.html$"), re.compile(r"__pycache__"))


def strip_times(doc):
    if isinstance(doc, dict):
        return {k: strip_times(v) for k, v in doc.items() if not TIME_KEYS.search(str(k))}
    if isinstance(doc, list):
        return [strip_times(v) for v in doc]
    return doc


def markdown(text: str) -> list[str]:
    out, masked = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and "train s" in cells:
            masked = cells.index("train s")
        elif cells is None:
            masked = None
        elif masked is not None and masked < len(cells) and not set(cells[masked]) <= set("-: "):
            cells[masked] = "T"
            line = "| " + " | ".join(cells) + " |"
        out.append(re.sub(r"\b\d+(\.\d+)? s\b", "N s", line))
    return out


def load(path: Path):
    suffix = path.suffix
    if suffix == ".json":
        return strip_times(json.loads(path.read_text()))
    if suffix == ".jsonl":
        return [strip_times(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    if suffix == ".csv":
        with open(path, newline="") as fh:
            return [{k: v for k, v in row.items() if not TIME_KEYS.search(k)} for row in csv.DictReader(fh)]
    if suffix == ".md":
        return markdown(path.read_text())
    if suffix == ".safetensors":
        from safetensors.torch import load_file

        return {k: v.numpy().tobytes() for k, v in load_file(path).items()}
    return path.read_bytes()


def checkpoint_of(rel: str) -> str | None:
    m = re.search(r"(.*/checkpoints/step_\d+)/", rel)
    return m.group(1) if m else None


def compare(before: Path, after: Path) -> list[str]:
    problems = []
    files = sorted(p.relative_to(before).as_posix() for p in before.rglob("*") if p.is_file())
    steps = {Path(p).parent.as_posix() for p in files if checkpoint_of(p)}
    for rel in files:
        if any(s.search(rel) for s in SKIP):
            continue
        ckpt = checkpoint_of(rel)
        if ckpt is not None and not (after / ckpt).is_dir():
            continue  # a resumable checkpoint written at another moment
        if not (after / rel).is_file():
            problems.append(f"missing in {after}: {rel}")
            continue
        if load(before / rel) != load(after / rel):
            problems.append(f"differs: {rel}")
    for run in {s.rsplit("/checkpoints/", 1)[0] for s in steps}:
        last = max((s for s in steps if s.startswith(run + "/")), default=None)
        if last is not None and not (after / last).is_dir():
            problems.append(f"missing in {after}: the final checkpoint {last}")
    return problems


def main() -> int:
    before, after = (Path(a) for a in sys.argv[1:3])
    problems = compare(before, after)
    n = sum(1 for p in before.rglob("*") if p.is_file())
    for p in problems:
        print(p)
    print(f"{n} files in {before}: {len(problems)} difference(s) with {after}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
