"""Registry, config errors, parameter counts and capacity matching."""

import pytest

from windtunnel.config import ConfigError
from windtunnel.models import count_params, make_model, match_capacity, model_names


def test_registry():
    assert {"transformer", "mamba", "mamba2", "lstm", "mlp", "gru", "linear_attention", "deltanet",
            "swa_transformer", "hybrid", "tinygpt"} <= set(model_names())
    with pytest.raises(ConfigError, match="unknown model 'gpt'; available: deltanet, gru, hybrid, linear_attention, "
                                          "lstm, mamba, mamba2, mlp, swa_transformer, tinygpt, transformer"):
        make_model("gpt", None)


@pytest.mark.parametrize("name, params, message", [
    ("lstm", {"d_model": 0}, "field 'd_model' = 0.*allowed: 1 <= value"),
    ("mamba", {"d_state": "big"}, "field 'd_state'"),
    ("mamba", {"expand": 9}, "allowed: 1 <= value <= 8"),
    ("lstm", {"max_len": 10, "pos_embed": True}, "context longer than the position table"),
    ("mlp", {"max_len": 10}, "context longer than the position table"),
])
def test_bad_fields_name_the_field_and_range(sepvocab, name, params, message):
    with pytest.raises(ConfigError, match=message):
        make_model(name, sepvocab, params)


def test_recurrent_models_without_positions_ignore_max_len(sepvocab):
    assert make_model("lstm", sepvocab, {"max_len": 10, "n_layers": 1, "d_model": 8}).embed.pos is None


def test_authors_baseline_counts(sepvocab):
    """The authors' LSTM 6x192 with positions and tied head (1,794,048) and per-position MLP control
    9 x (192 -> 768 -> 192), tied (2,681,664), on the sep-vocab bijection."""
    assert count_params("lstm", sepvocab, dict(tie_head=True, pos_embed=True)) == 1_794_048
    assert count_params("mlp", sepvocab, dict(tie_head=True)) == 2_681_664


@pytest.mark.parametrize("name, params", [
    ("mlp", {"variant": "prefix"}),
    ("mlp", {"tie_head": True}),
    ("lstm", {"tie_head": True}),
    ("mamba", {"tie_head": True}),
    ("transformer", {"n_heads": 6, "n_layers": 4, "tie_head": True}),
])
def test_capacity_matched_to_the_paper_transformer(sepvocab, paper_transformer, name, params):
    target = count_params("transformer", sepvocab, paper_transformer)
    assert target == 2_677_440
    config, n = match_capacity(name, sepvocab, target, params)
    assert abs(n - target) <= 0.02 * target
    assert make_model(name, sepvocab, config).n_params() == n
    if name == "transformer":
        assert config["d_model"] % 6 == 0


def test_capacity_matched_mamba2(sepvocab):
    pytest.importorskip("transformers")
    config, n = match_capacity("mamba2", sepvocab, 1_000_000, {"n_layers": 4, "head_dim": 4})
    assert abs(n - 1_000_000) <= 20_000 and (2 * config["d_model"]) % 4 == 0


def test_capacity_replaces_a_given_knob_value(sepvocab):
    config, n = match_capacity("lstm", sepvocab, 10**6, {"d_model": 64, "n_layers": 2})
    assert config["d_model"] > 64 and abs(n - 10**6) <= 20_000


def test_capacity_errors(sepvocab):
    with pytest.raises(ConfigError, match="cannot match 100 parameters within 2.0% by varying 'd_model'"):
        match_capacity("lstm", sepvocab, 100)
    with pytest.raises(ConfigError, match="knob 'norm' is not an integer field"):
        match_capacity("transformer", sepvocab, 10**6, knob="norm")


def test_model_from_keywords_and_config_round_trip(sepvocab):
    from windtunnel.models.transformer import Transformer

    model = Transformer(sepvocab, n_layers=1, n_heads=2, d_model=8)
    assert model.config.d_ffn == 32 and model.config.max_len == 37
    again = make_model("transformer", sepvocab, model.config.model_dump())
    assert again.config == model.config and again.n_params() == model.n_params()
    with pytest.raises(ConfigError, match="either a config object or keyword parameters"):
        Transformer(sepvocab, model.config, n_layers=2)
