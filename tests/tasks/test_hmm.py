"""HMM filtering posterior against enumeration of every hidden path, and the header format."""

import itertools

import numpy as np
import pytest
import torch
from test_common import LADDERS, rung_id, rung_params

from windtunnel.tasks import make_generator, make_task
from windtunnel.tasks.hmm import discretize_rows, forward_filter
from windtunnel.tasks.sampling import dirichlet, gamma


def enumerate_filter(T, E, obs, first_step):
    """p(s_t | o_1..t) by summing the joint over all S^t hidden paths (numpy, float64)."""
    S = T.shape[0]
    out = []
    for t in range(1, len(obs) + 1):
        post = np.zeros(S)
        starts = range(S) if first_step == "transition_first" else [None]
        for path in itertools.product(range(S), repeat=t):
            for s0 in starts:
                p = 1.0 / S
                if s0 is not None:
                    p *= T[s0, path[0]]
                for u in range(t):
                    if u > 0:
                        p *= T[path[u - 1], path[u]]
                    p *= E[path[u], obs[u]]
                post[path[-1]] += p
        out.append(post / post.sum())
    return np.array(out)


#: the short K at which each rung small enough is enumerated (S^K hidden paths: 256 and 729)
ENUMERATED_K = {2: 8, 3: 6}
ENUMERATED_RUNGS = [pytest.param(rung_params("hmm", r, K=k), id=f"{rung_id(r)}-K{k}")
                    for r in LADDERS["hmm"] if (k := ENUMERATED_K.get(r["S"]))]


@pytest.mark.parametrize("first_step", ["observe_first", "transition_first"])
@pytest.mark.parametrize("params", [pytest.param({"S": 3, "O": 4, "K": 5}, id="S3-O4-K5"), *ENUMERATED_RUNGS])
def test_filter_matches_path_enumeration(params, first_step):
    task = make_task("hmm", {**params, "first_step": first_step})
    b = task.sample(6, make_generator(7))
    for i in range(b.size):
        T, E = b.latent["transition"][i].numpy(), b.latent["emission"][i].numpy()
        expect = enumerate_filter(T, E, b.latent["observations"][i].tolist(), first_step)
        np.testing.assert_allclose(b.probs[i].numpy(), expect, rtol=1e-10, atol=1e-12)


def test_conventions_differ():
    g = make_generator(0)
    task = make_task("hmm", {"K": 4})
    b = task.sample(4, g)
    a = forward_filter(b.latent["transition"], b.latent["emission"], b.latent["observations"], "observe_first")
    c = forward_filter(b.latent["transition"], b.latent["emission"], b.latent["observations"], "transition_first")
    assert not torch.allclose(a, c)


def test_matrices_on_grid_with_floor_and_header_shows_them():
    task = make_task("hmm")
    b = task.sample(256, make_generator(3))
    for m in (b.latent["transition"], b.latent["emission"]):
        cents = m * 100
        assert torch.allclose(cents, cents.round(), atol=1e-9)
        assert (cents.round().sum(-1) == 100).all()
        assert (cents.round() >= 5).all()
    spec = task.spec
    assert spec.seq_len == 93 and spec.vocab_size == 106 and spec.pad_id == 105  # 105 authors' tokens + pad
    assert task.header_len == 53
    names = task.token_names()
    header = [names[t] for t in b.inputs[0, :53].tolist()]
    assert header[0] == "[TRANS]" and header[26] == "[EMIT]" and header[52] == "[SEP]"
    shown_T = torch.tensor([float(x) for x in header[1:26]], dtype=torch.float64).view(5, 5)
    torch.testing.assert_close(shown_T, b.latent["transition"][0])
    assert b.positions.tolist() == [53 + 2 * t + 1 for t in range(20)]
    obs_tokens = b.inputs[:, b.positions] - task.token_ids["o0"]
    assert torch.equal(obs_tokens, b.latent["observations"])


def test_floor_zero_uses_full_probability_table():
    task = make_task("hmm", {"floor": 0.0})
    assert task.token_ids["[TRANS]"] == 101
    b = task.sample(64, make_generator(0))
    names = task.token_names()
    shown = torch.tensor([float(names[t]) for t in b.inputs[0, 1:26].tolist()], dtype=torch.float64)
    torch.testing.assert_close(shown.view(5, 5), b.latent["transition"][0])


def test_discretize_rows_exact():
    rows = torch.tensor([[0.333, 0.333, 0.334], [0.004, 0.5, 0.496], [0.126, 0.126, 0.748]], dtype=torch.float64)
    cents = discretize_rows(rows, 5)
    assert (cents.sum(-1) == 100).all() and (cents >= 5).all()


def test_gamma_and_dirichlet_sampler_match_their_laws():
    from scipy import stats

    g = make_generator(11)
    for a in (0.3, 1.0, 2.5):
        x = gamma(torch.full((20000,), a), g).numpy()
        assert stats.kstest(x, stats.gamma(a).cdf).pvalue > 1e-3
    d = dirichlet(1.0, (40000, 5), g)
    torch.testing.assert_close(d.mean(0), torch.full((5,), 0.2, dtype=torch.float64), atol=4e-3, rtol=0)
    # Var of a Dirichlet(1,...,1) component with 5 entries: (1/5)(4/5)/(5+1)
    torch.testing.assert_close(d.var(0), torch.full((5,), 0.16 / 6, dtype=torch.float64), atol=1e-3, rtol=0)


def rejection_loop_gamma(alpha: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Marsaglia-Tsang written plainly: every pass proposes for the elements still rejected."""
    alpha = alpha.to(torch.float64)
    a = torch.where(alpha < 1, alpha + 1, alpha)
    d = a - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    out, todo = torch.empty_like(a), torch.ones_like(a, dtype=torch.bool)
    while todo.any():
        idx = todo.nonzero(as_tuple=True)
        x = torch.randn(d[idx].shape, generator=generator, dtype=torch.float64)
        u = torch.rand(d[idx].shape, generator=generator, dtype=torch.float64)
        v = (1 + c[idx] * x) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * x * x + d[idx] - d[idx] * v + d[idx] * torch.log(v.clamp_min(1e-300)))
        sel = tuple(i[ok] for i in idx)
        out[sel] = (d[idx] * v)[ok]
        todo[sel] = False
    if (alpha < 1).any():
        u = torch.rand(a.shape, generator=generator, dtype=torch.float64)
        out = torch.where(alpha < 1, out * u ** (1.0 / alpha), out)
    return out


def test_gamma_draws_are_those_of_the_plain_rejection_loop():
    """The sampler's first pass skips the indexing but keeps the stream: runs reproduce across it."""
    for seed, alpha in [(0, torch.full((64, 8), 2.0)), (1, torch.full((300,), 0.05)),
                        (2, torch.tensor([[0.1, 1.0, 5.0, 0.5]] * 7)), (3, torch.full((2, 3, 4), 1.0))]:
        g1, g2 = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        assert torch.equal(gamma(alpha, g1), rejection_loop_gamma(alpha, g2))
        assert torch.equal(torch.rand(4, generator=g1), torch.rand(4, generator=g2))  # as many draws taken


def test_length_generalisation_lengths():
    task = make_task("hmm")
    for K in (20, 30, 50):
        t = task.with_length(K)
        assert t.spec.seq_len == 53 + 2 * K
        assert t.sample(2, make_generator(0)).probs.shape == (2, K, 5)
