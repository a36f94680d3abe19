"""The committed comparisons of language models (results/llm/<name>.json): their tables in the docs
are rendered from them (tests/docs/test_results_pages.py re-renders every block), and their
verdicts are what the present claim rules give, so a changed rule cannot leave old verdicts in
the docs."""

import json

import pytest
from docblocks import ROOT

from windtunnel.llm.claims import judge

COMPARISONS = sorted(p for p in (ROOT / "results" / "llm").glob("*.json") if "summary" in json.loads(p.read_text()))


def test_there_is_a_committed_comparison_and_docs_show_it():
    assert "paper3-offline" in [p.stem for p in COMPARISONS]
    assert "<!-- results:llm-paper3-offline -->" in (ROOT / "docs" / "llm.md").read_text()


@pytest.mark.parametrize("path", COMPARISONS, ids=lambda p: p.stem)
def test_recorded_verdicts_follow_the_present_rules(path):
    rec = json.loads(path.read_text())
    assert {"command", "commit", "date", "machine", "concurrent", "wall_time"} <= set(rec["provenance"])
    summary = rec["summary"]
    for row in summary["rows"]:
        if row["status"] != "finished":
            continue
        again = {c["claim"]: c["verdict"] for c in judge(row, {}, row["model"])}
        recorded = {c["claim"]: c["verdict"] for c in summary["claims"][row["model"]]}
        for claim in ("domain_restriction", "sula"):  # judged from the row alone
            assert again[claim] == recorded[claim], (row["model"], claim)
