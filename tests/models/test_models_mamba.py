"""Mamba-1: the scan's hand-written gradients, the C++ kernels against the pure-PyTorch ones, and
the model against transformers' MambaModel, on both CPU paths (``WINDTUNNEL_SCAN``); the authors'
variant (``variant="authors"``) against their code and the reference mixer."""

import json
import logging
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from windtunnel.config import ConfigError
from windtunnel.models import check_model, make_model
from windtunnel.models.mamba import MambaConfig, MambaMixer
from windtunnel.models.ops import scan_ext
from windtunnel.models.ops.causal_conv import CppCausalConvSiLU, causal_conv_silu
from windtunnel.models.ops.rms_norm import CppRMSNorm
from windtunnel.models.ops.selective_scan import CppSelectiveScan, SelectiveScan, selective_scan
from windtunnel.train.config import RunConfig, resolve_run
from windtunnel.train.trainer import train


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
    ours_final = ours.mix(ours.embed(x))
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
        monkeypatch.setattr(scan_ext, "use_cpp", lambda path=path: path == "cpp")
        model.zero_grad()
        final = model.mix(model.embed(x))
        (final * weight).sum().backward()
        results[path] = (final.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    torch.testing.assert_close(results["cpp"][0], results["torch"][0], atol=1e-12, rtol=1e-12)
    assert results["cpp"][1].keys() == results["torch"][1].keys() and len(results["cpp"][1]) > 10
    for name, grad in results["torch"][1].items():
        torch.testing.assert_close(results["cpp"][1][name], grad, atol=1e-12, rtol=1e-10, msg=name)


def test_a_stale_build_lock_is_removed_and_a_fresh_one_kept(tmp_path):
    import os
    import time

    from windtunnel.models.ops.scan_ext import clear_stale_lock

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


# ---------------------------------------------------------------------------------------
# The authors' variant (Paper I's experiments/paper1_hmm/train_mamba.py)
# ---------------------------------------------------------------------------------------
AUTHORS = dict(n_layers=2, d_model=16, variant="authors")


@pytest.mark.parametrize("init", ["normal", "torch"])
def test_authors_init_survives_the_models_init(sepvocab, init):
    """Their dt and A initialisation, LayerNorms and block layout, under either ``init`` scheme."""
    torch.manual_seed(0)
    model = make_model("mamba", sepvocab, {**AUTHORS, "init": init})
    assert model.config.dt_rank == 1
    assert isinstance(model.norm_f, nn.LayerNorm) and model.final_norm is model.norm_f
    for block in model.blocks:
        m = block.mixer
        assert isinstance(block.norm, nn.Identity)  # no pre-norm: x + mixer(x)
        assert isinstance(m.norm, nn.LayerNorm) and m.norm.normalized_shape == (32,)
        assert m.dt_proj.in_features == 1 and m.x_proj.out_features == 1 + 2 * 16
        torch.testing.assert_close(F.softplus(m.dt_proj.bias), F.softplus(torch.full((32,), 0.1)), atol=0, rtol=0)
        assert m.dt_proj.weight.abs().max() <= 0.01 and m.dt_proj.weight.std() > 0.003  # U(-0.01, 0.01)
        assert m.A_log.shape == (16,)  # one A for all channels
        torch.testing.assert_close(m.A(), (-0.1 * torch.arange(1, 17.0)).expand(32, 16))
        assert m.D.eq(1).all()


def authors_from_reference(ref: MambaMixer, norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The authors' mixer from the reference mixer's layers and scan: LayerNorm, D skip, gate after it."""
    u, z = ref.in_proj(x).chunk(2, dim=-1)
    u = causal_conv_silu(u, ref.conv1d)
    dt, B, C = ref.x_proj(u).split(ref.sizes, dim=-1)
    y = selective_scan(u, F.softplus(ref.dt_proj(dt)), ref.A(), B, C, torch.zeros_like(ref.D))
    return ref.out_proj((norm(y) + ref.D * u) * F.silu(z))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_authors_mixer_is_the_reference_mixer_where_they_coincide(scan_path, dtype):
    """On the same weights (A_log shared -> expanded to every channel, dt rank 1): the authors' mixer
    is the reference scan followed by their LayerNorm, D skip and gate; with the LayerNorm an
    identity (the D skip then commutes into the scan) it is the reference mixer itself."""
    tol = dict(atol=1e-10, rtol=1e-10) if dtype == torch.float64 else dict(atol=1e-5, rtol=1e-5)
    torch.manual_seed(0)
    d, di = 16, 32
    authors = MambaMixer(MambaConfig(d_model=d, variant="authors")).to(dtype)
    ref = MambaMixer(MambaConfig(d_model=d, dt_rank=1)).to(dtype)
    with torch.no_grad():  # away from the init values, so that every part matters
        for p in (authors.norm.weight, authors.norm.bias, authors.D, authors.A_log, authors.dt_proj.bias):
            p.add_(0.3 * torch.randn_like(p))
    state = {k: v for k, v in authors.state_dict().items() if not k.startswith("norm.")}
    ref.load_state_dict({**state, "A_log": authors.A_log.detach().expand(di, -1)})
    x = torch.randn(3, 21, d, generator=torch.Generator().manual_seed(1), dtype=dtype)

    out = authors(x)
    torch.testing.assert_close(out, authors_from_reference(ref, authors.norm, x), **tol)
    authors.norm = nn.Identity()
    tol = dict(atol=1e-12, rtol=1e-12) if dtype == torch.float64 else dict(atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(authors(x), ref(x), **tol)


def their_forward(model, x: torch.Tensor) -> torch.Tensor:
    """MambaHMM.forward of experiments/paper1_hmm/train_mamba.py, as written there (clamps and
    all), on the weights of our authors-variant model."""
    h = model.embed(x)
    for block in model.blocks:
        m, (batch, L, _) = block.mixer, h.shape
        u, z = m.in_proj(h).chunk(2, dim=-1)
        u = F.silu(m.conv1d(u.transpose(1, 2))[:, :, :L].transpose(1, 2))
        dt, B, C = m.x_proj(u).split([1, m.A_log.shape[0], m.A_log.shape[0]], dim=-1)
        dt = F.softplus(m.dt_proj(dt)).clamp(min=1e-4, max=10.0)
        A = -torch.exp(m.A_log.clamp(max=5.0))
        s, ys = torch.zeros(batch, u.shape[-1], A.shape[0], dtype=u.dtype), []
        for i in range(L):
            dA = torch.exp((dt[:, i, :, None] * A).clamp(min=-20, max=0))
            dB_u = (dt[:, i, :, None] * B[:, i, None, :] * u[:, i, :, None]).clamp(-10, 10)
            s = (s * dA + dB_u).clamp(-100, 100)
            ys.append((s * C[:, i, None, :]).sum(-1))
        y = m.norm(torch.stack(ys, dim=1)) + m.D * u
        h = torch.nan_to_num(h + m.out_proj(y * F.silu(z)), nan=0.0)
    return model.head(model.norm_f(h))


def test_authors_model_matches_their_code(sepvocab, scan_path):
    """Where their guard rails do not bind (here, at init), the whole model is their code, in float64."""
    torch.manual_seed(0)
    model = make_model("mamba", sepvocab, {**AUTHORS, "init": "torch"}).double()
    x = torch.randint(0, 40, (3, 37), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(model(x), their_forward(model, x), atol=1e-10, rtol=1e-10)


def test_authors_model_is_causal_with_finite_gradients(sepvocab, scan_path):
    torch.manual_seed(0)
    model = make_model("mamba", sepvocab, AUTHORS).double()
    check_model(model, sepvocab)
    x = torch.randint(0, 40, (2, 37), generator=torch.Generator().manual_seed(1))
    y = model(x)
    for t in (0, 11, 36):
        x2 = x.clone()
        x2[:, t] = (x2[:, t] + 1) % 40
        y2 = model(x2)
        torch.testing.assert_close(y2[:, :t], y[:, :t], atol=1e-12, rtol=0)
        assert not torch.allclose(y2[:, t], y[:, t])
    F.cross_entropy(y.flatten(0, 1), torch.randint(0, 20, (2 * 37,))).backward()
    assert torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert all(torch.isfinite(g).all() for g in grads.values())
    for name in ("blocks.0.mixer.A_log", "blocks.0.mixer.dt_proj.weight", "blocks.1.mixer.norm.weight", "norm_f.bias"):
        assert grads[name].abs().sum() > 0, name


def test_authors_model_trains_on_a_small_hmm(tmp_path):
    cfg = RunConfig.build({
        "task": "hmm", "task_params": {"S": 3, "O": 3, "K": 8},
        "model": "mamba", "model_params": {"n_layers": 1, "d_model": 16, "variant": "authors", "init": "torch"},
        "train": {"steps": 20, "batch_size": 32, "lr": 1e-2, "checkpoints": 0, "eval_probe_size": 32},
    })
    res = train(cfg, tmp_path / "run", progress=False, evaluate_at_end=False)
    losses = [json.loads(line)["loss"] for line in (res.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 20 and all(math.isfinite(v) for v in losses)
    assert sum(losses[-5:]) < sum(losses[:5])


def test_reference_variant_is_unchanged(sepvocab, scan_path):
    """The default is the reference Mamba, bit for bit: the same weights and outputs as with the
    field omitted, and the outputs it gave before the field existed."""
    def build(**extra):
        torch.manual_seed(0)
        return make_model("mamba", sepvocab, dict(n_layers=2, d_model=16, **extra)).double()

    omitted, named = build(), build(variant="reference")
    assert omitted.state_dict().keys() == named.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(omitted.state_dict().values(), named.state_dict().values()))
    assert omitted.blocks[0].mixer.A_log.shape == (32, 16) and omitted.blocks[0].mixer.norm is None
    assert not any(".mixer.norm." in k for k in omitted.state_dict())
    x = torch.randint(0, 40, (2, 37), generator=torch.Generator().manual_seed(1))
    y = omitted(x)
    assert torch.equal(y, named(x))
    # recorded from the model before `variant` existed (on an AMD EPYC). The weights are drawn in
    # float32, whose transcendental kernels round differently on other CPUs (an Intel Xeon's sum
    # differs by 5e-9 relative), so the check allows float32 rounding: a change of the model's code
    # moves these numbers by orders of magnitude more.
    assert sum(p.sum().item() for p in omitted.parameters()) == pytest.approx(1782.9418620411425, rel=1e-7)
    assert y.sum().item() == pytest.approx(57.78838376989721, rel=1e-8)
    torch.testing.assert_close(y[0, -1, :3], torch.tensor([-0.45847302690541286, 0.2594331781068777,
                                                            0.5275615531241828], dtype=torch.float64),
                               rtol=1e-8, atol=0)


def test_variant_config(sepvocab):
    """Capture names shared by both variants; the field validates in a run config, a bad value or a
    dt_rank other than 1 with the authors' variant is an error naming the field."""
    ref = make_model("mamba", sepvocab, dict(n_layers=2, d_model=16))
    authors = make_model("mamba", sepvocab, AUTHORS)
    assert authors.capture_names() == ref.capture_names()
    x = torch.randint(0, 40, (2, 37))
    cached = [m.run_with_cache(x)[1] for m in (ref, authors)]
    assert {k: v.shape for k, v in cached[0].items()} == {k: v.shape for k, v in cached[1].items()}
    assert (cached[1]["blocks.0.ssm.dt"] >= 1e-4).all()

    cfg = resolve_run("hmm", "mamba", "quick", {"model_params.variant": "authors"})
    assert cfg.model_params["variant"] == "authors"
    with pytest.raises(ConfigError) as info:
        resolve_run("hmm", "mamba", "quick", {"model_params.variant": "theirs"})
    assert "field 'model_params.variant' = 'theirs'" in str(info.value)
    assert "allowed: one of reference, authors" in str(info.value)
    with pytest.raises(ConfigError, match="dt_rank=4 does not go with variant='authors'"):
        resolve_run("hmm", "mamba", "quick", {"model_params.variant": "authors", "model_params.dt_rank": 4})
    assert make_model("mamba", sepvocab, {**AUTHORS, "dt_rank": 1}).config.dt_rank == 1
