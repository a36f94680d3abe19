"""Dirichlet-categorical counting: the predictive against a ratio of marginal likelihoods
(lgamma), Laplace's rule by hand, the sampler against the predictive (Monte Carlo), baselines by
hand, implied_alpha, bad parameters, the JSON view, the quick profile and a short training run."""

import json
import math
from dataclasses import replace
from fractions import Fraction

import pytest
import torch
from test_common import reliability_z
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator, make_task
from windtunnel.tasks.dirichlet import counts_before, implied_alpha, predictive


def log_marginal(seq, n_cat, alpha):
    """log p(x_1..n) under the Dirichlet-multinomial: Gamma(K a) / Gamma(n + K a) prod_k Gamma(n_k + a) / Gamma(a)."""
    counts = [seq.count(k) for k in range(n_cat)]
    return (math.lgamma(n_cat * alpha) - math.lgamma(len(seq) + n_cat * alpha)
            + sum(math.lgamma(c + alpha) - math.lgamma(alpha) for c in counts))


@pytest.mark.parametrize("alpha", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("n_cat", [2, 3, 5])
def test_predictive_is_a_ratio_of_marginal_likelihoods(n_cat, alpha):
    """p(x_{n+1} = k | x_1..n) = ML(x_1..n, k) / ML(x_1..n), read from the tokens alone."""
    task = make_task("dirichlet", {"n_cat": n_cat, "alpha": alpha, "n_draws": 7})
    b = task.sample(12, make_generator(0))
    for i in range(b.size):
        tokens = b.inputs[i].tolist()
        assert tokens[0] == n_cat  # <bos>
        seen = tokens[1:] + [int(b.target[i, -1])]  # every draw: the tokens after <bos>, then the last target
        for t in range(7):
            ctx = seen[:t]
            expect = [math.exp(log_marginal(ctx + [k], n_cat, alpha) - log_marginal(ctx, n_cat, alpha))
                      for k in range(n_cat)]
            torch.testing.assert_close(b.probs[i, t], torch.tensor(expect, dtype=torch.float64), rtol=0, atol=1e-12)
            assert int(b.target[i, t]) == seen[t]


def test_laplace_rule_of_succession_by_hand():
    """n_cat = 2, alpha = 1: p(next = k) = (n_k + 1) / (n + 2)."""
    task = make_task("dirichlet", {"n_cat": 2, "alpha": 1.0, "n_draws": 5})
    probs = task.posterior(torch.tensor([[0, 0, 1, 0, 0]]))[0]
    by_hand = [(Fraction(1, 2), Fraction(1, 2)), (Fraction(2, 3), Fraction(1, 3)), (Fraction(3, 4), Fraction(1, 4)),
               (Fraction(3, 5), Fraction(2, 5)), (Fraction(4, 6), Fraction(2, 6))]
    torch.testing.assert_close(probs, torch.tensor([[float(a), float(b)] for a, b in by_hand], dtype=torch.float64),
                               rtol=0, atol=1e-15)
    laplace = make_task("dirichlet", preset="laplace")
    assert (laplace.config.n_cat, laplace.config.alpha) == (2, 1.0)


def test_layout_tokens_and_hooks():
    task = make_task("dirichlet", {"n_cat": 5, "n_draws": 6})
    b = task.sample(16, make_generator(1))
    spec = task.spec
    assert b.inputs.shape == (16, 6) and b.positions.tolist() == list(range(6)) and b.step.tolist() == list(range(1, 7))
    assert (b.inputs[:, 0] == 5).all() and torch.equal(b.inputs[:, 1:], b.latent["draws"][:, :-1])
    assert torch.equal(b.target, b.latent["draws"]) and b.latent["p"].shape == (16, 5)
    assert (spec.vocab_size, spec.pad_id, spec.answer_token_ids, spec.answer_size) == (7, 6, (0, 1, 2, 3, 4), 5)
    assert task.token_names() == ["c0", "c1", "c2", "c3", "c4", "<bos>", "<pad>"] and task.decode(b, 0)[0] == "<bos>"
    assert task.hypothesis_tokens()[0] == [0, 1, 2, 3, 4] and task.value_tokens() is None
    labels, k, _ = task.state_labels(b)
    assert k == 5 and torch.equal(labels, b.probs.argmax(-1))  # most frequent so far = argmax of the predictive
    assert task.with_length(20).sample(2, make_generator(0)).inputs.shape == (2, 20)
    assert math.isinf(task.hypothesis_space().log10_size)


def test_dirichlet_draws_have_the_right_moments_and_no_nan_at_tiny_alpha():
    for alpha in (0.3, 4.0):
        p = make_task("dirichlet", {"n_cat": 4, "alpha": alpha}).sample_p(40000, make_generator(3))
        var = 3 / (16 * (4 * alpha + 1))  # Var p_k = (K - 1) / (K^2 (K alpha + 1))
        assert (p.mean(0) - 0.25).abs().max() < 5 * math.sqrt(var / 40000)
        assert abs(p.var(0).mean().item() / var - 1) < 0.03
    b = make_task("dirichlet", {"alpha": 1e-4}).sample(4096, make_generator(0))
    assert torch.isfinite(b.latent["p"]).all() and torch.isfinite(b.probs).all()
    torch.testing.assert_close(b.latent["p"].sum(-1), torch.ones(4096, dtype=torch.float64))


@pytest.mark.parametrize("alpha", [0.1, 1.0, 10.0])
def test_monte_carlo_sampler_agrees_with_predictive_and_catches_a_wrong_alpha(alpha):
    task = make_task("dirichlet", {"n_cat": 4, "alpha": alpha, "n_draws": 16})
    b = task.sample(20000, make_generator(1))
    assert reliability_z(b.probs, b.target) < 5
    wrong = predictive(counts_before(b.latent["draws"], 4), alpha / 3)  # overconfident in the counts
    assert reliability_z(wrong, b.target) > 5


def test_baselines_by_hand():
    task = make_task("dirichlet", {"n_cat": 3, "n_draws": 4})
    draws = torch.tensor([[2, 2, 0, 1]])
    b = task.sample(1, make_generator(0))
    b = replace(b, target=draws, probs=task.posterior(draws), latent={**b.latent, "draws": draws})
    base = task.baselines(b)
    third = 1 / 3
    plugin = [[third, third, third], [0, 0, 1], [0, 0, 1], [third, 0, 2 * third]]
    torch.testing.assert_close(base["plugin"].probs[0], torch.tensor(plugin, dtype=torch.float64))
    torch.testing.assert_close(base["uniform"].probs[0], torch.full((4, 3), third, dtype=torch.float64))
    assert set(base) == {"bayes", "uniform", "plugin"}


@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.0, 3.0, 50.0])
def test_implied_alpha_recovers_the_prior(alpha):
    task = make_task("dirichlet", {"n_cat": 6, "alpha": alpha, "n_draws": 24})
    b = task.sample(512, make_generator(2))
    counts = counts_before(b.latent["draws"], 6)
    assert abs(implied_alpha(b.probs, counts, 6) - alpha) < 1e-8 * max(1.0, alpha)
    assert abs(implied_alpha(b.probs, counts, 6, method="closed_form") - alpha) < 1e-8 * max(1.0, alpha)
    for other in (0.2, 2.0, 20.0):  # a predictive built with another alpha on the same counts
        q = predictive(counts, other)
        assert abs(implied_alpha(q, counts, 6) - other) < 1e-8 * other
        assert abs(implied_alpha(q, counts, 6, method="closed_form") - other) < 1e-8 * other


def test_implied_alpha_limits_noise_and_bad_input():
    task = make_task("dirichlet", {"n_cat": 4, "alpha": 2.0})
    b = task.sample(256, make_generator(4))
    counts = counts_before(b.latent["draws"], 4)
    base = task.baselines(b)
    assert implied_alpha(base["plugin"].probs, counts, 4) == 0.0  # the empirical frequencies: no prior
    assert implied_alpha(base["uniform"].probs, counts, 4) == math.inf  # ignores the counts
    # a noisy predictive (a model's, roughly) still reads close to the truth
    g = make_generator(5)
    noisy = b.probs * torch.exp(0.05 * torch.randn(b.probs.shape, generator=g, dtype=torch.float64))
    noisy = noisy / noisy.sum(-1, keepdim=True)
    assert abs(implied_alpha(noisy, counts, 4) / 2.0 - 1) < 0.1
    first = counts[:, :1]  # n = 0 only: every alpha predicts uniform
    assert math.isnan(implied_alpha(b.probs[:, :1], first, 4))
    with pytest.raises(ValueError, match="n_cat"):
        implied_alpha(b.probs, counts, 5)
    with pytest.raises(ValueError, match="method"):
        implied_alpha(b.probs, counts, 4, method="nope")


@pytest.mark.parametrize("field,value,allowed", [
    ("alpha", 0, "0 < value"), ("alpha", -1.5, "0 < value"), ("alpha", 1e6, "value <= 1000"),
    ("n_cat", 1, "2 <= value"), ("n_draws", 0, "1 <= value"),
])
def test_bad_parameters_name_the_field(field, value, allowed):
    with pytest.raises(ConfigError, match=rf"'{field}'[\s\S]*{allowed}"):
        make_task("dirichlet", {field: value})
    from windtunnel.train.config import resolve_run

    with pytest.raises(ConfigError, match=f"task_params.{field}"):
        resolve_run("dirichlet", "transformer", "quick", {f"task_params.{field}": value})


def test_sample_json_shows_config_latent_observations_and_predictive():
    res = CliRunner().invoke(app, ["sample", "dirichlet", "--preset", "small", "--n", "2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["config"] == {"n_cat": 4, "alpha": 1.0, "n_draws": 16}
    assert doc["answers"] == ["c0", "c1", "c2", "c3"] and doc["positions"] == list(range(16))
    seq = doc["sequences"][0]
    assert len(seq["latent"]["p"]) == 4 and abs(sum(seq["latent"]["p"]) - 1) < 1e-12
    assert seq["latent"]["draws"] == seq["target"] and seq["inputs"][1:] == seq["target"][:-1]
    assert len(seq["posterior"]) == 16 and all(len(row) == 4 for row in seq["posterior"])
    counts = [0] * 4
    for t, row in enumerate(seq["posterior"]):  # recomputed from the printed draws
        assert max(abs(row[k] - (counts[k] + 1) / (t + 4)) for k in range(4)) < 1e-12
        counts[seq["target"][t]] += 1


@pytest.mark.parametrize("model", ["transformer", "mamba", "lstm", "mlp", "gru", "linear_attention", "deltanet",
                                   "swa_transformer", "hybrid"])
def test_quick_profile_builds_for_every_model(model):
    from windtunnel.train.config import load_profile, resolve_run
    from windtunnel.train.trainer import build

    prof = load_profile("quick", "dirichlet")
    assert {"n_cat": prof["task_params"]["n_cat"]} in prof["rungs"]
    task, net = build(resolve_run("dirichlet", model, "quick"))
    b = task.sample(2, make_generator(0))
    assert net(b.inputs, positions=b.positions).shape == (2, 32, 8)


def test_short_training_reduces_the_loss(short_training):
    res, losses = short_training("dirichlet", {"n_cat": 4, "alpha": 0.2, "n_draws": 12})
    assert len(losses) == 20 and sum(losses[-5:]) < sum(losses[:5])
    assert res.eval["baselines"]["12"]["plugin"]["kl_bayes_model"] > 0
