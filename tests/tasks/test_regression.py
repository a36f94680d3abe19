"""Regression posterior predictive against direct conditioning of the joint Gaussian."""

import math

import numpy as np
import pytest
import torch
from test_common import ladder

from windtunnel.tasks import make_generator, make_task


@pytest.mark.parametrize("params", [pytest.param({"d": 3, "n_points": 6, "tau": 0.7, "sigma": 0.3}, id="d3-n6"),
                                    pytest.param({"d": 4, "n_points": 5, "d_active": 2}, id="d4-active2"),
                                    *ladder("regression")])
def test_predictive_matches_joint_gaussian_conditioning(params):
    task = make_task("regression", params)
    b = task.sample(5, make_generator(2))
    tau2, s2 = task.config.tau**2, task.config.sigma**2
    for i in range(b.size):
        X, y = b.latent["x"][i].numpy(), b.latent["y"][i].numpy()
        # y = X w + eps is jointly Gaussian: Cov = tau^2 X X' + sigma^2 I
        C = tau2 * X @ X.T + s2 * np.eye(len(y))
        for k in range(len(y)):
            if k == 0:
                m, v = 0.0, C[0, 0]
            else:
                A, c = C[:k, :k], C[k, :k]
                m = c @ np.linalg.solve(A, y[:k])
                v = C[k, k] - c @ np.linalg.solve(A, c)
            assert abs(b.mean[i, k].item() - m) < 1e-10
            assert abs(b.var[i, k].item() - v) < 1e-10
            assert abs(b.entropy[i, k].item() - 0.5 * math.log2(2 * math.pi * math.e * v)) < 1e-10


def test_input_layout():
    task = make_task("regression", {"d": 2, "n_points": 3})
    b = task.sample(2, make_generator(0))
    assert b.inputs.shape == (2, 6, 4) and task.spec.input_dim == 4
    torch.testing.assert_close(b.inputs[:, 0::2, :2], b.latent["x"].float())
    torch.testing.assert_close(b.inputs[:, 1::2, 2], b.latent["y"].float())
    assert (b.inputs[:, 1::2, 3] == 1).all() and (b.inputs[:, 0::2, 2:] == 0).all()


def test_d_active_is_the_smaller_problem_in_the_larger_format():
    from windtunnel.config import ConfigError
    from windtunnel.tasks.regression import posterior_predictive

    task = make_task("regression", {"d": 5, "n_points": 6, "d_active": 2, "tau": 0.8, "sigma": 0.4})
    b = task.sample(4, make_generator(3))
    x = b.latent["x"]
    assert (x[:, :, 2:] == 0).all() and (x[:, :, :2] != 0).all() and (b.inputs[:, 0::2, 2:5] == 0).all()
    mean, var = posterior_predictive(x[:, :, :2].contiguous(), b.latent["y"], 0.8, 0.4)  # the 2-dimensional problem
    torch.testing.assert_close(b.mean, mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(b.var, var, rtol=0, atol=1e-12)
    full = make_task("regression", {"d": 5, "n_points": 6, "tau": 0.8, "sigma": 0.4}).sample(4, make_generator(3))
    torch.testing.assert_close(full.latent["x"][:, :, :2], x[:, :, :2])  # the same draws, the rest zeroed
    assert make_task("regression", {"d": 5, "d_active": 5}).spec == make_task("regression", {"d": 5}).spec
    with pytest.raises(ConfigError, match="d_active = 6 exceeds d = 5"):
        make_task("regression", {"d": 5, "d_active": 6})
