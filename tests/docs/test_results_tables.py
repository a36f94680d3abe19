"""The docs' tables of committed results are rendered from the data in results/, not typed: render
them again and compare, and check the committed table.csv against the committed summary.json."""

import csv
import importlib.util
import json

from docblocks import ROOT

spec = importlib.util.spec_from_file_location("render_llm_results", ROOT / "scripts" / "render_llm_results.py")
render_llm_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render_llm_results)


def test_results_blocks_are_rendered_from_the_committed_data():
    text = render_llm_results.DOC.read_text()
    names = [m.group("name") for m in render_llm_results.BLOCK.finditer(text)]
    assert "paper3-offline" in names
    assert render_llm_results.render(text) == text, "run: .venv/bin/python scripts/render_llm_results.py"


def test_committed_table_matches_its_summary():
    for folder in (ROOT / "results").iterdir():
        if not (folder / "summary.json").is_file():
            continue
        summary = json.loads((folder / "summary.json").read_text())
        with open(folder / "table.csv") as fh:
            rows = list(csv.DictReader(fh))
        assert [r["model"] for r in rows] == [r["model"] for r in summary["rows"]]
        for row, want in zip(rows, summary["rows"]):
            for key in ("focusing", "mixed_pc1_pc2", "key_orth_mean", "sula_mae", "claim_focusing"):
                if want.get(key) is None:
                    assert row.get(key, "") == ""
                elif isinstance(want[key], float):
                    assert abs(float(row[key]) - want[key]) <= 1e-5 * max(1.0, abs(want[key]))
                else:
                    assert row[key] == str(want[key])
        prov = json.loads((folder / "provenance.json").read_text())
        assert {"command", "git_commit", "date", "machine", "what_else_ran"} <= set(prov)
