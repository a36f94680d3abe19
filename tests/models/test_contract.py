"""User models by package.module:Class, and the contract check that names what is missing."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from windtunnel.config import ConfigError
from windtunnel.models import check_model, make_model, model_class, model_names
from windtunnel.tasks import make_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """A folder on sys.path for throw-away user modules (and the shipped examples)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith(("usermod_", "my_mixer"))]:
        del sys.modules[name]


def _write(folder: Path, name: str, body: str) -> None:
    head = "import torch\nfrom torch import nn\nfrom windtunnel.models import *\n"
    (folder / f"{name}.py").write_text(head + textwrap.dedent(body))


@pytest.mark.parametrize("task", ["bijection", "hmm", "recall", "regression", "sula"])
def test_every_builtin_model_keeps_the_contract(task):
    spec = make_task(task).spec
    for name in model_names():
        if name == "mamba2":
            pytest.importorskip("transformers")
        params = {"n_layers": 1} if name != "mlp" else {"n_layers": 1, "variant": "per_position"}
        check_model(make_model(name, spec, params), spec)


def test_the_example_user_mixer_loads_and_keeps_the_contract(user_modules):
    cls = model_class("my_mixer:EMAMixer")
    assert cls.name == "my_mixer:EMAMixer"
    for task in ("bijection", "regression"):
        spec = make_task(task).spec
        check_model(make_model("my_mixer:EMAMixer", spec, {"d_model": 16}), spec)


def test_a_non_causal_model_is_named(user_modules):
    _write(user_modules, "usermod_peek", """
        class Peek(WindModel):
            Config = ModelConfig
            def __init__(self, spec, config=None, **params):
                super().__init__(spec, config, **params)
                self.embed = InputAdapter(spec, 8, self.config.max_len)
                self.head = OutputHead(spec, 8)
            def capture_names(self):
                return ["embed", "final"]
            def mix(self, x, cache):
                return x + x.mean(1, keepdim=True)   # every position sees the whole sequence
    """)
    spec = make_task("bijection").spec
    with pytest.raises(ConfigError, match="not causal: changing the input from position 1"):
        check_model(make_model("usermod_peek:Peek", spec), spec)


def test_a_wrong_output_shape_is_named(user_modules):
    _write(user_modules, "usermod_shape", """
        class Flat(WindModel):
            Config = ModelConfig
            def __init__(self, spec, config=None, **params):
                super().__init__(spec, config, **params)
                self.embed = InputAdapter(spec, 8, self.config.max_len)
                self.head = nn.Linear(8, 3)
            def capture_names(self):
                return ["embed", "final"]
            def mix(self, x, cache):
                return x
            def _run(self, inputs, positions, cache):
                h = self.embed(inputs)
                return self.head(h if positions is None else h[:, positions])
    """)
    spec = make_task("bijection").spec
    with pytest.raises(ConfigError, match=r"must return shape \(B, T, O\)"):
        check_model(make_model("usermod_shape:Flat", spec), spec)


def test_missing_parts_are_named(user_modules):
    _write(user_modules, "usermod_bad", """
        class NotAModel(nn.Module):
            pass
        class NoConfig(WindModel):
            def mix(self, x, cache):
                return x
            def capture_names(self):
                return []
        class NoMix(WindModel):
            Config = ModelConfig
        class NoPositions(WindModel):
            Config = ModelConfig
            def mix(self, x, cache):
                return x
            def capture_names(self):
                return []
            def forward(self, inputs):
                return inputs
    """)
    cases = {
        "usermod_bad:NotAModel": "must be a subclass of windtunnel.models.WindModel",
        "usermod_bad:NoConfig": "needs a class attribute Config",
        "usermod_bad:NoMix": "does not implement mix",
        "usermod_bad:NoPositions": r"forward must accept \(inputs, positions=None\)",
        "usermod_bad:Missing": "has no attribute 'Missing'",
        "usermod_nowhere:Model": "cannot import module 'usermod_nowhere'",
        "not a name:X": "not a registered name nor package.module:Class",
    }
    for name, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            model_class(name)
