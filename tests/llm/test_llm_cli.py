"""`windtunnel llm MODEL --name value ...` through the command line, on a tiny local model."""

import json

from typer.testing import CliRunner

from windtunnel.cli import app

runner = CliRunner()


def test_llm_command_on_a_local_folder(tiny_models, tmp_path):
    out = tmp_path / "out"
    res = runner.invoke(app, [
        "llm", str(tiny_models["llama"]), "--analyses", "key_orthogonality,attention_focusing", "--out", str(out),
        "--n-bootstrap", "20", "--n-null", "10", "--n-per-quintile", "2", "--batch-size", "16",
    ])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "llm.json").read_text())
    assert set(doc["analyses"]) == {"key_orthogonality", "attention_focusing"} and doc["results"]
    assert (out / "llm.md").exists()
    res = runner.invoke(app, ["llm", str(tiny_models["llama"]), "--out", str(out), "--no-such-option", "1"])
    assert res.exit_code == 2 and "no_such_option" in res.output
