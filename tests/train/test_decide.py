"""Decide early when the answer is in: a run stops once its probe shows the primitive realised and
the full evaluation there agrees; when it disagrees the run resumes to its end bit for bit."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from windtunnel.evaluate.record import primitive_score, realised_at
from windtunnel.train.config import RunConfig
from windtunnel.train.decide import DECISION_FILE, Decision, decided
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import Until, train


def tiny(**train_fields) -> RunConfig:
    """A 1-layer transformer on a 5-symbol bijection, probed every 5 of 120 steps."""
    return RunConfig.build({
        "task": "bijection", "task_params": {"V": 5, "L": 4}, "model": "transformer",
        "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
        "train": {"steps": 120, "batch_size": 16, "lr": 3e-2, "eval_every": 5, "checkpoints": 2, "threads": 1,
                  "resume_every_s": 3600, **train_fields},
        "eval": {"n_sequences": 64, "batch_size": 64, "n_boot": 10},
    })


#: low enough for the tiny model to reach well within its 120 steps (its probe score passes 0.15 about
#: half-way and keeps rising)
EASY = Decision("kl_bayes_model", threshold=0.15, patience=2)


def final_weights(run_dir) -> dict[str, torch.Tensor]:
    step, folder = RunDir(run_dir).checkpoint()
    return load_file(folder / "model.safetensors")


def rows_without_clock(run_dir) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("seconds", "probe_score")} for r in RunDir(run_dir).metrics()]


def test_the_realisation_rule_by_hand():
    assert realised_at([(5, 0.95), (10, 0.8), (15, 0.91), (20, 0.93), (25, 0.97)]) == 20
    assert realised_at([(5, 0.95), (10, None), (15, 0.92)]) is None
    assert realised_at([(5, 0.95)], patience=1) == 5
    assert primitive_score("accuracy", 0.55, 0.1) == pytest.approx(0.5)


def test_a_run_stops_where_its_probe_and_its_evaluation_agree(tmp_path):
    full = train(tiny(), tmp_path / "full", progress=False)
    early = train(tiny(), tmp_path / "early", progress=False, until=Until(decide=EASY))
    ev = early.eval
    assert decided(ev, EASY) and ev["steps"] == early.steps < 120 and ev["decided"]["step"] == early.steps
    assert ev["steps_to_realise"] == early.steps
    rows = RunDir(tmp_path / "early").metrics()
    scores = [(r["step"], r["probe_score"]) for r in rows if "probe_score" in r]
    assert realised_at(scores, 0.15, 2) == early.steps and rows[-1]["step"] == early.steps
    assert EASY.eval_score(ev) >= 0.15
    assert json.loads((tmp_path / "early" / DECISION_FILE).read_text())["realised"] is True
    # the training up to the decision is the full run's, step for step
    assert rows_without_clock(tmp_path / "early") == rows_without_clock(tmp_path / "full")[: early.steps]
    # asked again with the same rule: finished, nothing trains; without a rule it trains on to the end
    again = train(tiny(), tmp_path / "early", progress=False, until=Until(decide=EASY))
    assert again.steps == early.steps and again.eval == ev
    resumed = train(tiny(), tmp_path / "early", progress=False)
    assert resumed.steps == 120 and not decided(resumed.eval, None)
    assert all(torch.equal(a, b) for a, b in zip(final_weights(tmp_path / "early").values(),
                                                 final_weights(tmp_path / "full").values()))
    assert resumed.eval["lengths"] == full.eval["lengths"]


def test_an_evaluation_that_disagrees_sends_the_run_on_to_its_end(tmp_path, monkeypatch):
    full = train(tiny(), tmp_path / "full", progress=False)
    monkeypatch.setattr(Decision, "eval_score", lambda self, ev: 0.0)  # the probe says yes, the evaluation no
    res = train(tiny(), tmp_path / "run", progress=False, until=Until(decide=EASY))
    assert res.steps == 120 and not decided(res.eval, None)
    record = json.loads((tmp_path / "run" / DECISION_FILE).read_text())
    assert record["realised"] is False and 0 < record["step"] < 120
    # the pause changed nothing: the same log and the same weights as an uninterrupted run
    assert rows_without_clock(tmp_path / "run") == rows_without_clock(tmp_path / "full")
    assert all(torch.equal(a, b) for a, b in zip(final_weights(tmp_path / "run").values(),
                                                 final_weights(tmp_path / "full").values()))
    assert res.eval["lengths"] == full.eval["lengths"]


def test_a_run_that_does_not_realise_trains_its_whole_budget(tmp_path):
    res = train(tiny(), tmp_path / "run", progress=False, until=Until(decide=Decision("kl_bayes_model", threshold=1.0)))
    assert res.steps == 120 and "decided" not in res.eval and not (tmp_path / "run" / DECISION_FILE).exists()
    with pytest.raises(ValueError, match="one the probe logs"):
        Decision("kl_model_bayes")
