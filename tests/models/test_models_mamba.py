"""Mamba-1: the scan's hand-written gradients, the C++ kernels against the pure-PyTorch ones, and
the model against transformers' MambaModel, on both CPU paths (``WINDTUNNEL_SCAN``)."""

import logging
import math

import pytest
import torch
import torch.nn.functional as F

from windtunnel.config import ConfigError
from windtunnel.models import make_model, scan_ext
from windtunnel.models.base import NO_CAPTURE
from windtunnel.models.mamba import (
    CppCausalConvSiLU,
    CppRMSNorm,
    CppSelectiveScan,
    SelectiveScan,
    selective_scan,
)


def need_cpp():
    ok, why = scan_ext.cpp_available()
    if not ok:
        pytest.skip(f"the C++ kernels do not build here ({why}); the pure-PyTorch path is tested")


@pytest.fixture(params=["torch", "cpp"])
def scan_path(request, monkeypatch):
    """Run the test on one CPU path of mamba: the pure-PyTorch scan or the C++ kernels."""
    if request.param == "cpp":
        need_cpp()
    monkeypatch.setattr(scan_ext, "use_cpp", lambda: request.param == "cpp")
    return request.param


def scan_inputs(batch=2, T=6, d=3, n=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(batch, T, d, generator=g, dtype=dtype)
    dt = torch.rand(batch, T, d, generator=g, dtype=dtype) + 0.05
    A = -torch.rand(d, n, generator=g, dtype=dtype) - 0.5
    B = torch.randn(batch, T, n, generator=g, dtype=dtype)
    C = torch.randn(batch, T, n, generator=g, dtype=dtype)
    return [t.requires_grad_() for t in (u, dt, A, B, C)]


def test_scan_matches_the_recurrence(scan_path):
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


def test_cpp_kernel_gradients():
    need_cpp()
    g = torch.Generator().manual_seed(3)
    # 11 channels: a full vector block and a partial one, whatever the vector width
    u, dt, A, B, C = scan_inputs(batch=2, T=5, d=11, n=3)
    D = torch.randn(11, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(CppSelectiveScan.apply, (u, dt, A, B, C, D))
    xz = torch.randn(2, 6, 22, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(11, 1, 4, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(11, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda xz, w, b: CppCausalConvSiLU.apply(xz[..., :11], w, b), (xz, w, b))
    x = torch.randn(3, 4, 11, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: CppRMSNorm.apply(x, w, 1e-5), (x, b))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cpp_kernels_match_pytorch(dtype):
    """At the quick profile's shapes: outputs within 1e-5 and gradients within 1e-4 of the
    pure-PyTorch scan, conv1d + SiLU and RMSNorm (and equal to float64 rounding in float64)."""
    need_cpp()
    tol = dict(atol=1e-12, rtol=1e-12) if dtype == torch.float64 else dict(atol=1e-5, rtol=1e-5)
    gtol = dict(atol=1e-12, rtol=1e-12) if dtype == torch.float64 else dict(atol=1e-4, rtol=1e-4)
    g = torch.Generator().manual_seed(4)

    def check(ref_fn, cpp_fn, inputs):
        inputs = [x.to(dtype).requires_grad_() for x in inputs]
        ref, out = ref_fn(*inputs), cpp_fn(*inputs)
        torch.testing.assert_close(out, ref, **tol)
        w = torch.randn(ref.shape, generator=g, dtype=dtype)
        for a, b in zip(torch.autograd.grad((out * w).sum(), inputs), torch.autograd.grad((ref * w).sum(), inputs)):
            torch.testing.assert_close(a, b, **gtol)

    u, dt, A, B, C = (x.detach() for x in scan_inputs(batch=8, T=37, d=418, n=16, seed=5))
    D = torch.randn(418, generator=g, dtype=torch.float64)
    check(lambda u, dt, A, B, C, D: SelectiveScan.apply(u, dt, A, B, C) + u * D, CppSelectiveScan.apply,
          [u, dt, A, B, C, D])
    xz = torch.randn(8, 37, 836, generator=g, dtype=torch.float64)
    w, b = torch.randn(418, 1, 4, generator=g, dtype=torch.float64) / 2, torch.randn(418, generator=g, dtype=torch.float64)
    check(lambda xz, w, b: F.silu(F.conv1d(xz[..., :418].mT, w, b, padding=3, groups=418)[..., :37].mT),
          lambda xz, w, b: CppCausalConvSiLU.apply(xz[..., :418], w, b), [xz, w, b])
    x, w = torch.randn(8, 37, 209, generator=g, dtype=torch.float64), torch.rand(209, generator=g, dtype=torch.float64) + 0.5
    check(lambda x, w: F.rms_norm(x, (209,), w, 1e-5), lambda x, w: CppRMSNorm.apply(x, w, 1e-5), [x, w])


def test_path_choice(monkeypatch, caplog):
    """WINDTUNNEL_SCAN: auto falls back to PyTorch (saying why) when the C++ build fails, cpp then
    fails loudly, torch never tries, anything else is a clear error."""
    choose = scan_ext.use_cpp.__wrapped__
    monkeypatch.setattr(scan_ext, "cpp_available", lambda: (False, "RuntimeError: no C++ compiler"))
    with caplog.at_level(logging.INFO, logger="windtunnel"):
        monkeypatch.setenv("WINDTUNNEL_SCAN", "auto")
        assert choose() is False
        assert "pure PyTorch" in caplog.text and "no C++ compiler" in caplog.text
        monkeypatch.setenv("WINDTUNNEL_SCAN", "cpp")
        with pytest.raises(ConfigError, match="no C\\+\\+ compiler"):
            choose()
        monkeypatch.setenv("WINDTUNNEL_SCAN", "torch")
        assert choose() is False
        monkeypatch.setattr(scan_ext, "cpp_available", lambda: (True, ""))
        monkeypatch.setenv("WINDTUNNEL_SCAN", "auto")
        monkeypatch.setattr(scan_ext, "threads_used", lambda: 2)
        assert choose() is True and "C++ (auto, 2 of" in caplog.text
        monkeypatch.setenv("WINDTUNNEL_SCAN", "fast")
        with pytest.raises(ConfigError, match="WINDTUNNEL_SCAN"):
            choose()


def test_capture_ssm_parameters(sepvocab, scan_path):
    model = make_model("mamba", sepvocab, dict(n_layers=2, d_model=32))
    assert model.config.dt_rank == 2
    _, cache = model.run_with_cache(torch.zeros(3, 37, dtype=torch.long))
    assert cache["blocks.1.ssm.dt"].shape == (3, 37, 64)
    assert cache["blocks.1.ssm.B"].shape == cache["blocks.0.ssm.C"].shape == (3, 37, 16)
    assert cache["blocks.1.resid_post"].shape == cache["final"].shape == (3, 37, 32)
    assert (cache["blocks.0.ssm.dt"] > 0).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_transformers_mamba(sepvocab, scan_path, dtype):
    """Same weights in windtunnel's Mamba and transformers.MambaModel (its pure-PyTorch path):
    final hidden states within 1e-5 and all parameter gradients within 1e-4. (transformers' slow
    path computes its RMSNorm and parts of the scan in float32 even for float64 models, so float64
    does not tighten this; the two windtunnel paths agree to float64 rounding, below.)"""
    transformers = pytest.importorskip("transformers")
    tol, gtol = dict(atol=1e-5, rtol=1e-5), dict(atol=1e-4, rtol=1e-4)
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
    ours, ref = ours.to(dtype), ref.to(dtype)

    x = torch.randint(0, 40, (4, 37), generator=torch.Generator().manual_seed(1))
    ours_final = ours.mix(ours.embed(x), NO_CAPTURE)
    ref_final = ref(input_ids=x, use_cache=False).last_hidden_state
    torch.testing.assert_close(ours_final, ref_final, **tol)

    weight = torch.randn(ours_final.shape, generator=torch.Generator().manual_seed(2), dtype=dtype)
    (ours_final * weight).sum().backward()
    (ref_final * weight).sum().backward()
    ref_params = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        if name.startswith(("blocks.", "norm_f.")):
            torch.testing.assert_close(p.grad, ref_params[name.replace("blocks.", "layers.")].grad,
                                       **gtol, msg=name)
    torch.testing.assert_close(ours.embed.tok.weight.grad[:40], ref.embeddings.weight.grad[:40], **gtol)


def test_cpp_and_pytorch_paths_agree_in_float64(sepvocab, monkeypatch):
    """The whole model, forward and every parameter gradient, on the two paths: equal to float64 rounding."""
    need_cpp()
    torch.manual_seed(0)
    model = make_model("mamba", sepvocab, dict(n_layers=2, d_model=36)).double()  # d_inner 72, dt_rank 3
    x = torch.randint(0, 40, (5, 37), generator=torch.Generator().manual_seed(1))
    weight = torch.randn(5, 37, 36, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    results = {}
    for path in ("torch", "cpp"):
        monkeypatch.setattr(scan_ext, "use_cpp", lambda: path == "cpp")
        model.zero_grad()
        final = model.mix(model.embed(x), NO_CAPTURE)
        (final * weight).sum().backward()
        results[path] = (final.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    torch.testing.assert_close(results["cpp"][0], results["torch"][0], atol=1e-12, rtol=1e-12)
    assert results["cpp"][1].keys() == results["torch"][1].keys() and len(results["cpp"][1]) > 10
    for name, grad in results["torch"][1].items():
        torch.testing.assert_close(results["cpp"][1][name], grad, atol=1e-12, rtol=1e-10, msg=name)


def test_a_stale_build_lock_is_removed_and_a_fresh_one_kept(tmp_path):
    import os
    import time

    from windtunnel.models.scan_ext import clear_stale_lock

    lock = tmp_path / "lock"
    assert not clear_stale_lock(lock)  # none there
    lock.touch()
    assert not clear_stale_lock(lock) and lock.exists()  # a build in progress
    old = time.time() - 3600
    os.utime(lock, (old, old))
    assert clear_stale_lock(lock) and not lock.exists()


def test_cpp_kernels_use_torchs_threads():
    """Built with OpenMP, ATen's parallel_for in the C++ kernels runs on torch's threads (built
    without it, every kernel silently ran on one thread)."""
    need_cpp()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert scan_ext.threads_used() == 2
        torch.set_num_threads(1)
        assert scan_ext.threads_used() == 1
    finally:
        torch.set_num_threads(before)


def test_build_falls_back_to_a_serial_build_without_openmp(monkeypatch, caplog):
    tried = []

    def fake_build(openmp):
        tried.append(openmp)
        if openmp:
            raise RuntimeError("clang: error: unsupported option '-fopenmp'")

    monkeypatch.setattr(scan_ext, "_build", fake_build)
    with caplog.at_level(logging.INFO, logger="windtunnel"):
        scan_ext.build.__wrapped__()
    assert tried == [True, False] and "single-threaded" in caplog.text
    assert "-fopenmp" in scan_ext._flags(True) and "-fopenmp" not in scan_ext._flags(False)
