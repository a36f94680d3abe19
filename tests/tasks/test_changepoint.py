"""Change-point detection: the run-length recursion against enumeration of every change-point
configuration, its limits (h = 0, h = 1), the sampler, the baselines and a short training run."""

import itertools
import json
import math

import numpy as np
import pytest
import torch
from test_common import LADDERS, reliability_z, rung_id, rung_params

from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator, make_task
from windtunnel.tasks.changepoint import run_length_buckets, run_length_filter, segment_distributions


def log_marginal(segment, n_obs, alpha):
    """log p(segment) under the Dirichlet(alpha)-categorical model (Dirichlet-multinomial, in order)."""
    counts = np.bincount(np.asarray(segment, dtype=int), minlength=n_obs)
    return (math.lgamma(n_obs * alpha) - math.lgamma(n_obs * alpha + len(segment))
            + sum(math.lgamma(alpha + c) - math.lgamma(alpha) for c in counts))


def enumerate_joint(xs, n_obs, h, alpha):
    """p(x_1..x_t) and p(r_t = r, x_1..x_t) by summing over all 2^(t-1) change-point patterns
    (a change before step u >= 2 with probability h), each segment scored by its Dirichlet-
    multinomial marginal likelihood."""
    t = len(xs)
    total, by_run = 0.0, np.zeros(t + 1)
    for pattern in itertools.product((0, 1), repeat=max(t - 1, 0)):
        prior = math.prod(h if c else 1 - h for c in pattern)
        if prior == 0:
            continue
        starts = [0] + [u + 1 for u, c in enumerate(pattern) if c]
        bounds = starts + [t]
        loglik = sum(log_marginal(xs[a:b], n_obs, alpha) for a, b in zip(bounds[:-1], bounds[1:]))
        p = prior * math.exp(loglik)
        total += p
        by_run[t - starts[-1] if t else 0] += p
    return total, by_run


def enumerate_predictive(obs, n_obs, h, alpha):
    """p(x_{j+1} | x_1..j) and p(r_j | x_1..j) for j = 0..T-1, by enumeration."""
    T = len(obs)
    probs, runs = np.zeros((T, n_obs)), np.zeros((T, T))
    for j in range(T):
        joint = np.array([enumerate_joint(obs[:j] + [k], n_obs, h, alpha)[0] for k in range(n_obs)])
        probs[j] = joint / joint.sum()
        total, by_run = enumerate_joint(obs[:j], n_obs, h, alpha)
        runs[j, : j + 1] = by_run / total
    return probs, runs


@pytest.mark.parametrize("h", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("n_obs,alpha,T", [(2, 1.0, 8), (3, 0.5, 7), (4, 2.5, 6)])
def test_recursion_matches_enumeration_of_change_points(h, n_obs, alpha, T):
    task = make_task("changepoint", {"n_obs": n_obs, "n_steps": T, "h": h, "alpha": alpha})
    b = task.sample(4, make_generator(3))
    for i in range(b.size):
        probs, runs = enumerate_predictive(b.latent["observations"][i].tolist(), n_obs, h, alpha)
        np.testing.assert_allclose(b.probs[i].numpy(), probs, rtol=0, atol=1e-12)
        np.testing.assert_allclose(b.latent["run_length"][i].numpy(), runs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("h", [0.3, 0.7])
def test_recursion_matches_enumeration_on_chosen_streams(h):
    """Streams the sampler rarely makes: a long run, then a switch to a new symbol."""
    streams = [[0, 0, 0, 0, 0, 1, 1, 1], [0, 1, 0, 1, 2, 2, 2, 2], [2, 2, 2, 2, 2, 2, 2, 2]]
    probs, runs = run_length_filter(torch.tensor(streams), 3, h, 0.7)
    for i, xs in enumerate(streams):
        p, r = enumerate_predictive(xs, 3, h, 0.7)
        np.testing.assert_allclose(probs[i].numpy(), p, rtol=0, atol=1e-12)
        np.testing.assert_allclose(runs[i].numpy(), r, rtol=0, atol=1e-12)


#: the quick profile's rungs at a length small enough to enumerate (2^7 patterns per prefix)
ENUMERATED_RUNGS = [pytest.param(rung_params("changepoint", r, n_steps=8), id=f"{rung_id(r)}-T8")
                    for r in LADDERS["changepoint"]]


@pytest.mark.parametrize("params", ENUMERATED_RUNGS)
def test_every_rung_matches_enumeration(params):
    task = make_task("changepoint", params)
    b = task.sample(3, make_generator(5))
    c = task.config
    for i in range(b.size):
        probs, _ = enumerate_predictive(b.latent["observations"][i].tolist(), c.n_obs, c.h, c.alpha)
        np.testing.assert_allclose(b.probs[i].numpy(), probs, rtol=0, atol=1e-12)


def test_h0_is_never_forgets_and_h1_is_uniform():
    """h = 0: one segment, the Dirichlet-categorical predictive of everything seen. h = 1: every
    observation comes from a fresh p, so nothing seen says anything about the next: uniform
    (not ``forgets_everything``, the window of one)."""
    for h, name in ((0.0, "never_forgets"), (1.0, "uniform")):
        task = make_task("changepoint", {"n_obs": 5, "n_steps": 40, "h": h, "alpha": 0.5})
        b = task.sample(64, make_generator(0))
        torch.testing.assert_close(b.probs, task.baselines(b)[name].probs, rtol=0, atol=1e-13)
    # h = 0: the run covers everything seen; h = 1: the run is the last observation alone
    rl0 = make_task("changepoint", {"n_steps": 10, "h": 0.0}).sample(8, make_generator(1)).latent["run_length"]
    rl1 = make_task("changepoint", {"n_steps": 10, "h": 1.0}).sample(8, make_generator(1)).latent["run_length"]
    assert torch.equal(rl0.argmax(-1), torch.arange(10).expand(8, 10)) and torch.all(rl0.amax(-1) == 1)
    assert torch.equal(rl1.argmax(-1), torch.arange(10).clamp_max(1).expand(8, 10)) and torch.all(rl1.amax(-1) == 1)


def test_baselines_by_hand():
    task = make_task("changepoint", {"n_obs": 3, "n_steps": 4, "alpha": 0.5})
    b = task.sample(1, make_generator(0))
    obs = torch.tensor([[2, 2, 0, 1]])
    b.latent["observations"] = obs
    base = task.baselines(b)
    never = base["never_forgets"].probs[0]
    torch.testing.assert_close(never[0], torch.full((3,), 1 / 3, dtype=torch.float64))
    torch.testing.assert_close(never[2], torch.tensor([0.5, 0.5, 2.5], dtype=torch.float64) / 3.5)
    torch.testing.assert_close(never[3], torch.tensor([1.5, 0.5, 2.5], dtype=torch.float64) / 4.5)
    last = base["forgets_everything"].probs[0]
    torch.testing.assert_close(last[0], torch.full((3,), 1 / 3, dtype=torch.float64))
    torch.testing.assert_close(last[3], torch.tensor([1.5, 0.5, 0.5], dtype=torch.float64) / 2.5)


def test_run_length_posterior_is_a_distribution_over_possible_runs():
    task = make_task("changepoint", {"n_steps": 64, "h": 0.1})
    b = task.sample(256, make_generator(2))
    rl = b.latent["run_length"]
    assert rl.shape == (256, 64, 64) and rl.dtype == torch.float64 and (rl >= 0).all()
    torch.testing.assert_close(rl.sum(-1), torch.ones(256, 64, dtype=torch.float64), rtol=0, atol=1e-12)
    # at position j the run has at most j observations, and at least one once j >= 1
    j, r = torch.meshgrid(torch.arange(64), torch.arange(64), indexing="ij")
    assert (rl[:, (r > j) | ((r == 0) & (j > 0))] == 0).all()
    # the true run length is never ruled out
    assert (rl.gather(2, b.latent["true_run_length"][..., None]) > 0).all()


def test_sampler_layout_and_latent_truth():
    task = make_task("changepoint", {"n_obs": 4, "n_steps": 32, "h": 0.2})
    b = task.sample(512, make_generator(4))
    spec = task.spec
    assert spec.seq_len == spec.n_scored == 32 and spec.vocab_size == 6 and spec.pad_id == 5
    assert spec.answer_token_ids == (0, 1, 2, 3) and spec.loss == "soft_ce"
    obs, change, dist = b.latent["observations"], b.latent["changes"], b.latent["distributions"]
    assert (b.inputs[:, 0] == 4).all() and torch.equal(b.inputs[:, 1:], obs[:, :-1]) and torch.equal(b.target, obs)
    assert (change[:, 0] == 0).all()
    # p stays within a segment and is redrawn at each change-point (almost surely a new value)
    same = (dist[:, 1:] == dist[:, :-1]).all(-1)
    assert torch.equal(same, change[:, 1:] == 0)
    torch.testing.assert_close(dist.sum(-1), torch.ones(512, 32, dtype=torch.float64))
    # change frequency is the hazard (31 * 512 Bernoulli(0.2) draws)
    assert abs(change[:, 1:].double().mean().item() - 0.2) < 4 * math.sqrt(0.16 / (31 * 512))
    assert task.decode(b, 0)[0] == "<s>" and task.token_names()[:4] == ["x0", "x1", "x2", "x3"]


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.5])
def test_segment_distributions_follow_the_dirichlet_law(alpha):
    """alpha = 1 normalises exponential draws, other alphas use the gamma sampler: both Dirichlet."""
    d = segment_distributions(40000, 4, alpha, make_generator(11))
    assert d.shape == (40000, 4) and d.dtype == torch.float64
    torch.testing.assert_close(d.sum(-1), torch.ones(40000, dtype=torch.float64))
    torch.testing.assert_close(d.mean(0), torch.full((4,), 0.25, dtype=torch.float64), atol=4e-3, rtol=0)
    # Var of a symmetric Dirichlet component over 4 entries: (1/4)(3/4)/(4 alpha + 1)
    var = 0.1875 / (4 * alpha + 1)
    torch.testing.assert_close(d.var(0), torch.full((4,), var, dtype=torch.float64), atol=0.06 * var, rtol=0)


@pytest.mark.parametrize("h", [0.05, 0.3])
def test_monte_carlo_frequencies_agree_with_predictive(h):
    task = make_task("changepoint", {"n_obs": 3, "n_steps": 16, "h": h, "alpha": 0.5})
    b = task.sample(20000, make_generator(1))
    assert reliability_z(b.probs, b.target) < 5
    # the check has power: the predictive of another hazard fails it
    wrong, _ = run_length_filter(b.latent["observations"], 3, 0.7 if h < 0.5 else 0.0, 0.5)
    assert reliability_z(wrong, b.target) > 5


def test_bayes_beats_the_baselines_in_log_loss():
    task = make_task("changepoint", {"n_steps": 32, "h": 0.1})
    b = task.sample(4000, make_generator(6))
    nll = {name: -pred.probs.gather(2, b.target[..., None]).log().mean().item() for name, pred in task.baselines(b).items()}
    assert nll["bayes"] < min(v for k, v in nll.items() if k != "bayes")


def test_state_labels_bucket_the_map_run_length():
    r = torch.tensor([0, 1, 2, 3, 4, 7, 8, 31])
    label, k = run_length_buckets(r, 32)
    assert label.tolist() == [0, 1, 2, 2, 3, 3, 4, 5] and k == 6
    task = make_task("changepoint")
    b = task.sample(64, make_generator(0))
    lab, k, what = task.state_labels(b)
    assert lab.shape == (64, 32) and k == 6 and int(lab.max()) < k and "run length" in what
    assert (lab[:, 0] == 0).all()


@pytest.mark.parametrize("params,field", [
    ({"h": 1.5}, "h"), ({"h": -0.1}, "h"), ({"alpha": 0}, "alpha"), ({"alpha": -1.0}, "alpha"),
    ({"n_obs": 1}, "n_obs"), ({"n_steps": 0}, "n_steps"),
])
def test_bad_parameters_name_the_field(params, field):
    with pytest.raises(ConfigError, match=rf"{field}\b") as err:
        make_task("changepoint", params)
    assert "<=" in str(err.value) or "<" in str(err.value)


def test_hazard_error_names_the_allowed_range():
    with pytest.raises(ConfigError) as err:
        make_task("changepoint", {"h": 2})
    msg = str(err.value)
    assert "h" in msg and "0 <= value <= 1" in msg


def test_length_generalisation_and_long_streams_stay_normalised():
    task = make_task("changepoint", {"h": 0.01}).with_length(512)
    b = task.sample(4, make_generator(0))
    assert b.probs.shape == (4, 512, 4) and torch.isfinite(b.probs).all()
    torch.testing.assert_close(b.probs.sum(-1), torch.ones(4, 512, dtype=torch.float64), rtol=0, atol=1e-12)
    assert (b.probs > 0).all()


def test_sample_json_shows_config_latent_and_predictive():
    from typer.testing import CliRunner

    from windtunnel.cli import app

    res = CliRunner().invoke(app, ["sample", "changepoint", "--preset", "small", "--n", "1", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["config"] == {"n_obs": 3, "n_steps": 8, "h": 0.2, "alpha": 1.0}
    seq = doc["sequences"][0]
    assert len(seq["posterior"]) == 8 and all(len(p) == 3 for p in seq["posterior"])
    lat = seq["latent"]
    assert set(lat) == {"observations", "changes", "distributions", "run_length", "true_run_length"}
    assert lat["observations"] == seq["target"] and len(lat["run_length"]) == 8


def test_quick_profile_builds_for_every_model():
    from windtunnel.train.config import resolve_run
    from windtunnel.train.trainer import build

    for model in ["transformer", "mamba", "lstm", "mlp", "gru", "linear_attention", "deltanet", "swa_transformer", "hybrid"]:
        task, _ = build(resolve_run("changepoint", model, "quick"))
        assert task.name == "changepoint"


def test_short_training_reduces_the_loss(short_training):
    _, losses = short_training("changepoint", {"n_obs": 4, "n_steps": 16, "h": 0.05}, checkpoints=0)
    assert len(losses) == 20 and sum(losses[-5:]) < sum(losses[:5])
