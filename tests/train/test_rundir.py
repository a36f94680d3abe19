"""RunDir: the one way to open a run folder."""

import json

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.train.checkpoint import CheckpointError
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import train


def test_rundir_reads_what_train_wrote(tiny_config, tmp_path):
    cfg = tiny_config()
    res = train(cfg, tmp_path / "run", progress=False)
    run = RunDir.open(tmp_path / "run")
    assert run.config == cfg
    steps = [s for s, _ in run.checkpoints()]
    assert steps[0] == 0 and steps[-1] == cfg.train.steps
    assert run.checkpoint()[0] == cfg.train.steps
    assert run.eval() == res.eval
    task, model = run.load_model()
    assert task.name == "bijection"
    _, again = run.load_model(cfg.train.steps)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    _, first = run.load_model(0)
    assert any(not torch.equal(a, b) for a, b in zip(model.state_dict().values(), first.state_dict().values()))
    rows = run.metrics()
    assert rows and rows[-1]["step"] <= cfg.train.steps
    assert all(r["step"] <= 10 for r in run.metrics(10))
    assert "train_seconds" in run.state()
    with pytest.raises(CheckpointError, match="no checkpoint at step 7"):
        run.checkpoint(7)


def test_rundir_errors_name_the_folder(tmp_path):
    with pytest.raises(ConfigError, match="is not a run directory"):
        RunDir.open(tmp_path)
    with pytest.raises(CheckpointError, match="is not a run directory"):
        RunDir.open(tmp_path, not_a_run=CheckpointError)
    assert RunDir(tmp_path).eval() is None and RunDir(tmp_path).metrics() == []
    with pytest.raises(CheckpointError, match="no checkpoint to evaluate"):
        RunDir(tmp_path).checkpoint(purpose="evaluate")


def test_metrics_reads_complete_lines_up_to_a_step(tmp_path):
    """RunDir.metrics: the records of metrics.jsonl in order, cut at ``upto``; a line still being
    appended (no newline yet) is not read, nor are blank lines."""
    rows = [{"step": s, "loss": 1.0 / s} for s in (1, 2, 5, 9)]
    run = RunDir(tmp_path)
    run.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n" + '{"step": 10, "lo')
    assert run.metrics() == rows
    assert run.metrics(5) == rows[:3] and run.metrics(0) == []
    assert run.metrics_path == tmp_path / "metrics.jsonl"


def test_write_config_creates_the_run_and_refuses_another_config(tiny_config, tmp_path):
    cfg = tiny_config()
    run = RunDir(tmp_path / "run")
    assert not run.is_run()
    run.write_config(cfg)
    assert run.is_run() and RunDir.open(run.path).config == cfg
    before = run.config_path.read_text()
    run.write_config(cfg)  # the same config again: nothing changes
    assert run.config_path.read_text() == before
    with pytest.raises(ConfigError, match="different config"):
        run.write_config(cfg.replace(train=cfg.train.replace(steps=cfg.train.steps + 1)))
    assert run.config_path.read_text() == before
