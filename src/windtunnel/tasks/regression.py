"""In-context Bayesian linear regression (a conjugate Gaussian wind tunnel).

Every sequence has its own weights w ~ N(0, tau^2 I_d); inputs x_i ~ N(0, I_d) and
y_i = w.x_i + eps_i with eps_i ~ N(0, sigma^2). The sequence interleaves x-tokens and
y-tokens as real vectors of dimension d + 2: ``[x, 0, 0]`` and ``[0, ..., 0, y, 1]`` (the last
channel flags a y-token). At each x-token the model predicts y_i from the earlier pairs; the
exact posterior predictive after k - 1 examples is N(mu.x, sigma^2 + x' Sigma x) with
Sigma = (I / tau^2 + X'X / sigma^2)^-1 and mu = Sigma X'y / sigma^2. The reference is its
differential entropy in bits, and the Gaussian KL to it.

``d_active`` < d zeroes the inputs' last d - d_active coordinates: the d_active-dimensional
problem in the same d-dimensional format (the weights' other coordinates are never observed, so
the same posterior formula is exact for it), which is what a curriculum over the dimension grows
(``train.curriculum``; Garg et al. 2022).

Not among the tasks Paper I confirms (only one secondary summary lists a regression wind tunnel);
this is the standard conjugate design.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field, model_validator

from windtunnel.infotheory import gaussian_entropy_bits
from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task


class RegressionConfig(TaskConfig):
    d: int = Field(8, ge=1, le=256, description="input dimension")
    n_points: int = Field(16, ge=1, le=1024, description="number of (x, y) examples per sequence (default 2d)")
    tau: float = Field(1.0, gt=0, le=100, description="prior standard deviation of each weight")
    sigma: float = Field(0.5, gt=0, le=100, description="observation noise standard deviation")
    d_active: int | None = Field(
        None, ge=1, le=256, description="inputs nonzero in their first d_active coordinates only, the rest 0 (None: all "
        "d): the d_active-dimensional problem in the d-dimensional format, what a curriculum over d grows (Garg et al.)")

    length_field = "n_points"

    @model_validator(mode="after")
    def _check_active(self):
        if self.d_active is not None and self.d_active > self.d:
            raise ValueError(f"d_active = {self.d_active} exceeds d = {self.d}: choose 1 .. d (or null for all d)")
        return self
    presets = {"small": {"d": 4, "n_points": 8}}


@register_task
class RegressionTask(Task):
    name = "regression"
    Config = RegressionConfig
    description = "predict y for a new x from noisy (x, y) pairs of a fresh Gaussian linear model"
    baseline_names = ("prior", "plugin_mean")

    @property
    def spec(self) -> TaskSpec:
        c = self.config
        return TaskSpec(
            name=self.name,
            input_kind="vectors",
            seq_len=2 * c.n_points,
            n_scored=c.n_points,
            answer_size=1,
            output_kind="gaussian",
            loss="gaussian_nll",
            input_dim=c.d + 2,
        )

    def hypothesis_space(self) -> HypothesisSpace:
        return HypothesisSpace(math.inf, f"w in R^{self.config.d}, a fresh draw per sequence")

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        dev = generator.device
        w = c.tau * torch.randn(n, c.d, generator=generator, device=dev, dtype=torch.float64)
        x = torch.randn(n, c.n_points, c.d, generator=generator, device=dev, dtype=torch.float64)
        if c.d_active is not None:
            x[:, :, c.d_active:] = 0.0  # the same draws; the posterior below is then the d_active-dim one
        noise = c.sigma * torch.randn(n, c.n_points, generator=generator, device=dev, dtype=torch.float64)
        y = torch.einsum("npd,nd->np", x, w) + noise
        mean, var = posterior_predictive(x, y, c.tau, c.sigma)

        inputs = torch.zeros(n, 2 * c.n_points, c.d + 2, dtype=torch.float64, device=dev)
        inputs[:, 0::2, : c.d] = x
        inputs[:, 1::2, c.d] = y
        inputs[:, 1::2, c.d + 1] = 1.0
        return Batch(
            inputs=inputs.float(),
            positions=torch.arange(0, 2 * c.n_points, 2, device=dev),
            step=torch.arange(1, c.n_points + 1, device=dev),
            target=y,
            mean=mean,
            var=var,
            entropy=gaussian_entropy_bits(var),
            latent={"weights": w, "x": x, "y": y},
        )

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        c = self.config
        x = batch.latent["x"]
        prior_var = c.sigma**2 + c.tau**2 * (x * x).sum(-1)
        return {
            # context-blind: the prior predictive N(0, sigma^2 + tau^2 |x|^2)
            "prior": Prediction(mean=torch.zeros_like(prior_var), var=prior_var),
            # the posterior mean with only the noise variance (ignores parameter uncertainty)
            "plugin_mean": Prediction(mean=batch.mean, var=torch.full_like(batch.var, c.sigma**2)),
        }

    def decode(self, batch: Batch, i: int) -> list[str]:
        c = self.config
        out = []
        for t, vec in enumerate(batch.inputs[i].tolist()):
            if t % 2 == 0:
                out.append("x=[" + ", ".join(f"{v:+.2f}" for v in vec[: c.d]) + "]")
            else:
                out.append(f"y={vec[c.d]:+.3f}")
        return out

    def answer_names(self) -> list[str]:
        return ["y"]


def posterior_predictive(x: torch.Tensor, y: torch.Tensor, tau: float, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Posterior predictive mean and variance of y_k given (x_j, y_j) for j < k, for every k.

    x (n, N, d), y (n, N) float64. Returns mean, var of shape (n, N). Rank-one (Kalman)
    updates of the weight posterior, vectorised over the batch, a loop over the N examples.
    """
    n, N, d = x.shape
    Sigma = (tau**2) * torch.eye(d, dtype=torch.float64, device=x.device).expand(n, d, d).clone()
    mu = torch.zeros(n, d, dtype=torch.float64, device=x.device)
    mean = torch.empty(n, N, dtype=torch.float64, device=x.device)
    var = torch.empty_like(mean)
    for k in range(N):
        xk = x[:, k]
        Sx = torch.einsum("nij,nj->ni", Sigma, xk)
        s = sigma**2 + (xk * Sx).sum(-1)  # predictive variance
        mean[:, k] = (mu * xk).sum(-1)
        var[:, k] = s
        gain = Sx / s[:, None]
        mu = mu + gain * (y[:, k] - mean[:, k])[:, None]
        Sigma = Sigma - gain[:, :, None] * Sx[:, None, :]
    return mean, var
