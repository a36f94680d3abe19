"""benchmarks/bench_scorecard_budget.py: a search priced leg by leg, its finalists included."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from windtunnel.train.config import RunConfig
from windtunnel.tune.search import SEARCH, TuneSpec

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scorecard_budget.py"
spec = importlib.util.spec_from_file_location("bench_scorecard_budget", SCRIPT)
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_scorecard_budget"] = bench
spec.loader.exec_module(bench)


def test_a_search_is_priced_in_steps_with_its_cooldowns_kept_candidates_and_finalists():
    cfg = RunConfig.build({"task": "bijection", "model": "transformer", "train": {"steps": 1000, "eval_every": 100}})
    per_step = {"step": 1.0, "probe": 0.0, "eval": 0.0}  # seconds: a leg costs its steps

    def steps(**kw) -> float:
        return sum(sec for leg in bench.search_stages(cfg, per_step, 0.0, TuneSpec(**SEARCH), **kw) for sec, _ in leg)

    # 5 x 100 + 5 cooldowns of 20, 3 x 200 + 3 cooldowns of 60, one finalist x 700: 2.08 runs
    assert steps() == 500 + 100 + 600 + 180 + 700
    assert steps(finalists=2) - steps() == 700  # each further finalist: the rest of a run
    assert steps(guard_holds=True) == 500 + 100 + 1000 + 300 + 700  # every candidate to 30%: 2.6 runs
    assert steps(guard_holds=True, finalists=9) == 500 + 100 + 1000 + 300 + 5 * 700  # at most every one compared
