"""Bijection posterior against brute-force enumeration of every permutation (V <= 6)."""

import itertools
import math

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator, make_task


def brute_force(V, keys, values, query):
    """p(pi(query) = y | pi(keys[j]) = values[j] for all j) by enumerating all V! bijections."""
    counts = torch.zeros(V, dtype=torch.float64)
    for perm in itertools.permutations(range(V)):
        if all(perm[k] == v for k, v in zip(keys, values)):
            counts[perm[query]] += 1
    return counts / counts.sum()


@pytest.mark.parametrize("fmt", ["sepvocab", "paired"])
@pytest.mark.parametrize("with_replacement", [False, True])
@pytest.mark.parametrize("V,L", [(4, 4), (5, 3), (6, 6)])
def test_posterior_matches_enumeration(fmt, with_replacement, V, L):
    task = make_task("bijection", {"V": V, "L": L, "format": fmt, "with_replacement": with_replacement})
    b = task.sample(12, make_generator(V * 10 + L))
    for i in range(b.size):
        keys, values = b.latent["keys"][i].tolist(), b.latent["values"][i].tolist()
        for j in range(L):
            expect = brute_force(V, keys[:j], values[:j], keys[j])
            torch.testing.assert_close(b.probs[i, j], expect)
        if fmt == "paired":
            query = b.inputs[i, -1].item()
            torch.testing.assert_close(b.probs[i, L], brute_force(V, keys, values, query))
            assert b.target[i, L] == b.latent["permutation"][i, query]


def test_fresh_query_is_unseen_and_enumerated():
    task = make_task("bijection", {"V": 6, "L": 4, "format": "paired", "query": "fresh"})
    b = task.sample(20, make_generator(1))
    for i in range(b.size):
        keys, values = b.latent["keys"][i].tolist(), b.latent["values"][i].tolist()
        q = b.inputs[i, -1].item()
        assert q not in keys
        torch.testing.assert_close(b.probs[i, -1], brute_force(6, keys, values, q))


def test_entropy_formula_without_replacement():
    task = make_task("bijection")  # V = 20, L = 19, sepvocab
    b = task.sample(64, make_generator(0))
    k = torch.arange(1, 20, dtype=torch.float64)
    expect = torch.log2(20 - k + 1)
    torch.testing.assert_close(b.entropy, expect.expand(64, -1))
    assert abs(b.entropy[0].mean().item() - 3.2146) < 1e-4  # spec: mean over k = 1..19


def test_sequence_layouts():
    sep = make_task("bijection", {"V": 5, "L": 4})
    b = sep.sample(3, make_generator(0))
    assert b.inputs.shape == (3, 7) and sep.spec.vocab_size == 11 and sep.spec.pad_id == 10
    assert torch.equal(b.inputs[:, 0::2], b.latent["keys"])
    assert torch.equal(b.inputs[:, 1::2], b.latent["values"][:, :3] + 5)
    assert b.positions.tolist() == [0, 2, 4, 6]
    assert torch.equal(b.target, b.latent["values"])
    paired = make_task("bijection", {"V": 5, "L": 4, "format": "paired"})
    b = paired.sample(3, make_generator(0))
    assert b.inputs.shape == (3, 9) and paired.spec.vocab_size == 6
    assert b.positions.tolist() == [0, 2, 4, 6, 8]
    assert torch.equal(b.inputs[:, 1:-1:2], b.latent["values"])
    assert (b.entropy[:, -1] == 0).all()  # query drawn from the context: delta
    # the values really come from the permutation
    assert torch.equal(b.latent["permutation"].gather(1, b.latent["keys"]), b.latent["values"])


def test_paper_sizes_and_hypothesis_space():
    t = make_task("bijection", preset="paper")
    assert t.spec.seq_len == 39 and t.spec.n_scored == 20
    assert t.hypothesis_space().log10_size == pytest.approx(math.log10(math.factorial(20)))


@pytest.mark.parametrize(
    "params,field",
    [({"V": 1}, "V"), ({"L": 0}, "L"), ({"V": 5, "L": 6}, "L = 6"), ({"format": "x"}, "format"), ({"W": 3}, "W")],
)
def test_bad_config_names_the_field(params, field):
    with pytest.raises(ConfigError, match=field):
        make_task("bijection", params)
