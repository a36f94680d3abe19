"""Mamba-2 through transformers: forward, backward, config checks, and the missing-package error."""

import sys

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.models import make_model


def test_forward_backward(sepvocab):
    pytest.importorskip("transformers")
    model = make_model("mamba2", sepvocab, dict(n_layers=2, d_model=64, tie_head=True))
    assert model.config.n_heads == 8 and model.config.chunk_size == 64
    x = torch.randint(0, 40, (4, 37))
    out, cache = model.run_with_cache(x, positions=torch.arange(0, 37, 2))
    assert out.shape == (4, 19, 20)
    assert cache["blocks.1.resid_post"].shape == cache["final"].shape == (4, 37, 64)
    torch.nn.functional.cross_entropy(model(x).flatten(0, 1), torch.randint(0, 20, (4 * 37,))).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_chunking_does_not_change_outputs(sepvocab):
    """A chunk size shorter than the sequence gives the same outputs as a single chunk."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    one_chunk = make_model("mamba2", sepvocab, dict(n_layers=2, d_model=32, head_dim=8)).eval()
    chunked = make_model("mamba2", sepvocab, dict(n_layers=2, d_model=32, head_dim=8, chunk_size=8)).eval()
    chunked.load_state_dict(one_chunk.state_dict())
    x = torch.randint(0, 40, (3, 37))
    torch.testing.assert_close(chunked(x), one_chunk(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("params, message", [
    (dict(d_model=20, head_dim=16), "expand \\* d_model = 40 must be a multiple of head_dim 16"),
    (dict(d_model=32, head_dim=16, n_groups=3), "n_groups 3 must divide the number of heads 4"),
])
def test_bad_head_layout(sepvocab, params, message):
    with pytest.raises(ConfigError, match=message):
        make_model("mamba2", sepvocab, params)


def test_clear_error_without_transformers(sepvocab, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` fail
    message = r"model 'mamba2' needs the optional package 'transformers' of the 'llm' extra .*make setup EXTRAS=llm"
    with pytest.raises(ConfigError, match=message):
        make_model("mamba2", sepvocab, dict(n_layers=1, d_model=16, head_dim=8))
