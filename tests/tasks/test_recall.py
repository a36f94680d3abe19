"""Associative recall layout and its delta posterior."""

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator, make_task
from windtunnel.tasks.recall import ANS, KEY0, QUERY, STORE


def test_queries_retrieve_the_stored_value():
    task = make_task("recall", profile="small")
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
