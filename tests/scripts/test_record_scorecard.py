"""scripts/record_scorecard.py: a scorecard.json as the committed record's rows (verdict, rate, rungs)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import record_scorecard  # noqa: E402


def test_a_row_holds_the_verdict_its_searched_rate_and_the_rungs_trained():
    cell = {"verdict": "no", "score": -0.084, "unsettled": True, "steps_to_realise": None, "budget_steps": 800}
    ref = {"verdict": "yes", "score": 0.999, "steps_to_realise": 480, "budget_steps": 800}
    doc = {"model": "m:M", "reference": "transformer",
           "primitives": {"binding": {"task": "recall", "model": cell, "transformer": ref,
                                      "tuning": {"m:M": {"best": {"train.lr": 0.00316}}}},
                          "sula": {"task": "sula", "model": {**ref, "steps_to_realise": 160}, "transformer": ref}},
           "ladder": {"binding": [{"needed": True}, {"needed": True}, {"needed": False}], "sula": [{}]},
           "highest": {"m:M": {"binding": None, "sula": "sula"}, "transformer": {"binding": "recall", "sula": "sula"}}}
    binding, sula = record_scorecard.rows(doc)
    assert binding == {"primitive": "binding", "tunnel": "recall", "model": "no? -0.08", "lr": "0.00316",
                       "reference": "yes 1.00", "highest_rung_model": "none", "highest_rung_reference": "recall",
                       "rungs_trained": "2 of 3", "steps_to_realise": "-"}
    assert sula["lr"] == "-" and sula["steps_to_realise"] == "160 of 800" and sula["rungs_trained"] == "1 of 1"
