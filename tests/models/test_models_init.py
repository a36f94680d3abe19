"""The ``init`` option of the model contract: N(0, 0.02) (GPT-2, the authors' models) or PyTorch's
defaults, for every architecture; architecture-specific initialisations are kept either way."""

import math

import pytest
import torch

from windtunnel.models import make_model


def _seeded(name, spec, params, seed=0):
    torch.manual_seed(seed)
    return make_model(name, spec, params)


def test_every_architecture_accepts_both_schemes(small, sepvocab):
    name, params = small
    normal = _seeded(name, sepvocab, {**params, "init": "normal"})
    default = _seeded(name, sepvocab, params)
    for (k, a), (_, b) in zip(normal.state_dict().items(), default.state_dict().items()):
        assert torch.equal(a, b), f"{k}: init='normal' must be the default, bit for bit"
    torched = _seeded(name, sepvocab, {**params, "init": "torch"})
    tok = torched.embed.tok.weight
    assert tok.std().item() == pytest.approx(1.0, rel=0.2)  # nn.Embedding's N(0, 1)
    assert tok[sepvocab.pad_id].abs().sum() == 0  # the padding row stays zero
    assert normal.embed.tok.weight.std().item() == pytest.approx(0.02, rel=0.2)


def test_transformer_linear_layers_follow_the_scheme(sepvocab):
    params = dict(n_layers=2, n_heads=2, d_model=32)
    normal = _seeded("transformer", sepvocab, {**params, "init": "normal"})
    torched = _seeded("transformer", sepvocab, {**params, "init": "torch"})
    w_n, w_t = normal.blocks[0].attn.qkv.weight, torched.blocks[0].attn.qkv.weight
    assert w_n.std().item() == pytest.approx(0.02, rel=0.1)
    bound = 1 / math.sqrt(32)  # Kaiming-uniform with a = sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert w_t.abs().max().item() <= bound and w_t.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1)


def test_mamba_keeps_its_own_dt_and_A_init(sepvocab):
    params = dict(n_layers=1, d_model=16)
    a = _seeded("mamba", sepvocab, {**params, "init": "normal"})
    b = _seeded("mamba", sepvocab, {**params, "init": "torch"})
    ma, mb = a.blocks[0].mixer, b.blocks[0].mixer
    torch.testing.assert_close(ma.A_log, mb.A_log)
    dt = torch.nn.functional.softplus(mb.dt_proj.bias)
    assert (dt >= 1e-4).all() and (dt <= 0.1 + 1e-6).all()  # log-uniform in [dt_min, dt_max]
