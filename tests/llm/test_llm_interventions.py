"""Entropy-axis interventions: the hooks really change outputs, operators do what they say, layer
indices are explicit."""

import numpy as np
import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.llm import axis_operators as iv
from windtunnel.llm.capture import Keep, run_prompts
from windtunnel.llm.config import build_options
from windtunnel.llm.loading import load_model

PROMPTS = ["happy: dax, sad: lug. calm:", "tired: lug. joyful:", "calm:", "awful: dax, bad: dax, sad: dax. glad:"]


@pytest.fixture(scope="module")
def lms(tiny_models):
    return {f: load_model(str(tiny_models[f]), build_options()) for f in ("gpt_neox", "llama")}


def _axes(lm, cap):
    h = cap.next_entropy
    return {i: iv.estimate_axis(cap.values[i], h) for i in cap.values}


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_cut_changes_outputs_and_removes_the_axis(lms, family):
    lm = lms[family]
    keep = Keep(value_layers=[0, 1, 2], label_ids=[5, 6])
    base = run_prompts(lm, PROMPTS, keep)
    axes = _axes(lm, base)
    ops = iv.condition_ops("true_cut", [1], iv.Axes(axes, lm.adapter.value_dim), 0)
    cut = run_prompts(lm, PROMPTS, keep, interventions=ops)
    assert np.allclose(cut.values[0], base.values[0])  # upstream untouched
    assert np.abs(cut.values[1] @ axes[1].u).max() < 1e-4  # the cut layer has no component on u
    assert not np.allclose(cut.values[2], base.values[2], atol=1e-6)  # downstream changed
    assert not np.allclose(cut.label_probs, base.label_probs, rtol=1e-6, atol=0)  # the output changed
    # the hook is gone afterwards: a plain run equals the baseline again
    again = run_prompts(lm, PROMPTS, Keep(value_layers=[2], label_ids=[5, 6]))
    assert np.allclose(again.label_probs, base.label_probs, rtol=1e-6)


def test_operators():
    u = np.array([0.6, 0.8, 0.0])
    v = torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]])
    cut = iv.operator("cut", u)(v)
    only = iv.operator("only", u)(v)
    shift = iv.operator("shift", u, sigma=2.0, delta=-1.0)(v)
    ut = torch.tensor(u, dtype=torch.float32)
    assert torch.allclose(cut @ ut, torch.zeros(2), atol=1e-6)
    assert torch.allclose(cut + only, v)
    assert torch.allclose(only, (v @ ut)[:, None] * ut)
    assert torch.allclose(shift - v, -2.0 * ut.expand(2, 3))


def test_neox_intervention_touches_only_values(lms):
    ad = lms["gpt_neox"].adapter
    out = torch.randn(2, 5, 3 * ad.n_heads * ad.head_dim)
    new = ad.replace_values(out, lambda v: torch.zeros_like(v))
    heads_old = out.view(2, 5, ad.n_heads, 3, ad.head_dim)
    heads_new = new.view(2, 5, ad.n_heads, 3, ad.head_dim)
    assert torch.equal(heads_new[..., :2, :], heads_old[..., :2, :])  # Q and K unchanged
    assert torch.count_nonzero(heads_new[..., 2, :]) == 0


def test_axis_estimation_raw_and_standardized():
    rng = np.random.default_rng(0)
    h = rng.uniform(0, 1, 200)
    d = np.array([1.0, 0.5, 0.0, 0.0])
    x = h[:, None] * d * 10 + rng.normal(0, 0.1, (200, 4)) * np.array([1, 1, 5, 0.01])
    raw = iv.estimate_axis(x, h, "raw", "positive")
    assert raw.corr > 0.9 and abs(abs(raw.u @ d / np.linalg.norm(d)) - 1) < 0.01
    neg = iv.estimate_axis(x, h, "raw", "negative")
    assert np.allclose(neg.u, -raw.u) and neg.corr < -0.9
    std = iv.estimate_axis(x, h, "standardized", "positive")
    assert std.corr > 0.9 and np.isclose(np.linalg.norm(std.u), 1)
    assert raw.sigma == pytest.approx((x @ raw.u).std())


def test_random_axis_is_seeded_and_optionally_orthogonal():
    u = np.eye(8)[0]
    r1, r2 = iv.random_axis(8, 5), iv.random_axis(8, 5)
    assert np.array_equal(r1, r2) and np.isclose(np.linalg.norm(r1), 1)
    assert abs(iv.random_axis(8, 5, orthogonal_to=u) @ u) < 1e-12


def test_layer_sets_are_explicit():
    assert iv.default_layer_sets(24) == [[12], [23], [8, 12, 16, 20, 23]]  # Paper III's Pythia-410M layers
    with pytest.raises(ConfigError, match="0 <= layer <= 23"):
        iv.check_layer_sets([[24]], 24)
    with pytest.raises(ConfigError, match="-1 is rejected"):
        build_options({"intervention_layers": "-1"})
    assert build_options({"intervention_layers": "12;23;8,12,16,20,23"}).intervention_layers == \
        [[12], [23], [8, 12, 16, 20, 23]]
    assert build_options({"intervention_layers": [3, [1, 2]]}).intervention_layers == [[3], [1, 2]]
