"""`windtunnel train`, `eval` and `run` end to end on tiny settings."""

import json

from typer.testing import CliRunner

from windtunnel.cli import app

runner = CliRunner()
TINY = [
    "--set", 'task_params={"V": 6, "L": 5}', "--set", "train.steps=8", "--set", "train.batch_size=8",
    "--set", "eval.n_sequences=32", "--set", "eval.n_boot=10", "--quiet",
]


def test_train_then_eval(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "--task", "bijection", "--model", "lstm", *TINY,
                              "--set", 'model_params={"n_layers": 1, "d_model": 16}', "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "entropy error" in res.output and (out / "plots" / "calibration.png").stat().st_size > 1000
    first = json.loads((out / "eval.json").read_text())
    res = runner.invoke(app, ["eval", str(out), "--json"])
    assert res.exit_code == 0, res.output
    again = json.loads(res.output)
    assert again["lengths"]["5"]["entropy_error_mean_abs"] == first["lengths"]["5"]["entropy_error_mean_abs"]


def test_eval_errors(tmp_path):
    res = runner.invoke(app, ["eval", str(tmp_path)])
    assert res.exit_code == 3 and "not a run directory" in res.output
    res = runner.invoke(app, ["run", "--models", ","])
    assert res.exit_code == 2 and "models is empty" in res.output
    res = runner.invoke(app, ["train", "--model", "nope"])
    assert res.exit_code == 2 and "unknown model 'nope'" in res.output


def test_run_compares_capacity_matched_models(tmp_path, assert_printed_as_in):
    res = runner.invoke(app, ["run", "--models", "transformer,lstm,mlp", *TINY,
                              "--set", 'model_params={"n_layers": 1}', "--out", str(tmp_path / "cmp")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    counts = {r["model"]: r["n_params"] for r in summary["table"]}
    assert set(counts) == {"transformer", "lstm", "mlp"}
    ref = counts["transformer"]
    assert all(abs(c - ref) / ref <= 0.02 for c in counts.values()), counts
    for name in ("summary.md", "calibration.png", "table.csv", "results.csv", "sweep.json"):
        assert (tmp_path / "cmp" / name).exists()
    assert "(uniform)" in res.output
    assert_printed_as_in(res.output, (tmp_path / "cmp" / "summary.md").read_text(), "transformer")
    assert "v3 table" not in res.output  # V = 6 is not the paper's setting: no paper number beside it

