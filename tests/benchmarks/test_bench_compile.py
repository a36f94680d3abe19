"""benchmarks/bench_compile.py: the three step variants of a cell, and a compile failure kept as a finding."""

from __future__ import annotations

import torch
from _benchmark_script import load

bench = load("bench_compile")


def test_a_cell_has_its_three_steps_and_a_failed_compile_is_named(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda model: model)  # the eager model: no inductor in the test
    steps, _, batch = bench.variants("bijection", "transformer")
    assert batch == 64 and set(steps) == {"eager", "fused", "compiled"}
    times = bench.interleaved_times(steps, 2, warmup=0)
    assert all(len(v) == 2 and min(v) > 0 for v in times.values())

    def broken(model):
        def step(*a, **k):
            raise RuntimeError("invalid shape dimension")
        return step

    monkeypatch.setattr(torch, "compile", broken)
    steps, _, _ = bench.variants("bijection", "transformer")
    assert steps["compiled"] == "RuntimeError: invalid shape dimension"
    assert callable(steps["eager"]) and callable(steps["fused"])


def test_a_users_model_is_matched_to_the_transformers_size():
    task, batch, params = bench.build("bijection", "my_mixer:EMAMixer")
    assert batch == 64 and params  # sized by the knob, from the transformer's shape
