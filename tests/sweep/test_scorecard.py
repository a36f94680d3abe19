"""windtunnel scorecard: a user's mixer from a file outside the package, trained, scored and diagnosed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.geometry.diagnose import run_diagnostics
from windtunnel.sweep import expand
from windtunnel.sweep.scorecard import PRIMITIVES, scorecard_sweep
from windtunnel.train.trainer import build

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
USER = "my_mixer:EMAMixer"
TINY = ["train.steps=3", "train.batch_size=8", "train.checkpoints=2", "train.threads=1", "eval.n_sequences=32",
        "eval.batch_size=32", "eval.n_boot=10", "model_params.n_layers=1", "model_params.d_model=32"]


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("my_mixer", None)


def test_the_scorecard_sweep_covers_the_tunnels_of_its_profile(examples_on_path):
    quick = scorecard_sweep(USER, "quick", seeds=2)
    assert [e.task for e in quick.experiments] == [task for task, _ in PRIMITIVES.values()]
    assert all(e.models == ["transformer", USER] and e.match_capacity == "transformer" for e in quick.experiments)
    assert quick.grid == {"train.seed": [0, 1]} and set(quick.primitives.rules) == set(PRIMITIVES)
    paper = scorecard_sweep(USER, "paper")  # the paper profiles have Paper I's three tunnels
    assert set(paper.primitives.rules) == {"accumulation", "transport", "binding"}
    with pytest.raises(ConfigError, match="has no config for task"):
        scorecard_sweep(USER, "paper", primitives=["sula"])
    with pytest.raises(ConfigError, match="choose from accumulation"):
        scorecard_sweep(USER, primitives=["memory"])
    # the user model, named by no profile, is sized on its knob to the transformer's count
    runs = expand(scorecard_sweep(USER, primitives=["transport"]))
    counts = {r.config.model: build(r.config)[1].n_params() for r in runs}
    assert runs[1].config.model_params["init"] == "torch"  # the quick HMM profile's model_defaults
    assert abs(counts[USER] - counts["transformer"]) / counts["transformer"] <= 0.02


def test_scorecard_trains_scores_and_diagnoses_a_user_mixer(tmp_path, examples_on_path):
    out = tmp_path / "card"
    args = ["scorecard", USER, "--primitives", "accumulation,continuous", "--out", str(out), "--quiet"]
    for o in TINY:
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    card = json.loads((out / "scorecard.json").read_text())
    assert card["model"] == USER and card["reference"] == "transformer" and card["finished"] == card["n_runs"] == 4
    for prim in ("accumulation", "continuous"):
        row = card["primitives"][prim]
        for who in ("model", "transformer"):
            assert row[who]["verdict"] in ("yes", "partial", "no") and row[who]["score_lo"] <= row[who]["score_hi"]
    page = (out / "report.md").read_text()
    assert f"## Scorecard: {USER}" in page and "| accumulation | bijection" in page
    assert (out / "report.html").is_file()
    # the user model's run folder opens, and every analysis that applies runs; the rest say why not
    run = next(p for p in out.iterdir() if p.name.startswith("bijection-my_mixer.EMAMixer-"))
    doc = run_diagnostics(run, progress=False)
    assert "value_manifold" in doc["analyses_run"] and "logit_lens" in doc["analyses_run"]
    assert "attention" in doc["skipped"] and doc["skipped"]["attention"]


def test_docs_show_the_example_mixer_whole():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    assert (EXAMPLES / "my_mixer.py").read_text().rstrip("\n") in docs
