"""Transformer: attention paths, capture points, head masks, bypasses, parameter counts."""

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.models import make_model

SMALL = dict(n_layers=3, n_heads=4, d_model=32)


def tokens(spec, batch=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, spec.vocab_size - 1, (batch, spec.seq_len), generator=g)


@pytest.fixture
def model(sepvocab):
    torch.manual_seed(0)
    return make_model("transformer", sepvocab, SMALL).eval()


def pattern_names(n_layers):
    return [f"blocks.{i}.attn.pattern" for i in range(n_layers)]


def test_sdpa_path_equals_explicit_path(model, sepvocab):
    x = tokens(sepvocab)
    fast = model(x)
    explicit, cache = model.run_with_cache(x, names=pattern_names(3))
    torch.testing.assert_close(explicit, fast, atol=1e-5, rtol=1e-5)
    pattern = cache["blocks.1.attn.pattern"]
    assert pattern.shape == (4, 4, 37, 37)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(4, 4, 37))
    assert (pattern.triu(1) == 0).all()


def test_capture_shapes(model, sepvocab):
    _, cache = model.run_with_cache(tokens(sepvocab), positions=torch.tensor([0, 2]))
    for k in "qkvz":
        assert cache[f"blocks.2.attn.{k}"].shape == (4, 4, 37, 8)
    assert cache["blocks.0.attn.pattern"].shape == (4, 4, 37, 37)
    for name in ("embed", "blocks.0.resid_post", "final"):
        assert cache[name].shape == (4, 37, 32)
    assert len(cache) == len(model.capture_names()) == 1 + 3 * 6 + 1


def test_head_mask(model, sepvocab):
    x = tokens(sepvocab)
    base = model(x)
    assert model.head_mask.shape == (3, 4)
    model.head_mask.fill_(1.0)
    torch.testing.assert_close(model(x), base)
    model.head_mask[1, 2] = 0.0
    masked = model(x)
    assert not torch.allclose(masked, base, atol=1e-4)
    # the mask acts on z before W_O, identically on the sdpa and the explicit path
    explicit, cache = model.run_with_cache(x, names=["blocks.1.attn.z", *pattern_names(3)])
    torch.testing.assert_close(explicit, masked, atol=1e-5, rtol=1e-5)
    assert (cache["blocks.1.attn.z"][:, 2] == 0).all() and (cache["blocks.1.attn.z"][:, 1] != 0).any()
    model.clear_ablations()
    torch.testing.assert_close(model(x), base)


def test_block_bypass_equals_model_without_that_block(model, sepvocab):
    x = tokens(sepvocab)
    model.set_bypass(1, "block")
    smaller = make_model("transformer", sepvocab, {**SMALL, "n_layers": 2}).eval()
    state = {k.replace("blocks.2.", "blocks.1."): v for k, v in model.state_dict().items()
             if not k.startswith("blocks.1.")}
    smaller.load_state_dict(state)
    torch.testing.assert_close(model(x), smaller(x), atol=1e-6, rtol=1e-6)
    _, cache = model.run_with_cache(x)
    torch.testing.assert_close(cache["blocks.1.resid_post"], cache["blocks.0.resid_post"])
    assert "blocks.1.attn.q" not in cache  # a bypassed attention computes nothing


def test_attn_bypass_equals_masking_all_its_heads(model, sepvocab):
    x = tokens(sepvocab)
    model.head_mask[2] = 0.0
    masked = model(x)
    model.clear_ablations()
    model.set_bypass(2, "attn")
    torch.testing.assert_close(model(x), masked, atol=1e-6, rtol=1e-6)


def test_ffn_bypass_equals_zeroed_ffn(model, sepvocab):
    x = tokens(sepvocab)
    model.set_bypass(0, "ffn")
    bypassed = model(x)
    model.set_bypass(0, None)
    with torch.no_grad():
        model.blocks[0].ffn.fc2.weight.zero_()
        model.blocks[0].ffn.fc2.bias.zero_()
    torch.testing.assert_close(model(x), bypassed, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("layer, what, message", [
    (3, "block", "layer must be an integer in 0..2"),
    (-1, "attn", "layer must be an integer in 0..2"),
    (0, "mlp", "bypass must be one of block, attn, ffn or None"),
])
def test_bad_bypass(model, layer, what, message):
    with pytest.raises(ConfigError, match=message):
        model.set_bypass(layer, what)


def test_paper_parameter_counts(paired, sepvocab, paper_transformer):
    """6L/6H/d192/ffn768, tied, RMSNorm, no attention biases, FFN biases:
    blocks 6 * (110,592 qkv + 36,864 W_O + 295,872 FFN + 384 norms) = 2,662,272,
    + final norm 192 + 39 positions * 192 = 7,488 + 20 value embeddings * 192 = 3,840
    = 2,673,792 (the paper's 2.67M), + 192 for the reserved pad row."""
    assert make_model("transformer", paired, paper_transformer).n_params() == 2_673_792 + 192
    # LayerNorm adds a bias to each of the 13 norms: + 13 * 192
    layernorm = {**paper_transformer, "norm": "layernorm"}
    assert make_model("transformer", paired, layernorm).n_params() == 2_673_984 + 13 * 192
    # sep-vocab: 41 token rows, 37 positions
    assert make_model("transformer", sepvocab, paper_transformer).n_params() == 2_677_440


def test_tied_head_reads_the_answer_embeddings(sepvocab):
    model = make_model("transformer", sepvocab, {**SMALL, "tie_head": True}).eval()
    _, cache = model.run_with_cache(tokens(sepvocab), names=["final"])
    logits = cache["final"] @ model.embed.tok.weight[20:40].T
    torch.testing.assert_close(model(tokens(sepvocab)), logits)
    assert model.embed.tok.weight[40].abs().sum() == 0  # pad row


def test_length_generalisation_needs_a_longer_position_table(sepvocab):
    with pytest.raises(ConfigError, match="context longer than the position table.*max_len >= 37"):
        make_model("transformer", sepvocab, {**SMALL, "max_len": 20})
    model = make_model("transformer", sepvocab, {**SMALL, "max_len": 60})
    assert model(torch.zeros(2, 60, dtype=torch.long)).shape == (2, 60, 20)
    with pytest.raises(ValueError, match="exceeds the position table"):
        model(torch.zeros(2, 61, dtype=torch.long))


@pytest.mark.parametrize("params, message", [
    ({"d_model": 30, "n_heads": 4}, "d_model 30 must be a multiple of n_heads 4"),
    ({"n_layers": 0}, "field 'n_layers' = 0.*allowed: 1 <= value <= 128"),
    ({"norm": "batchnorm"}, "field 'norm'.*allowed: one of layernorm, rmsnorm"),
    ({"dropout": 1.5}, "field 'dropout'"),
    ({"heads": 4}, "unknown field 'heads'"),
])
def test_bad_config(sepvocab, params, message):
    with pytest.raises(ConfigError, match=message):
        make_model("transformer", sepvocab, params)


def test_dropout_in_training_only(sepvocab):
    model = make_model("transformer", sepvocab, {**SMALL, "dropout": 0.5})
    x = tokens(sepvocab)
    assert not torch.allclose(model.train()(x), model(x))
    model.eval()
    torch.testing.assert_close(model(x), model(x))
