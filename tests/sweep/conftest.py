import json

import pytest
import torch
from sweep_tiny import tiny_sweep_doc

from windtunnel.sweep import SweepConfig


@pytest.fixture
def tiny_sweep():
    def make(**changes) -> SweepConfig:
        return SweepConfig.build(tiny_sweep_doc(**changes))

    return make


@pytest.fixture
def tiny_sweep_file(tmp_path):
    def make(**changes):
        path = tmp_path / "tiny.json"
        path.write_text(json.dumps(tiny_sweep_doc(**changes)))
        return path

    return make


@pytest.fixture(autouse=True, scope="package")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
