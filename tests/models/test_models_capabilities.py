"""The capabilities every architecture declares (what the geometry analyses read): attention,
head ablation, a recurrent state, key / OV weights, the final norm and the per-layer states,
named ``blocks.{i}.resid_post`` by every architecture."""

import pytest
import torch
from conftest import SEPVOCAB, SMALL

from windtunnel.models import WindModel, make_model, model_names

#: name -> (has_attention, has_head_ablation, has_recurrent_state, has key weights)
EXPECTED = {
    "transformer": (True, True, False, True),
    "tinygpt": (True, True, False, True),  # the transformer class with the authors' defaults
    "swa_transformer": (True, True, False, True),
    "linear_attention": (True, True, True, True),  # keys: W_K before the feature map
    "deltanet": (False, True, True, False),  # P is no distribution; keys pass conv + norm
    "hybrid": (False, False, True, False),  # attention at some layers only, no ablation hooks
    "mamba": (False, False, True, False),
    "mamba2": (False, False, True, False),
    "lstm": (False, False, True, False),
    "gru": (False, False, True, False),
    "mlp_per_position": (False, False, False, False),
    "mlp_prefix": (False, False, False, False),
}


def test_every_registered_architecture_is_listed():
    assert {SMALL[k][0] for k in EXPECTED} == set(model_names())


def test_the_defaults_say_none():
    assert (WindModel.has_attention, WindModel.has_head_ablation, WindModel.has_recurrent_state) == (False,) * 3


@pytest.mark.parametrize("key", list(EXPECTED))
def test_capabilities(key):
    name, params = SMALL[key]
    torch.manual_seed(0)
    m = make_model(name, SEPVOCAB, params).eval()
    attn, ablate, rec, keys = EXPECTED[key]
    assert (m.has_attention, m.has_head_ablation, m.has_recurrent_state) == (attn, ablate, rec)
    assert (m.key_weights(0) is not None) == keys and (m.ov_weights(0) is not None) == keys
    # one naming scheme: the per-layer states are blocks.{i}.resid_post, every layer, in order
    n = m.config.n_layers
    assert m.layer_state_names() == [f"blocks.{i}.resid_post" for i in range(n)]
    assert not [c for c in m.capture_names() if c.startswith("layers.") or c.endswith(".hidden")]
    # the final norm is what mix applies last: the head reads norm(last layer state)
    norm = m.final_norm
    assert isinstance(norm, torch.nn.Module)
    x = torch.randint(0, 40, (2, SEPVOCAB.seq_len))
    _, cache = m.run_with_cache(x, [m.layer_state_names()[-1], "final"])
    last = cache[m.layer_state_names()[-1]]
    assert torch.allclose(norm(last), cache["final"], atol=1e-5)
    if attn:
        assert all(f"blocks.{i}.attn.{k}" in m.capture_names() for i in range(n) for k in ("pattern", "q", "k", "z"))
        _, cache = m.run_with_cache(x, ["blocks.0.attn.pattern"])
        p = cache["blocks.0.attn.pattern"]
        assert (p >= 0).all() and torch.allclose(p.sum(-1), torch.ones(()), atol=1e-4)  # rows are distributions
    if ablate:
        assert tuple(m.head_mask.shape) == (n, m.config.n_heads)
        m.set_bypass(0, "attn")
        m.clear_ablations()
        assert m.bypass == [None] * n
    if keys:  # the keys the model computes are x W_K^T of the normed layer input
        h = m.embed(x)
        _, cache = m.run_with_cache(x, ["embed", "blocks.0.attn.k"])
        want = torch.einsum("btd,hkd->bhtk", m.attention_norm(0)(cache["embed"]).double(), m.key_weights(0))
        assert torch.allclose(want.float(), cache["blocks.0.attn.k"], atol=1e-5)
        assert h.shape[-1] == m.key_weights(0).shape[-1]
