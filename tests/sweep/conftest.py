import json

import pytest
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
