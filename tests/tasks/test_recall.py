"""Associative recall layout and its delta posterior."""

import pytest
import torch
from test_common import ladder

from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator, make_task
from windtunnel.tasks.recall import ANS, KEY0, QUERY, STORE


@pytest.mark.parametrize("params", ladder("recall"))  # the N = 8 rung is the "small" preset
def test_queries_retrieve_the_stored_value(params):
    task = make_task("recall", params)
    b = task.sample(16, make_generator(0))
    c = task.config
    for i in range(b.size):
        seq = b.inputs[i].tolist()
        store = {seq[4 * j + 1]: seq[4 * j + 3] for j in range(c.N)}
        assert all(seq[4 * j] == STORE for j in range(c.N))
        for m, pos in enumerate(b.positions.tolist()):
            assert seq[pos - 1] == QUERY and seq[pos + 1] == ANS
            value_token = store[seq[pos]]
            assert value_token - KEY0 - c.n_keys == b.target[i, m]
            assert b.probs[i, m, b.target[i, m]] == 1.0
    assert (b.entropy == 0).all()


def test_default_length_matches_authors_generator():
    task = make_task("recall")
    assert task.spec.seq_len == 4 * 64 + 32 + 3 * 3 + 2 * 16
    assert task.spec.vocab_size == 522 and task.spec.pad_id == 0


def test_bad_config():
    with pytest.raises(ConfigError, match="M = 9 queries"):
        make_task("recall", {"N": 8, "M": 9})


# --- MQAR (zoology's multi-query associative recall) -------------------------------------
MQAR = {"format": "mqar", "N": 4, "vocab_size": 40, "seq_len": 32}


def _zoology_ids(x: torch.Tensor) -> torch.Tensor:
    return x - 1  # our ids are zoology's shifted by one (0 stays padding)


@pytest.mark.parametrize("noise", [True, False])
def test_mqar_answers_by_brute_force_lookup(noise):
    """Independent oracle: read the pairs from the tokens alone and look each query key up."""
    task = make_task("recall", {**MQAR, "random_non_queries": noise})
    c = task.config
    b = task.sample(64, make_generator(3))
    z = _zoology_ids(b.inputs)
    half = c.vocab_size // 2
    assert b.positions.tolist() == sorted(b.positions.tolist())
    for i in range(b.size):
        seq = z[i].tolist()
        pairs = {seq[2 * j]: seq[2 * j + 1] for j in range(c.N)}
        assert all(1 <= k < half for k in pairs) and all(half <= v < c.vocab_size for v in pairs.values())
        assert len(pairs) == c.N and len(set(pairs.values())) == c.N
        queried = [seq[p] for p in b.positions.tolist()]
        assert sorted(queried) == sorted(pairs)  # every stored key is queried exactly once
        for m, key in enumerate(queried):
            answer = pairs[key] - half  # index into the value vocabulary
            assert b.target[i, m] == answer and b.probs[i, m, answer] == 1.0
            assert task.spec.answer_token_ids[answer] == pairs[key] + 1
        rest = [t for p, t in enumerate(seq) if p >= 2 * c.N and p not in b.positions.tolist()]
        if not noise:
            assert set(rest) == {0}
    assert (b.entropy == 0).all() and int(b.inputs.min()) >= 1 and int(b.inputs.max()) <= c.vocab_size


def test_mqar_layout_matches_zoology_shapes():
    task = make_task("recall", {"format": "mqar", "N": 8, "vocab_size": 8192, "seq_len": 64})
    spec = task.spec
    assert spec.seq_len == 64 and spec.n_scored == 8 and spec.vocab_size == 8193
    assert spec.answer_size == 4096 and task.config.key_count == 4095
    b = task.sample(4, make_generator(0))
    assert ((b.positions - 16) % 2 == 0).all() and int(b.positions.min()) >= 16 and int(b.positions.max()) < 64


def test_mqar_gaps_follow_the_power_law():
    """The first-drawn gap is distributed as p(g) ∝ a g^(a-1); small gaps dominate at a = 0.01."""
    task = make_task("recall", {"format": "mqar", "N": 1, "vocab_size": 40, "seq_len": 12, "power_a": 0.5})
    space = (12 - 2) // 2
    g = torch.arange(1, space + 1, dtype=torch.float64)
    p = 0.5 * g ** -0.5
    p /= p.sum()
    gen = make_generator(0)
    counts = torch.zeros(space)
    for _ in range(4000):
        counts[(int(task.sample(1, gen).positions[0]) - 2) // 2] += 1
    assert torch.allclose(counts / 4000, p.float(), atol=0.03)


def test_mqar_config_errors():
    with pytest.raises(ConfigError, match="M belong to format 'store_sep'"):
        make_task("recall", {**MQAR, "M": 2})
    with pytest.raises(ConfigError, match="4 N <= seq_len"):
        make_task("recall", {**MQAR, "N": 9})
    with pytest.raises(ConfigError, match="must be even"):
        make_task("recall", {**MQAR, "seq_len": 33})
    with pytest.raises(ConfigError, match="must be < vocab_size"):
        make_task("recall", {**MQAR, "vocab_size": 32})
