"""benchmarks/bench_scorecard_budget.py: a search priced leg by leg, its finalists included."""

from __future__ import annotations

from _benchmark_script import load

from windtunnel.train.config import RunConfig
from windtunnel.tune.search import SEARCH, TuneSpec

bench = load("bench_scorecard_budget")


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
