"""The model contract, checked on every architecture with token and vector inputs."""

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.models import count_params, make_model


def sample_inputs(spec, batch=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    if spec.input_kind == "tokens":
        return torch.randint(0, spec.vocab_size - 1, (batch, spec.seq_len), generator=g)
    return torch.randn(batch, spec.seq_len, spec.input_dim, generator=g)


def out_size(spec):
    return spec.answer_size if spec.output_kind == "categorical" else 2


def test_output_shapes_all_and_selected_positions(small, spec):
    name, params = small
    model = make_model(name, spec, params).eval()
    x = sample_inputs(spec)
    out = model(x)
    assert out.shape == (3, spec.seq_len, out_size(spec))
    positions = torch.tensor([0, 3, spec.seq_len - 1])
    torch.testing.assert_close(model(x, positions=positions), out[:, positions], atol=1e-5, rtol=1e-5)


def test_causal(small, spec):
    """Changing inputs at positions >= t never changes the outputs before t."""
    name, params = small
    model = make_model(name, spec, params).eval()
    x = sample_inputs(spec, seed=1)
    t = spec.seq_len // 2
    changed = x.clone()
    changed[:, t:] = sample_inputs(spec, seed=2)[:, t:]
    before, after = model(x), model(changed)
    torch.testing.assert_close(after[:, :t], before[:, :t], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(after[:, t:], before[:, t:])


def test_gradients_reach_every_parameter(small, spec):
    name, params = small
    model = make_model(name, spec, params)
    model(sample_inputs(spec)).square().mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing


def test_capture_every_name(small, spec):
    name, params = small
    model = make_model(name, spec, params).eval()
    x = sample_inputs(spec)
    out, cache = model.run_with_cache(x)
    assert set(cache) == set(model.capture_names())
    assert {"embed", "final"} <= set(cache)
    assert all(v.shape[:2] == (3, spec.seq_len) or v.shape[0] == 3 for v in cache.values())
    torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)
    assert not any(v.requires_grad for v in cache.values())


def test_unknown_capture_name_lists_valid_ones(small, spec):
    name, params = small
    model = make_model(name, spec, params)
    with pytest.raises(ConfigError, match="unknown capture name.*blocks.99.nope.*valid: embed"):
        model.run_with_cache(sample_inputs(spec), names=["final", "blocks.99.nope"])


def test_n_params_matches_meta_count(small, spec):
    name, params = small
    model = make_model(name, spec, params)
    assert model.n_params() == count_params(name, spec, params) > 0
    assert model.name == name and model.config.max_len == spec.seq_len


def test_wrong_input_kind_is_rejected(small, sepvocab, vectors):
    name, params = small
    with pytest.raises(ValueError, match="tokens inputs must have 2 dimensions"):
        make_model(name, sepvocab, params)(torch.zeros(2, 5, 3))
    with pytest.raises(ValueError, match="vectors inputs must have 3 dimensions"):
        make_model(name, vectors, params)(torch.zeros(2, 5))


def test_tie_head_needs_answer_tokens(small, vectors):
    name, params = small
    with pytest.raises(ConfigError, match="tie_head=True needs a categorical token task"):
        make_model(name, vectors, {**params, "tie_head": True})
