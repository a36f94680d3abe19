"""benchmarks/bench_tune.py: the table it records as committed data, from hand-given timings."""

from __future__ import annotations

import argparse
import json
import sys

from _benchmark_script import BENCHMARKS, load

SCRIPT = BENCHMARKS / "bench_tune.py"
bench = load("bench_tune")
sys.path.insert(0, str(SCRIPT.parents[1] / "scripts" / "results"))
from _tables import render_table  # noqa: E402


def test_the_record_gives_each_search_against_one_run_with_its_provenance(tmp_path):
    args = argparse.Namespace(task="hmm", model="transformer", steps=300, full=False, concurrent="nothing else")
    rows = [("one run", 100.0, 300), ("the default search", 190.0, 630), ("plain halving", 150.0, 540)]
    bench.record(tmp_path / "cost.json", args, rows)
    doc = json.loads((tmp_path / "cost.json").read_text())
    assert doc["title"].endswith("the default search 1.90x one run in wall time, 2.10x in optimiser steps")
    assert doc["provenance"]["command"] == "python benchmarks/bench_tune.py --task hmm --model transformer --steps 300"
    assert doc["provenance"]["concurrent"] == "nothing else" and len(doc["provenance"]["commit"]) == 40
    assert [(r["wall_runs"], r["steps_runs"]) for r in doc["rows"]] == [(1.0, 1.0), (1.9, 2.1), (1.5, 1.8)]
    assert "| the default search | 190 | 1.9 | 630 | 2.1 |" in render_table(doc)


def test_the_candidates_at_each_comparison_are_counted_from_the_results_int_steps():
    from types import SimpleNamespace

    result = SimpleNamespace(rung_steps=[30, 90, 300], candidates=[
        {"scores": {30: 0.5}}, {"scores": {30: 0.4, 90: 0.3}}, {"scores": {30: 0.3, 90: 0.2, 300: 0.1}}])
    assert bench.kept_at(result) == [3, 2, 1]
