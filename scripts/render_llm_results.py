"""Write docs/llm.md's tables of committed comparisons from their data in results/ (never by hand).

Each block between ``<!-- results: NAME -->`` and ``<!-- end results: NAME -->`` in docs/llm.md is
rendered from ``results/NAME/summary.json`` and ``results/NAME/provenance.json`` by
``windtunnel.llm.compare_md.results_markdown``; tests/docs/test_results_tables.py renders them
again and compares. Run it after committing new data:

    .venv/bin/python scripts/render_llm_results.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "llm.md"
BLOCK = re.compile(r"(<!-- results: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end results: (?P=name) -->)", re.S)


def provenance_lines(prov: dict) -> list[str]:
    return [f"Measured with `{prov['command']}` at commit {prov['git_commit']} on {prov['date']}, {prov['machine']}: "
            f"{prov['wall_time']} wall, {prov['cpu_time']} of CPU (user + system), peak resident memory "
            f"{prov['peak_rss']}. What else ran: {prov['what_else_ran']}", ""]


def block(name: str) -> str:
    from windtunnel.llm.compare_md import results_markdown

    folder = ROOT / "results" / name
    summary = json.loads((folder / "summary.json").read_text())
    prov = json.loads((folder / "provenance.json").read_text())
    lines = [f"Generated from `results/{name}/` by `scripts/render_llm_results.py`; do not edit by hand.", ""]
    return "\n".join(lines + provenance_lines(prov) + results_markdown(summary)) + "\n"


def render(text: str) -> str:
    """``text`` with every results block rendered afresh."""
    return BLOCK.sub(lambda m: m.group(1) + block(m.group("name")) + m.group(4), text)


def main() -> int:
    new = render(DOC.read_text())
    if new != DOC.read_text():
        DOC.write_text(new)
        print(f"rewrote the results blocks of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
