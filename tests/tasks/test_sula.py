"""SULA posterior against Bayes' rule by enumeration of the two classes."""

import math

import pytest
import torch

from windtunnel.tasks import make_generator, make_task


def bayes_rule(labels, alpha):
    lik = [math.prod(alpha if label == y else 1 - alpha for label in labels) for y in (0, 1)]
    return [x / sum(lik) for x in lik]


@pytest.mark.parametrize("alpha", [0.9, 0.7])
def test_posterior_matches_bayes_rule(alpha):
    task = make_task("sula", {"k": 6, "alpha": alpha})
    b = task.sample(30, make_generator(0))
    for i in range(b.size):
        labels = b.latent["labels"][i].tolist()
        for j in range(7):
            torch.testing.assert_close(b.probs[i, j], torch.tensor(bayes_rule(labels[:j], alpha), dtype=torch.float64))


def test_expected_entropy_by_k_matches_spec():
    # the closed-form SULA posterior (Paper III): E[H_Bayes] for alpha = 0.9 at k = 0, 1, 2, 4, 8
    b = make_task("sula").sample(200000, make_generator(0))
    mean_h = b.entropy.mean(0)
    for k, expect in [(0, 1.0), (1, 0.469), (2, 0.258), (4, 0.078), (8, 0.008)]:
        assert abs(mean_h[k].item() - expect) < 0.004


def test_layout():
    task = make_task("sula", {"k": 3})
    b = task.sample(4, make_generator(1))
    assert b.inputs.shape == (4, 7) and b.positions.tolist() == [0, 2, 4, 6]
    assert torch.equal(b.inputs[:, 1::2] - 70, b.latent["labels"])
    assert (b.target == b.latent["class"][:, None]).all()
