"""The committed comparisons of language models (results/llm/<name>.json): their tables in the docs
are rendered from them (tests/docs/test_results_pages.py re-renders every block), and their
verdicts are what the present claim rules give from the models' and controls' llm.json files kept
beside them (results/llm/<name>/), so a changed rule cannot leave old verdicts in the docs."""

import gzip
import json

import pytest
from docblocks import ROOT

from windtunnel.llm.claims import judge

COMPARISONS = sorted(p for p in (ROOT / "results" / "llm").glob("*.json") if "summary" in json.loads(p.read_text()))


def _read(path):
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def test_there_is_a_committed_comparison_and_docs_show_it():
    assert "paper3-offline" in [p.stem for p in COMPARISONS]
    assert "<!-- results:llm-paper3-offline -->" in (ROOT / "docs" / "llm.md").read_text()


@pytest.mark.parametrize("path", COMPARISONS, ids=lambda p: p.stem)
def test_recorded_verdicts_follow_the_present_rules(path):
    rec = json.loads(path.read_text())
    assert {"command", "commit", "date", "machine", "concurrent", "wall_time"} <= set(rec["provenance"])
    summary = rec["summary"]
    runs = path.with_suffix("")
    for row in summary["rows"]:
        if row["status"] != "finished":
            continue
        folder = runs / row["model"]
        doc = _read(folder / "llm.json.gz")
        controls = [_read(p) for p in sorted(folder.glob("control/*/llm.json.gz"))]
        assert controls, f"{row['model']}: no control kept in {folder}"
        again = [(c["claim"], c["verdict"], c["rests_on"]) for c in judge(doc, controls)]
        recorded = [(c["claim"], c["verdict"], c["rests_on"]) for c in summary["claims"][row["model"]]]
        assert again == recorded, row["model"]


@pytest.mark.parametrize("path", COMPARISONS, ids=lambda p: p.stem)
def test_random_weight_models_hold_no_claim(path):
    """A random-weight model against another random model of its shape can hold no claim about
    learned geometry: the rules' edge that matters most, on the committed run."""
    summary = json.loads(path.read_text())["summary"]
    for row in summary["rows"]:
        if row.get("random_weights") and row["status"] == "finished":
            for c in summary["claims"][row["model"]]:
                assert c["verdict"] not in ("holds", "partly"), (row["model"], c["claim"], c["verdict"])
