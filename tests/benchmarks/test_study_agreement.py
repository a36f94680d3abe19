"""benchmarks/study_agreement.py: each rung of the decisive scorecard against the full-budget verdict,
run or implied by the ladder search, and every difference classified."""

from __future__ import annotations

from pathlib import Path

from _benchmark_script import load

study = load("study_agreement")


def full(*cells):
    return [{"mark": m, "score": s} for m, s in cells]


def test_cells_run_and_implied_agree_or_say_why():
    # transport: the profile's rung (hardest) not realised, the search went down: all three run
    new = [{"verdict": "yes", "score": 0.97, "steps_to_realise": 600, "budget_steps": 1500},
           {"verdict": "partial", "score": 0.81, "steps_to_realise": None, "budget_steps": 1500},
           {"verdict": "partial", "score": 0.69, "steps_to_realise": None, "budget_steps": 1500}]
    rows = study.compare("m", "transport", full(("✓", 0.96), ("~", 0.81), ("~", 0.69)), new)
    assert [r["agrees"] for r in rows] == [True, True, True]
    assert rows[0]["how"] == "decided early (realised by step 600 of 1500)" and rows[1]["how"] == "trained to the end"
    # binding realised at its profile rung: the rung below is implied realised (the full budget says ~: a
    # ladder that is not monotone), the rung above was run and fails in both
    new = [None, {"verdict": "yes", "score": 0.92, "steps_to_realise": 800, "budget_steps": 800},
           {"verdict": "no", "score": 0.03, "steps_to_realise": None, "budget_steps": 800}]
    rows = study.compare("m", "binding", full(("~", 0.77), ("✓", 0.92), ("✗", 0.03)), new)
    assert [r["agrees"] for r in rows] == [False, True, True]
    assert rows[0]["new"] == "✓ (not needed)" and rows[0]["how"] == "implied by rung 1" and "not monotone" in rows[0]["why"]
    assert rows[1]["how"] == "trained to the end"  # realised only at its last step: no early decision
    # a rung above one not realised is implied not realised; that agrees with ~ and ✗, not with ✓
    new = [{"verdict": "no", "score": 0.1, "budget_steps": 10}, {"verdict": "no", "score": 0.2, "budget_steps": 10}, None]
    assert [r["agrees"] for r in study.compare("m", "x", full(("✗", 0.1), ("✗", 0.2), ("~", 0.6)), new)] == [True] * 3
    assert not study.compare("m", "x", full(("✗", 0.1), ("✗", 0.2), ("✓", 0.95)), new)[2]["agrees"]
    # decided early as realised where the full-budget run ends below: it unlearned; the rung below, implied
    # realised by it, is blamed on it rather than on the ladder
    new = [None, {"verdict": "yes", "score": 0.93, "steps_to_realise": 400, "budget_steps": 1200}]
    low, row = study.compare("m", "x", full(("~", 0.7), ("~", 0.88)), new)
    assert not row["agrees"] and "unlearns" in row["why"] and "0.88" in row["why"]
    assert not low["agrees"] and low["why"].startswith("implied by rung 1, which itself differs")
    # a rung the search needed without a result is a difference, never a silent implication
    rows = study.compare("m", "x", full(("✓", 0.95), ("✗", 0.1)), [{"missing": True}, new[1]])
    assert rows[0]["how"] == "missing" and not rows[0]["agrees"] and "no result" in rows[0]["why"]


def test_the_transformer_row_is_the_shipped_reference_against_mixers_quick():
    new = study.new_protocol(Path("unused"), "transformer")
    assert [len(v) for v in new.values()] == [len(v) for v in study.LADDERS.values()]
    rows = [r for prim in study.LADDERS for r in study.compare("transformer", prim, study.full_budget("transformer", prim),
                                                               new[prim])]
    assert len(rows) == 22 and all(r["how"] == "shipped reference" for r in rows)
