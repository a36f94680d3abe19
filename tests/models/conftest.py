"""Task specs and small model configs shared by the model tests."""

import pytest

from windtunnel.tasks import TaskSpec

#: the sep-vocab bijection: keys 0..19, values 20..39, pad 40, every key position scored
SEPVOCAB = TaskSpec(name="bijection_sepvocab", input_kind="tokens", seq_len=37, n_scored=19, answer_size=20,
                    output_kind="categorical", loss="ce", vocab_size=41, pad_id=40,
                    answer_token_ids=tuple(range(20, 40)))
#: the paired bijection of Paper I v1: shared vocabulary of 20, pad 20, [k1, v1, ..., k19, v19, q]
PAIRED = TaskSpec(name="bijection_paired", input_kind="tokens", seq_len=39, n_scored=20, answer_size=20,
                  output_kind="categorical", loss="ce", vocab_size=21, pad_id=20,
                  answer_token_ids=tuple(range(20)))
#: a regression-style task: real vectors in, Gaussian (mean, log-variance) out
VECTORS = TaskSpec(name="regression", input_kind="vectors", seq_len=12, n_scored=6, answer_size=1,
                   output_kind="gaussian", loss="gaussian_nll", input_dim=5)

#: the paper's bijection transformer (6L/6H/d192/ffn768, tied), RMSNorm as in the authors' TinyGPT
PAPER_TRANSFORMER = dict(n_layers=6, n_heads=6, d_model=192, d_ffn=768, tie_head=True, norm="rmsnorm")

#: one small config per architecture (and MLP variant), fast on a CPU
SMALL = {
    "transformer": ("transformer", dict(n_layers=2, n_heads=2, d_model=16)),
    "tinygpt": ("tinygpt", dict(n_layers=2, n_heads=2, d_model=16)),
    "mamba": ("mamba", dict(n_layers=2, d_model=16)),
    "mamba2": ("mamba2", dict(n_layers=2, d_model=16, head_dim=8)),
    "lstm": ("lstm", dict(n_layers=2, d_model=16, pos_embed=True)),
    "mlp_per_position": ("mlp", dict(n_layers=2, d_model=16, d_ffn=32)),
    "mlp_prefix": ("mlp", dict(variant="prefix", n_layers=2, width=24, d_embed=4)),
    "gru": ("gru", dict(n_layers=2, d_model=16, pos_embed=True)),
    "swa_transformer": ("swa_transformer", dict(n_layers=2, n_heads=2, d_model=16, window=4)),
    "linear_attention": ("linear_attention", dict(n_layers=2, n_heads=2, d_model=16)),
    "deltanet": ("deltanet", dict(n_layers=2, n_heads=2, d_model=16, chunk_size=8)),
    "hybrid": ("hybrid", dict(n_layers=2, n_heads=2, d_model=16)),
}


@pytest.fixture(params=list(SMALL), ids=list(SMALL))
def small(request):
    """(registered name, params) of a small model of every architecture."""
    name, params = SMALL[request.param]
    if name == "mamba2":
        pytest.importorskip("transformers")
    return name, params


@pytest.fixture(params=[SEPVOCAB, VECTORS], ids=["tokens", "vectors"])
def spec(request):
    return request.param


@pytest.fixture
def sepvocab():
    return SEPVOCAB


@pytest.fixture
def paired():
    return PAIRED


@pytest.fixture
def vectors():
    return VECTORS


@pytest.fixture
def paper_transformer():
    return dict(PAPER_TRANSFORMER)
