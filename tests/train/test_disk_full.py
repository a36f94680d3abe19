"""A full disk (ENOSPC injected at each write point): a clear error naming the path, nothing
half-written, every earlier result readable, and a resume that continues exactly."""

import errno
import json

import pytest
import torch
from test_trainer import final_weights
from typer.testing import CliRunner

from windtunnel import files
from windtunnel.cli import app
from windtunnel.files import DiskFullError
from windtunnel.report.page import write_report
from windtunnel.train.checkpoint import list_checkpoints, load_weights, read_state
from windtunnel.train.trainer import build, train


def fill_disk(monkeypatch, name, after=0):
    """Every write to a file called ``name`` after the first ``after`` ones fails with ENOSPC."""
    real, seen = files._write, {"n": 0}

    def write(path, f, data):
        if path.name == name:
            seen["n"] += 1
            if seen["n"] > after:
                f.write(data[: len(data) // 2])  # a partial write, as a full disk leaves it
                raise OSError(errno.ENOSPC, "No space left on device")
        real(path, f, data)

    monkeypatch.setattr(files, "_write", write)


def assert_nothing_half_written(run_dir):
    stray = [p for p in run_dir.rglob("*") if p.name.startswith(".") and p.name != ".lock"]
    assert not stray, stray
    assert not (run_dir / ".lock").exists()
    _, model = build(json_config(run_dir))
    for _, path in list_checkpoints(run_dir):
        read_state(path)
        load_weights(model, path)
    text = (run_dir / "metrics.jsonl").read_text()
    assert text == "" or text.endswith("\n")
    [json.loads(line) for line in text.splitlines()]


def json_config(run_dir):
    from windtunnel.train.config import read_run_config

    return read_run_config(run_dir / "config.json")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    from windtunnel.train.config import RunConfig

    cfg = RunConfig.build({
        "task": "bijection", "task_params": {"V": 6, "L": 5}, "model": "transformer",
        "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
        "train": {"steps": 30, "batch_size": 8, "lr": 3e-3, "checkpoints": 4, "threads": 1, "eval_every": 5,
                  "resume_every_s": 1e-6},
        "eval": {"n_sequences": 64, "batch_size": 32, "n_boot": 20},
    })
    out = tmp_path_factory.mktemp("clean")
    train(cfg, out, progress=False)
    return cfg, out


@pytest.mark.parametrize("name, after", [("model.safetensors", 5), ("optim.safetensors", 5), ("state.json", 5),
                                         ("metrics.jsonl", 2), ("eval.json", 0), ("config.json", 0)])
def test_full_disk_at_each_write_point(clean, tmp_path, monkeypatch, name, after):
    cfg, clean_dir = clean
    fill_disk(monkeypatch, name, after)
    with pytest.raises(DiskFullError, match=f"no space left on the device while writing .*{name}") as info:
        train(cfg, tmp_path, progress=False)
    assert info.value.path.name == name
    monkeypatch.undo()
    if name != "config.json":
        assert_nothing_half_written(tmp_path)
    res = train(cfg, tmp_path, progress=False)  # space freed: the same call continues
    (sa, wa), (sb, wb) = final_weights(clean_dir), final_weights(tmp_path)
    assert sa == sb == res.steps == 30 and all(torch.equal(wa[k], wb[k]) for k in wa)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 31))
    ref = json.loads((clean_dir / "eval.json").read_text())
    got = json.loads((tmp_path / "eval.json").read_text())
    assert got["lengths"] == ref["lengths"]


def test_full_disk_while_writing_a_report_keeps_the_old_one(clean, monkeypatch):
    _, run_dir = clean
    paths = write_report(run_dir)
    before = paths["html"].read_text()
    fill_disk(monkeypatch, "report.html")
    with pytest.raises(DiskFullError, match="report.html"):
        write_report(run_dir)
    assert paths["html"].read_text() == before
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".report")]


def test_full_disk_is_exit_code_5_with_the_path(clean, monkeypatch):
    _, run_dir = clean
    fill_disk(monkeypatch, "eval.json")
    res = CliRunner().invoke(app, ["eval", str(run_dir)])
    assert res.exit_code == 5, res.output
    assert f"error: no space left on the device while writing {run_dir / 'eval.json'}" in res.output
    assert json.loads((run_dir / "eval.json").read_text())["steps"] == 30
