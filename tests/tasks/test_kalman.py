"""Kalman tunnel: the filter's predictive against dense conditioning of the joint Gaussian of the
observations, the sampler against the predictive (Monte Carlo), the baselines by hand, the
header layout, bad parameters, the JSON view and a short training run."""

import json
import math

import pytest
import torch
from test_common import ladder
from typer.testing import CliRunner

from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator, make_task
from windtunnel.tasks.kalman import kalman_filter

F64 = torch.float64


def joint_gaussian(A, C, Q, R, P0, K):
    """Covariance of (y_1..y_K) (K, K) and Cov(x_t, y_s) (K, n, K), built directly from the model:
    Cov(x_s, x_t) = A^(t-s) P_s for t >= s, P_{s+1} = A P_s A' + Q, y = (I_K kron C) x + v."""
    n = A.shape[0]
    P = [P0]
    for _ in range(K - 1):
        P.append(A @ P[-1] @ A.T + Q)
    Sx = torch.zeros(K * n, K * n, dtype=F64)
    for s in range(K):
        for t in range(s, K):
            block = torch.linalg.matrix_power(A, t - s) @ P[s]  # Cov(x_t, x_s)
            Sx[t * n:(t + 1) * n, s * n:(s + 1) * n] = block
            Sx[s * n:(s + 1) * n, t * n:(t + 1) * n] = block.T
    H = torch.kron(torch.eye(K, dtype=F64), C[None, :])  # (K, K n)
    Sy = H @ Sx @ H.T + R * torch.eye(K, dtype=F64)
    Sxy = (Sx @ H.T).reshape(K, n, K)  # Cov(x_t, y_s)
    return Sy, Sxy


def condition(Sy, Sxy, y):
    """Predictive mean and variance of y_k given y_<k, and E[x_k | y_<=k], by torch.linalg."""
    K = len(y)
    mean, var, filt = torch.empty(K, dtype=F64), torch.empty(K, dtype=F64), []
    for k in range(K):
        if k == 0:
            mean[k], var[k] = 0.0, Sy[0, 0]
        else:
            w = torch.linalg.solve(Sy[:k, :k], Sy[:k, k])
            mean[k], var[k] = w @ y[:k], Sy[k, k] - w @ Sy[:k, k]
        filt.append(Sxy[k, :, :k + 1] @ torch.linalg.solve(Sy[:k + 1, :k + 1], y[:k + 1]))
    return mean, var, torch.stack(filt)


EDGES = [
    pytest.param({"n": 1, "K": 6}, id="n1"),
    pytest.param({"n": 3, "K": 7, "rho_min": 0.2, "rho_max": 0.99}, id="n3"),
    pytest.param({"n": 5, "K": 5, "q_min": 1.0, "q_max": 2.0}, id="n5-big-Q"),
    pytest.param({"n": 8, "K": 4}, id="n8"),
    pytest.param({"n": 2, "K": 1}, id="K1"),
    pytest.param({"n": 2, "K": 8, "rho_min": 0.0, "rho_max": 1e-3}, id="A-near-0"),
    pytest.param({"n": 2, "K": 8, "rho_min": 0.999, "rho_max": 0.9999}, id="rho-near-1"),
    pytest.param({"n": 3, "K": 8, "r_min": 1e-4, "r_max": 1e-4}, id="tiny-R"),
    pytest.param({"n": 3, "K": 8, "r_min": 50.0, "r_max": 100.0, "q_min": 1e-3, "q_max": 1e-3}, id="huge-R-tiny-Q"),
]


@pytest.mark.parametrize("params", [*EDGES, *ladder("kalman")])
def test_predictive_matches_joint_gaussian_conditioning(params):
    task = make_task("kalman", params)
    b = task.sample(4, make_generator(2))
    L = b.latent
    for i in range(b.size):
        Sy, Sxy = joint_gaussian(L["A"][i], L["C"][i], L["Q"][i], L["R"][i], L["P0"][i], task.config.K)
        mean, var, filt = condition(Sy, Sxy, L["y"][i])
        scale = max(1.0, float(Sy.diagonal().max()))
        assert (b.mean[i] - mean).abs().max() < 1e-10 * scale
        assert (b.var[i] - var).abs().max() < 1e-10 * scale
        assert (L["filter_mean"][i] - filt).abs().max() < 1e-10 * scale
    torch.testing.assert_close(b.entropy, 0.5 * torch.log2(2 * math.pi * math.e * b.var), rtol=0, atol=1e-12)
    torch.testing.assert_close(b.target, L["y"], rtol=0, atol=0)


def test_numpy_and_torch_time_loops_agree(monkeypatch):
    """The time loops run on NumPy views of CPU tensors and on the tensors themselves elsewhere:
    the torch path (forced here on the CPU) gives the same batch."""
    from windtunnel.tasks import kalman

    task = make_task("kalman", {"n": 3, "K": 9})
    a = task.sample(16, make_generator(3))
    monkeypatch.setattr(kalman, "_arrays", lambda *tensors: list(tensors))
    b = task.sample(16, make_generator(3))
    for k in ("x", "y", "filter_mean"):
        torch.testing.assert_close(a.latent[k], b.latent[k], rtol=0, atol=1e-12)
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(a.var, b.var, rtol=0, atol=1e-12)


def test_input_layout_and_scored_positions():
    task = make_task("kalman", {"n": 2, "K": 3})
    b = task.sample(3, make_generator(0))
    L, n = b.latent, 2
    assert task.spec.input_dim == 2 * n + 5 and b.inputs.shape == (3, n + 3 + 3, 2 * n + 5)
    x = b.inputs.double()
    # the model sees exactly the numbers the oracle uses (they are float32 values)
    torch.testing.assert_close(x[:, :n, :n], L["A"], rtol=0, atol=0)
    torch.testing.assert_close(x[:, n, :n], L["C"], rtol=0, atol=0)
    torch.testing.assert_close(x[:, n + 1, :n], torch.diagonal(L["Q"], dim1=1, dim2=2), rtol=0, atol=0)
    torch.testing.assert_close(x[:, n + 2, n], L["R"], rtol=0, atol=0)
    torch.testing.assert_close(x[:, n + 3:, n], L["y"], rtol=0, atol=0)
    flags = x[:, :, n + 1:]
    assert torch.equal(flags.argmax(-1)[0], torch.tensor([0, 1, 2, 3, 4, 5, 5, 5]))
    assert (flags.sum(-1) == 1).all()
    assert (x[:, n + 2, :n] == 0).all() and (x[:, n + 3:, :n] == 0).all() and (x[:, :n + 2, n] == 0).all()
    # the R token predicts y_1, the token y_t predicts y_{t+1}
    assert b.positions.tolist() == [n + 2, n + 3, n + 4] and b.step.tolist() == [1, 2, 3]
    assert task.decode(b, 0)[0].startswith("A[0]=[") and task.decode(b, 0)[-1].startswith("y=")
    assert task.state_labels(b) is None and task.hypothesis_tokens() is None
    assert task.with_length(5).spec.seq_len == n + 3 + 5


def test_haar_orthogonal_is_the_q_of_qr_with_positive_diagonal():
    from windtunnel.tasks.kalman import haar_orthogonal

    G = torch.randn(200, 6, 6, generator=torch.Generator().manual_seed(0), dtype=F64)
    Q, R = torch.linalg.qr(G)
    Q = Q * torch.sign(torch.diagonal(R, dim1=1, dim2=2))[:, None, :]
    torch.testing.assert_close(haar_orthogonal(G), Q, rtol=0, atol=1e-12)
    assert torch.equal(haar_orthogonal(G[:, :1, :1]), torch.sign(G[:, :1, :1]))


def test_parameter_draws():
    task = make_task("kalman", {"n": 3, "K": 4, "rho_min": 0.3, "rho_max": 0.7, "q_min": 0.1, "q_max": 0.2,
                                "r_min": 0.5, "r_max": 2.0})
    b = task.sample(4000, make_generator(1))
    A, C, Q, R = (b.latent[k] for k in ("A", "C", "Q", "R"))
    rho = torch.linalg.eigvals(A).abs()  # every eigenvalue of rho * orthogonal has modulus rho
    assert (rho.max(-1).values - rho.min(-1).values).max() < 1e-5
    assert rho.min() > 0.3 - 1e-6 and rho.max() < 0.7 + 1e-6
    rho = rho[:, 0]
    U = A / rho[:, None, None]
    torch.testing.assert_close(U @ U.transpose(1, 2), torch.eye(3, dtype=F64).expand_as(U), atol=1e-6, rtol=0)
    assert abs((torch.linalg.det(U) > 0).double().mean() - 0.5) < 0.05  # Haar on O(3): both signs
    q = torch.diagonal(Q, dim1=1, dim2=2)
    assert torch.equal(Q, torch.diag_embed(q)) and q.min() >= 0.1 - 1e-7 and q.max() <= 0.2 + 1e-7
    assert R.min() >= 0.5 - 1e-7 and R.max() <= 2.0 + 1e-7
    assert abs(R.log().mean() - (math.log(0.5) + math.log(2.0)) / 2) < 0.03  # log-uniform
    assert abs(C.var() - 1 / 3) < 0.02  # N(0, 1/n) entries
    for k in ("A", "C", "Q", "R", "y"):
        assert torch.equal(b.latent[k], b.latent[k].float().double())  # float32 values, as the model sees them


def test_monte_carlo_pit_is_uniform():
    """The standardised innovations (y_t - mean_t) / sd_t are independent N(0, 1) under the sampler
    (the innovations of a Gaussian sequence are independent), so a KS test over all of them; and
    the true states scatter around the filter mean without bias, orthogonal to it."""
    from scipy import stats

    task = make_task("kalman", {"n": 2, "K": 8})
    b = task.sample(20000, make_generator(1))
    z = ((b.target - b.mean) / b.var.sqrt()).flatten().numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    err = b.latent["x"] - b.latent["filter_mean"]  # (B, K, n)
    cross = torch.einsum("bki,bkj->bkij", err, b.latent["filter_mean"])  # E[(x - x̂) x̂'] = 0
    for v in (err, cross):
        assert (v.mean(0) / (v.std(0) / math.sqrt(b.size))).abs().max() < 5  # z-scores
    # the check has teeth: the filter of -A (a wrong model; A' would not do: with P0 = I and a
    # near-isotropic Q, C A'^k P C' = C A^k P C' and the law of y is nearly the same) fails it
    L = b.latent
    m, v, _ = kalman_filter(-L["A"], L["C"], L["Q"], L["R"], L["y"], L["P0"])
    zw = ((b.target - m) / v.sqrt()).flatten().numpy()
    assert stats.kstest(zw, "norm").pvalue < 1e-6


def test_baselines_by_hand_scalar_case():
    """n = 1: A = a, C = c, Q = q, R = r are numbers; every predictive written out by hand."""
    task = make_task("kalman", {"n": 1, "K": 3})
    b = task.sample(2, make_generator(4))
    base = task.baselines(b)
    assert set(base) == {"bayes", "prior", "no_dynamics", "last_observation"}
    for i in range(b.size):
        a, c, q = b.latent["A"][i, 0, 0].item(), b.latent["C"][i, 0].item(), b.latent["Q"][i, 0, 0].item()
        r = b.latent["R"][i].item()
        y = b.latent["y"][i].tolist()
        P = [1.0, a * a + q, a * a * (a * a + q) + q]  # marginal variances of x_1, x_2, x_3
        # Bayes: scalar Kalman filter
        m, p, bm, bv = 0.0, 1.0, [], []
        for t in range(3):
            bm.append(c * m)
            bv.append(c * c * p + r)
            k = p * c / (c * c * p + r)
            m, p = a * (m + k * (y[t] - c * m)), a * a * (1 - k * c) * p + q
        expect = {
            "bayes": (bm, bv),
            "prior": ([0, 0, 0], [c * c * P[0] + r, c * c * P[1] + r, c * c * P[2] + r]),
            "no_dynamics": ([0, 0, 0], [c * c + r, c * c * q + r, c * c * q + r]),
            "last_observation": ([0, y[0], y[1]], [c * c + r, c * c * ((a - 1) ** 2 * P[0] + q) + 2 * r,
                                                   c * c * ((a - 1) ** 2 * P[1] + q) + 2 * r]),
        }
        for name, (mean, var) in expect.items():
            torch.testing.assert_close(base[name].mean[i], torch.tensor(mean, dtype=F64), rtol=0, atol=1e-12)
            torch.testing.assert_close(base[name].var[i], torch.tensor(var, dtype=F64), rtol=0, atol=1e-12)


def test_last_observation_variance_is_calibrated():
    """Its variance is the marginal variance of y_{t+1} - y_t: the squared errors average to it."""
    task = make_task("kalman", {"n": 2, "K": 6})
    b = task.sample(20000, make_generator(5))
    lo = task.baselines(b)["last_observation"]
    ratio = ((b.target - lo.mean) ** 2 / lo.var).mean(0)
    assert (ratio - 1).abs().max() < 0.05


@pytest.mark.parametrize("params, match", [
    ({"rho_max": 1.2}, r"rho_max' = 1\.2: must be in \(0, 1\) \(a stable A"),
    ({"rho_max": 1.0}, r"rho_max' = 1\.0: must be in \(0, 1\)"),
    ({"rho_min": -0.1}, r"rho_min' = -0\.1: must be in \[0, 1\)"),
    ({"rho_min": 0.9, "rho_max": 0.5}, r"rho_min = 0\.9 > rho_max = 0\.5: rho_min must be <= rho_max"),
    ({"q_min": 2.0, "q_max": 1.0}, r"q_min = 2\.0 > q_max = 1\.0"),
    ({"r_min": 2.0, "r_max": 1.0}, r"r_min = 2\.0 > r_max = 1\.0"),
    ({"n": 0}, r"field 'n' = 0.*1 <= value <= 8"),
    ({"n": 9}, r"field 'n' = 9.*1 <= value <= 8"),
    ({"K": 0}, r"field 'K' = 0"),
    ({"r_min": 0.0}, r"field 'r_min' = 0\.0"),
])
def test_bad_parameters_name_the_field(params, match):
    with pytest.raises(ConfigError, match=match):
        make_task("kalman", params)


def test_sample_json_shows_config_latent_and_predictive():
    from windtunnel.cli import app

    res = CliRunner().invoke(app, ["sample", "kalman", "--preset", "small", "--n", "2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["config"]["n"] == 2 and doc["config"]["K"] == 8 and doc["positions"] == list(range(4, 12))
    for seq in doc["sequences"]:
        lat = {k: torch.tensor(v, dtype=F64)[None] for k, v in seq["latent"].items()}
        assert set(lat) == {"A", "C", "Q", "R", "P0", "x", "y", "filter_mean"}
        mean, var, filt = kalman_filter(lat["A"], lat["C"], lat["Q"], lat["R"], lat["y"], lat["P0"])
        torch.testing.assert_close(mean[0], torch.tensor(seq["posterior_mean"], dtype=F64), rtol=0, atol=1e-12)
        torch.testing.assert_close(var[0], torch.tensor(seq["posterior_var"], dtype=F64), rtol=0, atol=1e-12)
        torch.testing.assert_close(filt[0], lat["filter_mean"][0], rtol=0, atol=1e-12)
        assert seq["target"] == seq["latent"]["y"] and len(seq["tokens"]) == 2 + 3 + 8


def test_short_training_reduces_the_loss(short_training):
    result, losses = short_training("kalman", {"n": 2, "K": 8}, warmup=0)
    assert len(losses) == 20 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    assert set(result.eval["baselines"]["8"]) == {"bayes", "prior", "no_dynamics", "last_observation"}
