"""`windtunnel diagnose` on a tiny trained run."""

import json

from typer.testing import CliRunner

from windtunnel.cli import app

runner = CliRunner()


def test_diagnose_writes_json_markdown_and_plots(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, [
        "train", "--task", "bijection", "--model", "transformer", "--quiet", "--out", str(out),
        "--set", 'task_params={"V": 6, "L": 5}', "--set", 'model_params={"n_layers": 2, "n_heads": 2, "d_model": 16}',
        "--set", "train.steps=20", "--set", "train.batch_size=8", "--set", "eval.n_sequences=32", "--set", "eval.n_boot=10",
    ])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["diagnose", str(out), "--analyses", "key_frame,attention,ablation", "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{"):])
    assert set(doc["analyses_run"]) == {"key_frame", "attention", "ablation"}
    assert doc["results"]["key_frame"] and doc["model"] == "transformer"
    assert (out / "diagnostics.json").exists() and (out / "diagnostics.md").exists()
    assert any((out / "plots" / "geometry").iterdir())
    res = runner.invoke(app, ["diagnose", str(out), "--analyses", "nonsense"])
    assert res.exit_code == 2 and "nonsense" in res.output
    res = runner.invoke(app, ["diagnose", str(tmp_path / "nowhere")])
    assert res.exit_code in (2, 3)
