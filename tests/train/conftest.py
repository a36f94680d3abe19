import pytest

from windtunnel.train.config import RunConfig


@pytest.fixture
def tiny_config():
    """A run that trains in about a second: 1-layer transformer on a 6-symbol bijection."""

    def make(**train):
        return RunConfig.build(
            {
                "task": "bijection",
                "task_params": {"V": 6, "L": 5},
                "model": "transformer",
                "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
                "train": {"steps": 30, "batch_size": 8, "lr": 3e-3, "checkpoints": 4, **train},
                "eval": {"n_sequences": 64, "batch_size": 32, "n_boot": 20},
            }
        )

    return make
