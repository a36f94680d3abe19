"""Mamba-1: the scan's hand-written gradients, and the block against transformers' MambaModel."""

import math

import pytest
import torch

from windtunnel.models import make_model
from windtunnel.models.base import NO_CAPTURE
from windtunnel.models.mamba import SelectiveScan, selective_scan


def scan_inputs(batch=2, T=6, d=3, n=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(batch, T, d, generator=g, dtype=dtype)
    dt = torch.rand(batch, T, d, generator=g, dtype=dtype) + 0.05
    A = -torch.rand(d, n, generator=g, dtype=dtype) - 0.5
    B = torch.randn(batch, T, n, generator=g, dtype=dtype)
    C = torch.randn(batch, T, n, generator=g, dtype=dtype)
    return [t.requires_grad_() for t in (u, dt, A, B, C)]


def test_scan_matches_the_recurrence():
    u, dt, A, B, C = scan_inputs()
    D = torch.randn(3, dtype=torch.float64)
    h = torch.zeros(2, 3, 4, dtype=torch.float64)
    ys = []
    for t in range(6):
        h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * u[:, t])[..., None] * B[:, t, None, :]
        ys.append((h * C[:, t, None, :]).sum(-1) + D * u[:, t])
    torch.testing.assert_close(selective_scan(u, dt, A, B, C, D), torch.stack(ys, 1))


def test_scan_gradients():
    assert torch.autograd.gradcheck(SelectiveScan.apply, tuple(scan_inputs()))


def test_capture_ssm_parameters(sepvocab):
    model = make_model("mamba", sepvocab, dict(n_layers=2, d_model=32))
    assert model.config.dt_rank == 2
    _, cache = model.run_with_cache(torch.zeros(3, 37, dtype=torch.long))
    assert cache["blocks.1.ssm.dt"].shape == (3, 37, 64)
    assert cache["blocks.1.ssm.B"].shape == cache["blocks.0.ssm.C"].shape == (3, 37, 16)
    assert cache["blocks.1.resid_post"].shape == cache["final"].shape == (3, 37, 32)
    assert (cache["blocks.0.ssm.dt"] > 0).all()


def test_matches_transformers_mamba(sepvocab):
    """Same weights in windtunnel's Mamba and transformers.MambaModel (its pure-PyTorch path):
    final hidden states and all parameter gradients agree."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    d, n_layers = 32, 2
    ours = make_model("mamba", sepvocab, dict(n_layers=n_layers, d_model=d))
    ref = transformers.MambaModel(transformers.MambaConfig(
        vocab_size=sepvocab.vocab_size, hidden_size=d, num_hidden_layers=n_layers, state_size=16, expand=2,
        conv_kernel=4, time_step_rank=math.ceil(d / 16), use_bias=False, use_conv_bias=True,
        layer_norm_epsilon=1e-5, use_mambapy=False, pad_token_id=None, bos_token_id=None, eos_token_id=None))
    ours_state = ours.state_dict()
    mapped = {k.replace("blocks.", "layers."): v for k, v in ours_state.items() if k.startswith(("blocks.", "norm_f."))}
    mapped["embeddings.weight"] = ours_state["embed.tok.weight"]
    assert set(mapped) == set(ref.state_dict())
    ref.load_state_dict(mapped)

    x = torch.randint(0, 40, (4, 37), generator=torch.Generator().manual_seed(1))
    ours_final = ours.mix(ours.embed(x), NO_CAPTURE)
    ref_final = ref(input_ids=x, use_cache=False).last_hidden_state
    torch.testing.assert_close(ours_final, ref_final, atol=1e-5, rtol=1e-5)

    weight = torch.randn(ours_final.shape, generator=torch.Generator().manual_seed(2))
    (ours_final * weight).sum().backward()
    (ref_final * weight).sum().backward()
    ref_params = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        if name.startswith(("blocks.", "norm_f.")):
            torch.testing.assert_close(p.grad, ref_params[name.replace("blocks.", "layers.")].grad,
                                       atol=1e-5, rtol=1e-4, msg=name)
    # embedding rows sum gradients over many positions: float32 summation order differs
    torch.testing.assert_close(ours.embed.tok.weight.grad[:40], ref.embeddings.weight.grad[:40],
                               atol=1e-4, rtol=1e-4)
