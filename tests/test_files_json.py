"""windtunnel.files.jsonable: what every JSON result file (diagnostics, llm, scorecard) goes through."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from windtunnel.files import jsonable


def test_numpy_and_torch_values_become_plain_json():
    doc = {"a": np.float64("nan"), "b": np.arange(2), "c": (np.bool_(True), np.int32(3)), 4: torch.tensor([0.5, math.inf]),
           "d": torch.tensor(2.5), "e": Path("runs/x"), "f": None, "g": np.float32(0.25)}
    out = jsonable(doc)
    assert out == {"a": None, "b": [0, 1], "c": [True, 3], "4": [0.5, None], "d": 2.5, "e": "runs/x", "f": None, "g": 0.25}
    assert type(out["c"][0]) is bool and type(out["c"][1]) is int and type(out["g"]) is float


def test_anything_else_is_refused():
    with pytest.raises(TypeError, match="cannot write a object as JSON"):
        jsonable({"x": object()})
