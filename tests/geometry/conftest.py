import pytest
import torch

from windtunnel.train.config import RunConfig
from windtunnel.train.trainer import train


def tiny_run_config(task="bijection", task_params=None, model="transformer", model_params=None, steps=30, **eval_):
    return RunConfig.build({
        "task": task,
        "task_params": task_params if task_params is not None else {"V": 6, "L": 5},
        "model": model,
        "model_params": model_params if model_params is not None else {"n_layers": 2, "n_heads": 2, "d_model": 16},
        "train": {"steps": steps, "batch_size": 8, "lr": 3e-3, "checkpoints": 4, "threads": 0},
        "eval": {"n_sequences": 32, "batch_size": 32, "n_boot": 10, **eval_},
    })


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from a second thread, and lose a lot when the cores are busy."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Train a tiny run once per module: ``trained(name, **tiny_run_config kwargs)`` -> run dir."""
    made = {}

    def get(name, **kw):
        if name not in made:
            made[name] = train(tiny_run_config(**kw), tmp_path_factory.mktemp(name), progress=False).run_dir
        return made[name]

    return get
