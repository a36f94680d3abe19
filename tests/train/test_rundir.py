"""RunDir: the one way to open a run folder."""

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
