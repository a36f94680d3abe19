import json

import pytest

from windtunnel.train.config import RunConfig
from windtunnel.train.trainer import train


@pytest.fixture
def short_training(tmp_path):
    """Train a 1-layer, 16-wide transformer for 20 steps on ``task`` (one thread) and return the
    run's result and its training losses: a few seconds, enough to see the loss go down."""

    def run(task: str, task_params: dict, **train_fields):
        cfg = RunConfig.build({
            "task": task, "task_params": task_params, "model": "transformer",
            "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
            "train": {"steps": 20, "batch_size": 32, "lr": 1e-2, "checkpoints": 2, "threads": 1, **train_fields},
            "eval": {"n_sequences": 64, "batch_size": 64, "n_boot": 10},
        })
        result = train(cfg, tmp_path / "run", progress=False)
        rows = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
        return result, [r["loss"] for r in rows]

    return run

