"""The mixers beyond the paper (gru, linear_attention, deltanet, swa_transformer, hybrid): their
recurrent and parallel forms agree, a change at position t changes no output before t, and each is
capacity-matched to the transformer within 2% at the quick profile sizes. (The contract tests of
test_models_contract.py run on them too, through conftest.SMALL.)"""

import pytest
import torch
import torch.nn.functional as F
from conftest import SMALL
from test_models_contract import sample_inputs

from windtunnel.models import count_params, make_model
from windtunnel.models.deltanet import delta_rule_chunked, delta_rule_pattern, delta_rule_recurrent
from windtunnel.models.linear_attention import FEATURE_MAPS, linear_attention

NEW = ["gru", "linear_attention", "deltanet", "swa_transformer", "hybrid"]
QUICK_TASKS = ["bijection", "hmm", "recall", "regression", "sula", "kalman", "dirichlet", "changepoint"]


def double(name, spec, params, seed=0):
    torch.manual_seed(seed)
    return make_model(name, spec, params).double().eval()


def rand_qkv(seed=0, B=2, H=3, T=21, dk=4, dv=5):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(B, H, T, dk, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(B, H, T, dv, generator=g, dtype=torch.float64)
    beta = torch.rand(B, H, T, generator=g, dtype=torch.float64)
    log_alpha = -torch.rand(B, H, T, generator=g, dtype=torch.float64)
    return q, k, v, beta, log_alpha


# ---------------------------------------------------------------------------------------
# Equal forms
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("phi", list(FEATURE_MAPS))
def test_linear_attention_forms_agree(phi):
    q, k, v, _, _ = rand_qkv()
    fq, fk = FEATURE_MAPS[phi](q), FEATURE_MAPS[phi](k)
    ref = linear_attention(fq, fk, v, "recurrent")
    # the definition: z_t = sum_{s<=t} (phi(q_t) . phi(k_s)) v_s / sum_{s<=t} phi(q_t) . phi(k_s)
    t = 7
    w = (fq[:, :, t:t + 1] * fk[:, :, : t + 1]).sum(-1)
    torch.testing.assert_close(ref[:, :, t], (w.unsqueeze(-1) * v[:, :, : t + 1]).sum(2) / (w.sum(-1, keepdim=True) + 1e-6))
    for form in ("parallel", "cumsum"):
        torch.testing.assert_close(linear_attention(fq, fk, v, form), ref, atol=1e-10, rtol=1e-8)


def test_linear_attention_models_agree_across_forms(sepvocab):
    params = dict(n_layers=2, n_heads=2, d_model=16)
    x = sample_inputs(sepvocab)
    outs = [double("linear_attention", sepvocab, {**params, "form": f})(x) for f in ("parallel", "cumsum", "recurrent")]
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], atol=1e-10, rtol=1e-8)


def test_linear_attention_pattern_is_the_weights_of_the_values(sepvocab):
    model = double("linear_attention", sepvocab, dict(n_layers=1, n_heads=2, d_model=16))
    _, cache = model.run_with_cache(sample_inputs(sepvocab), ["blocks.0.attn.pattern", "blocks.0.attn.v", "blocks.0.attn.z"])
    p = cache["blocks.0.attn.pattern"]
    torch.testing.assert_close(p @ cache["blocks.0.attn.v"], cache["blocks.0.attn.z"])
    assert (p.triu(1) == 0).all() and (p >= 0).all()
    torch.testing.assert_close(p.sum(-1), torch.ones_like(p.sum(-1)), atol=1e-5, rtol=0)


def naive_gated_delta_rule(q, k, v, beta, log_alpha):
    """The rule as written, state (dv, dk): S_t = a_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T, z_t = S_t q_t."""
    B, H, T, dk = k.shape
    eye = torch.eye(dk, dtype=k.dtype)
    S = torch.zeros(B, H, v.shape[-1], dk, dtype=k.dtype)
    out = []
    for t in range(T):
        kt, vt, b, a = k[:, :, t], v[:, :, t], beta[:, :, t, None, None], log_alpha[:, :, t, None, None].exp()
        S = a * S @ (eye - b * kt.unsqueeze(-1) * kt.unsqueeze(-2)) + b * vt.unsqueeze(-1) * kt.unsqueeze(-2)
        out.append((S @ q[:, :, t].unsqueeze(-1)).squeeze(-1))
    return torch.stack(out, 2)


@pytest.mark.parametrize("gated", [True, False])
def test_delta_rule_recurrent_chunked_and_pattern_agree(gated):
    q, k, v, beta, log_alpha = rand_qkv()
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    if not gated:
        log_alpha = torch.zeros_like(log_alpha)
    ref = naive_gated_delta_rule(q, k, v, beta, log_alpha)
    torch.testing.assert_close(delta_rule_recurrent(q, k, v, beta, log_alpha), ref, atol=1e-10, rtol=1e-8)
    for chunk in (1, 4, 7, 21, 32):  # dividing the length, not dividing it, longer than it
        torch.testing.assert_close(delta_rule_chunked(q, k, v, beta, log_alpha, chunk), ref, atol=1e-10, rtol=1e-8)
    pattern = delta_rule_pattern(q, k, beta, log_alpha)
    assert (pattern.triu(1) == 0).all()
    torch.testing.assert_close(pattern @ v, ref, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("extra", [{}, {"gated": False, "d_conv": 0}])
def test_deltanet_models_agree_across_forms(sepvocab, extra):
    params = dict(n_layers=2, n_heads=2, d_model=16, **extra)
    x = sample_inputs(sepvocab)
    rec = double("deltanet", sepvocab, {**params, "form": "recurrent"})
    out, cache = rec.run_with_cache(x, ["blocks.1.attn.pattern", "blocks.1.attn.v", "blocks.1.attn.z",
                                        "blocks.1.attn.k", "blocks.1.attn.beta", "blocks.1.attn.alpha"])
    for chunk in (5, 16, 64):
        chunked = double("deltanet", sepvocab, {**params, "form": "chunk", "chunk_size": chunk})
        torch.testing.assert_close(chunked(x), out, atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(cache["blocks.1.attn.pattern"] @ cache["blocks.1.attn.v"], cache["blocks.1.attn.z"])
    torch.testing.assert_close(cache["blocks.1.attn.k"].norm(dim=-1), torch.ones(3, 2, sepvocab.seq_len, dtype=torch.float64))
    assert cache["blocks.1.attn.beta"].shape == (3, 2, sepvocab.seq_len)
    alpha = cache["blocks.1.attn.alpha"]
    assert ((alpha > 0) & (alpha <= 1)).all() and (extra or (alpha < 1).all())


# ---------------------------------------------------------------------------------------
# Causality, one position at a time
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NEW)
def test_a_change_at_t_changes_no_output_before_t(name, spec):
    model = double(name, spec, SMALL[name][1])
    x = sample_inputs(spec, seed=1)
    if x.is_floating_point():
        x = x.double()
    before = model(x)
    for t in (0, 1, spec.seq_len // 2, spec.seq_len - 1):
        changed = x.clone()
        changed[:, t] = sample_inputs(spec, seed=2)[:, t].to(x.dtype)
        after = model(changed)
        torch.testing.assert_close(after[:, :t], before[:, :t], atol=1e-12, rtol=0)
        assert not torch.allclose(after[:, t], before[:, t])


def test_sliding_window_sees_only_the_window(sepvocab):
    """One layer of window w: the output at t depends on positions t - w + 1 .. t only; with a
    window as long as the sequence it is the transformer."""
    params = dict(n_layers=1, n_heads=2, d_model=16)
    swa = double("swa_transformer", sepvocab, {**params, "window": 4})
    x = sample_inputs(sepvocab, seed=1)
    changed = x.clone()
    changed[:, 10] = (x[:, 10] + 1) % (sepvocab.vocab_size - 1)
    diff = (swa(changed) - swa(x)).abs().amax((0, 2))
    assert (diff[:10] == 0).all() and (diff[10:14] > 0).all() and (diff[14:] < 1e-12).all()
    _, cache = swa.run_with_cache(x, ["blocks.0.attn.pattern"])
    lag = torch.arange(37)[:, None] - torch.arange(37)[None, :]
    assert (cache["blocks.0.attn.pattern"][..., (lag < 0) | (lag >= 4)] == 0).all()
    full = double("swa_transformer", sepvocab, {**params, "window": 37})
    tf = double("transformer", sepvocab, params)
    tf.load_state_dict(full.state_dict())
    torch.testing.assert_close(full(x), tf(x))


# ---------------------------------------------------------------------------------------
# Structure, initialisation, ablations
# ---------------------------------------------------------------------------------------
def test_gru_is_a_stack_of_grus(sepvocab):
    d = 16
    model = make_model("gru", sepvocab, dict(n_layers=3, d_model=d))
    assert all(isinstance(layer, torch.nn.GRU) for layer in model.layers)
    embed, head, norm = 41 * d, d * 20 + 20, 2 * d
    assert model.n_params() == embed + 3 * 3 * (2 * d * d + 2 * d) + norm + head


def test_hybrid_layout_and_captures(sepvocab):
    model = make_model("hybrid", sepvocab, dict(n_layers=5, n_heads=2, d_model=16, layout="AMM"))
    assert model.config.kinds == "AMMAM"
    names = model.capture_names()
    assert "blocks.0.attn.pattern" in names and "blocks.1.ssm.dt" in names and "blocks.3.attn.z" in names
    assert "blocks.1.attn.q" not in names and "blocks.0.ssm.B" not in names
    assert all(f"blocks.{i}.resid_post" in names for i in range(5))
    assert model.embed.pos is None  # positions come from the Mamba layers


def test_hybrid_mamba_blocks_keep_their_init(sepvocab):
    torch.manual_seed(0)
    model = make_model("hybrid", sepvocab, dict(n_layers=2, n_heads=2, d_model=32))
    assert model.blocks[1].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.1)
    mixer = model.blocks[0].mixer
    dt = F.softplus(mixer.dt_proj.bias)
    assert (dt >= 1e-4).all() and (dt <= 0.1 + 1e-6).all()
    torch.testing.assert_close(mixer.A_log[0].exp(), torch.arange(1, 17, dtype=torch.float32))


@pytest.mark.parametrize("name", ["linear_attention", "deltanet", "swa_transformer"])
def test_head_mask_and_bypass(name, sepvocab):
    model = double(name, sepvocab, SMALL[name][1])
    x = sample_inputs(sepvocab)
    base = model(x)
    model.head_mask[1, 0] = 0.0
    _, cache = model.run_with_cache(x, ["blocks.1.attn.z"])
    assert (cache["blocks.1.attn.z"][:, 0] == 0).all() and (cache["blocks.1.attn.z"][:, 1] != 0).any()
    model.set_bypass(0, "block")
    assert not torch.allclose(model(x), base)
    model.clear_ablations()
    torch.testing.assert_close(model(x), base)


def test_deltanet_decay_init_under_both_schemes(sepvocab):
    for init in ("normal", "torch"):
        mixer = make_model("deltanet", sepvocab, dict(n_layers=1, n_heads=4, d_model=16, init=init)).blocks[0].attn
        A = mixer.A_log.exp()
        assert ((A >= 1) & (A <= 16)).all()
        dt = F.softplus(mixer.dt_bias)
        assert ((dt >= 1e-4) & (dt <= 0.1 + 1e-6)).all()


# ---------------------------------------------------------------------------------------
# Capacity matching at the quick profile sizes
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", QUICK_TASKS)
def test_quick_profiles_match_the_transformer_within_2_percent(task):
    """As `windtunnel run` sizes them: every new model of the quick profile, resized to the
    transformer's count (position tables sized for the longest evaluated length included)."""
    from windtunnel.sweep.expand import matched_configs
    from windtunnel.tasks import make_task
    from windtunnel.train.build import sized_model_params

    configs = matched_configs(task, ["transformer", *NEW], "quick", [], "transformer")
    spec = make_task(configs[0].task, configs[0].task_params).spec
    task_obj = make_task(configs[0].task, configs[0].task_params)
    counts = {c.model: count_params(c.model, spec, sized_model_params(c, task_obj)) for c in configs}
    target = counts.pop("transformer")
    assert set(counts) == set(NEW)
    for name, n in counts.items():
        assert abs(n - target) <= 0.02 * target, (name, n, target)
