"""Bijection posterior against brute-force enumeration of every permutation (V <= 6)."""

import itertools
import math

import pytest
import torch
from test_common import LADDERS, ladder

from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator, make_task

#: free keys up to which the completions of a context are enumerated (6! = 720 of them)
MAX_FREE = 6


def brute_force(V, keys, values, query):
    """p(pi(query) = y | pi(keys[j]) = values[j] for all j) by enumerating all V! bijections."""
    counts = torch.zeros(V, dtype=torch.float64)
    for perm in itertools.permutations(range(V)):
        if all(perm[k] == v for k, v in zip(keys, values)):
            counts[perm[query]] += 1
    return counts / counts.sum()


def enumerate_completions(V, keys, values, query):
    """The same posterior by enumerating only the bijections that extend the revealed pairs:
    every assignment of the unrevealed values to the unrevealed keys ((V - m)! of them for m
    distinct revealed keys), each checked against every pair."""
    known = dict(zip(keys, values))
    free_keys = [k for k in range(V) if k not in known]
    free_values = [v for v in range(V) if v not in known.values()]
    counts = torch.zeros(V, dtype=torch.float64)
    for image in itertools.permutations(free_values):
        perm = {**known, **dict(zip(free_keys, image))}
        if sorted(perm.values()) == list(range(V)) and all(perm[k] == v for k, v in zip(keys, values)):
            counts[perm[query]] += 1
    return counts / counts.sum()


def count_completions(V, keys, values, query):
    """The same posterior by counting the consistent bijections: with m distinct keys revealed,
    (V - m)! bijections extend the pairs; a revealed query keeps its value in all of them, an
    unrevealed one takes each unrevealed value in (V - m - 1)! of them and a revealed value in none."""
    known = dict(zip(keys, values))
    m = len(known)
    counts = [0] * V
    if query in known:
        counts[known[query]] = math.factorial(V - m)
    else:
        for y in set(range(V)) - set(known.values()):
            counts[y] = math.factorial(V - m - 1)
    return torch.tensor([c / sum(counts) for c in counts], dtype=torch.float64)


@pytest.mark.parametrize("fmt", ["sepvocab", "paired"])
@pytest.mark.parametrize("with_replacement", [False, True])
@pytest.mark.parametrize("V,L", [(4, 4), (5, 3), (6, 6),
                                 *((r["V"], r["L"]) for r in LADDERS["bijection"] if r["V"] <= 6)])  # the V = 5 rung
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


@pytest.mark.parametrize("with_replacement", [False, True])
@pytest.mark.parametrize("params", ladder("bijection"))
def test_ladder_posterior_matches_counted_completions(params, with_replacement):
    """Every rung, V = 20 included: the consistent bijections counted at every position, and
    enumerated where at most MAX_FREE keys remain unrevealed (all V! only where V <= 6)."""
    task = make_task("bijection", {**params, "with_replacement": with_replacement})
    V, L = task.config.V, task.config.L
    b = task.sample(8, make_generator(V * 10 + L))
    enumerated = 0
    for i in range(b.size):
        keys, values = b.latent["keys"][i].tolist(), b.latent["values"][i].tolist()
        for j in range(L):
            ctx = (keys[:j], values[:j], keys[j])
            torch.testing.assert_close(b.probs[i, j], count_completions(V, *ctx))
            if V - len(set(keys[:j])) <= MAX_FREE:
                torch.testing.assert_close(b.probs[i, j], enumerate_completions(V, *ctx))
                enumerated += 1
            if V <= 6:
                torch.testing.assert_close(b.probs[i, j], brute_force(V, *ctx))
    assert enumerated > 0 or with_replacement  # without replacement the last MAX_FREE keys always are


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
