"""MLP baselines: the prefix MLP equals its flatten-and-zero-pad definition; per-position MLP
sees one position only."""

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.models import make_model

PREFIX = dict(variant="prefix", n_layers=2, width=24, d_embed=4)


def tokens(spec, batch=3, seed=0):
    return torch.randint(0, 40, (batch, spec.seq_len), generator=torch.Generator().manual_seed(seed))


def test_prefix_equals_flattened_zero_padded_prefix(sepvocab):
    model = make_model("mlp", sepvocab, PREFIX).eval()
    x = tokens(sepvocab)
    e = model.embed(x)  # (B, T, d_embed)
    expected = []
    for p in range(sepvocab.seq_len):
        flat = torch.cat([e[:, : p + 1], torch.zeros_like(e[:, p + 1:])], 1).flatten(1)
        h = model.inp(flat)
        for block in model.blocks:
            h = block(h)
        expected.append(model.head(model.norm(h)))
    torch.testing.assert_close(model(x), torch.stack(expected, 1), atol=1e-5, rtol=1e-5)


def test_prefix_deep_layers_run_at_requested_positions_only(sepvocab):
    model = make_model("mlp", sepvocab, PREFIX).eval()
    positions = torch.tensor([4, 36])
    out, cache = model.run_with_cache(tokens(sepvocab), positions=positions)
    assert out.shape == (3, 2, 20)
    assert cache["blocks.1.resid_post"].shape == cache["final"].shape == (3, 2, 24)
    assert cache["embed"].shape == (3, 37, 4)


def test_prefix_accepts_shorter_inputs_only(sepvocab):
    model = make_model("mlp", sepvocab, PREFIX)
    assert model(tokens(sepvocab)[:, :10]).shape == (3, 10, 20)
    with pytest.raises(ValueError, match="exceeds the prefix MLP's context"):
        model(torch.zeros(1, 38, dtype=torch.long))


def test_per_position_mlp_does_not_mix_positions(sepvocab):
    model = make_model("mlp", sepvocab, dict(n_layers=2, d_model=16, d_ffn=32)).eval()
    x = tokens(sepvocab)
    changed = x.clone()
    changed[:, 10] = (x[:, 10] + 1) % 40
    diff = (model(changed) - model(x)).abs().amax((0, 2))
    assert diff[10] > 0 and diff[:10].max() == 0 and diff[11:].max() == 0


def test_variant_defaults_and_errors(sepvocab):
    assert make_model("mlp", sepvocab).config.n_layers == 9
    assert make_model("mlp", sepvocab, {"variant": "prefix"}).config.n_layers == 18
    with pytest.raises(ConfigError, match="tie_head=True is not available for the prefix MLP"):
        make_model("mlp", sepvocab, {**PREFIX, "tie_head": True})
    with pytest.raises(ConfigError, match="field 'variant'.*one of per_position, prefix"):
        make_model("mlp", sepvocab, {"variant": "flat"})
