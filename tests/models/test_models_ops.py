"""The kernels of models/ops against their pure-PyTorch references (same signature, same result),
on both CPU paths; and capture points as taps: every capture name is a module path."""

import pytest
import torch
from conftest import SMALL
from torch import nn

from windtunnel.models import Tap, make_model
from windtunnel.models.ops import scan_ext
from windtunnel.models.ops.causal_conv import causal_conv_silu, causal_conv_silu_ref
from windtunnel.models.ops.selective_scan import selective_scan, selective_scan_ref


@pytest.fixture(params=["torch", "cpp"])
def scan_path(request, monkeypatch):
    if request.param == "cpp":
        ok, why = scan_ext.cpp_available()
        if not ok:
            pytest.skip(f"the C++ kernels do not build here ({why}); the pure-PyTorch path is tested")
    monkeypatch.setattr(scan_ext, "use_cpp", lambda: request.param == "cpp")
    return request.param


def scan_args(batch=2, T=9, d=11, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return dict(u=torch.randn(batch, T, d, generator=g, dtype=torch.float64),
                dt=torch.randn(batch, T, d, generator=g, dtype=torch.float64) / 2,
                A=-torch.rand(d, n, generator=g, dtype=torch.float64) - 0.5,
                B=torch.randn(batch, T, n, generator=g, dtype=torch.float64),
                C=torch.randn(batch, T, n, generator=g, dtype=torch.float64),
                D=torch.randn(d, generator=g, dtype=torch.float64),
                z=torch.randn(batch, T, d, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("gated, softplus", [(False, False), (True, True), (False, True)])
def test_selective_scan_is_its_reference(scan_path, gated, softplus):
    """Outputs and every gradient equal to float64 rounding, with and without the fused softplus and gate."""
    args = scan_args()
    if not gated:
        del args["z"]
    if not softplus:
        args["dt"] = args["dt"].abs() + 0.05
    leaves = {k: v.clone().requires_grad_() for k, v in args.items()}
    copies = {k: v.clone().requires_grad_() for k, v in args.items()}
    out = selective_scan(**leaves, dt_softplus=softplus)
    ref = selective_scan_ref(**copies, dt_softplus=softplus)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (out * w).sum().backward()
    (ref * w).sum().backward()
    for k in args:
        torch.testing.assert_close(leaves[k].grad, copies[k].grad, atol=1e-10, rtol=1e-10, msg=k)


def test_causal_conv_silu_is_its_reference(scan_path):
    g = torch.Generator().manual_seed(2)
    conv = nn.Conv1d(11, 11, 4, groups=11, padding=3).double()
    u = torch.randn(2, 9, 22, generator=g, dtype=torch.float64)[..., :11]  # a view, as in the mixer
    torch.testing.assert_close(causal_conv_silu(u, conv), causal_conv_silu_ref(u, conv), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("key", list(SMALL))
def test_capture_names_are_the_paths_of_the_taps(sepvocab, key):
    name, params = SMALL[key]
    if name == "mamba2":
        pytest.importorskip("transformers")
    model = make_model(name, sepvocab, params)
    modules = dict(model.named_modules())
    names = model.capture_names()
    assert names[0] == "embed" and names[-1] == "final" and len(set(names)) == len(names)
    assert all(isinstance(modules[n], Tap) and modules[n].name == n for n in names[1:-1])
    assert model.layer_state_names() == [f"blocks.{i}.resid_post" for i in range(model.config.n_layers)]
    assert not any(isinstance(m, Tap) for m in model.modules() if list(m.parameters(recurse=False)))


def test_taps_record_only_inside_run_with_cache(sepvocab):
    torch.manual_seed(0)
    model = make_model("transformer", sepvocab, dict(n_layers=2, n_heads=2, d_model=16)).eval()
    x = torch.randint(0, 40, (2, 37))
    tap = model.blocks[1].attn.pattern
    seen = []
    tap.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    model(x)
    assert not tap.wanted and seen == []  # the pattern is not computed on the fast path
    _, cache = model.run_with_cache(x, ["blocks.1.attn.pattern"])
    assert list(cache) == ["blocks.1.attn.pattern"] and seen == [(2, 2, 37, 37)]
    assert not tap.wanted  # switched off again after the call
