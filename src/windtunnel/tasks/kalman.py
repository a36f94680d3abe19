"""Kalman filtering in context (continuous transport): a fresh linear-Gaussian state-space model
per sequence, shown in a header, then its observations. The essay (draws, baselines, the choices
that are ours, the references) is in docs/tasks.md, "kalman"; the contract:

- x_1 ~ N(0, I_n), x_{t+1} = A x_t + w_t (w ~ N(0, Q)), scalar y_t = C x_t + v_t (v ~ N(0, R)),
  t = 1..K, all in float64; A, C, Q, R and y rounded to float32 first (the model's precision).
- Inputs: vectors of width 2n + 5 (payload channels 0..n, then one-hot type flags "row i of A",
  C, diag(Q), R, y); the sequence ``A[0] .. A[n-1], C, Q, R, y_1 .. y_K`` (length n + 3 + K).
- Scored: K positions. R predicts y_1 with the prior predictive; y_t predicts y_{t+1} with the
  Kalman filter's predictive N(C A x̂_{t|t}, C (A P_{t|t} A' + Q) C' + R) (:func:`kalman_filter`).
- Latent: ``A``, ``C``, ``Q``, ``R``, ``P0``, the states ``x``, the observations ``y`` and the
  filtered means ``filter_mean`` (B, K, n) that :mod:`windtunnel.geometry.filter_probe` reads.
- Baselines: ``prior``, ``no_dynamics`` (the filter with A = 0) and ``last_observation``.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field, field_validator, model_validator

from windtunnel.infotheory import gaussian_entropy_bits
from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class KalmanConfig(TaskConfig):
    n: int = Field(2, ge=1, le=8, description="dimension of the latent state x_t")
    K: int = Field(20, ge=1, le=4096, description="number of observations y_1..y_K per sequence")
    rho_min: float = Field(0.7, ge=0, lt=1, description="smallest spectral radius of A (A = rho * orthogonal)")
    rho_max: float = Field(0.99, gt=0, lt=1, description="largest spectral radius of A; below 1 (a stable A)")
    q_min: float = Field(0.05, gt=0, le=100, description="smallest diagonal entry of Q (log-uniform draw)")
    q_max: float = Field(0.5, gt=0, le=100, description="largest diagonal entry of Q")
    r_min: float = Field(0.01, gt=0, le=100, description="smallest observation noise variance R (log-uniform draw)")
    r_max: float = Field(0.5, gt=0, le=100, description="largest observation noise variance R")

    length_field = "K"
    presets = {"small": {"n": 2, "K": 8}}

    @field_validator("rho_min", "rho_max", mode="before")
    @classmethod
    def _stable(cls, v, info):
        lo = "[0, 1)" if info.field_name == "rho_min" else "(0, 1)"
        if _number(v) and not (0 <= v < 1 if info.field_name == "rho_min" else 0 < v < 1):
            raise ValueError(f"must be in {lo} (a stable A: A = rho * orthogonal has spectral radius rho, "
                             "which must be below 1)")
        return v

    @model_validator(mode="after")
    def _ordered(self):
        for lo, hi in (("rho_min", "rho_max"), ("q_min", "q_max"), ("r_min", "r_max")):
            if getattr(self, lo) > getattr(self, hi):
                raise ValueError(f"{lo} = {getattr(self, lo)} > {hi} = {getattr(self, hi)}: "
                                 f"{lo} must be <= {hi}")
        return self


@register_task
class KalmanTask(Task):
    name = "kalman"
    Config = KalmanConfig
    description = "predict the next observation of a fresh linear-Gaussian state-space model shown in the header"
    baseline_names = ("prior", "no_dynamics", "last_observation")

    @property
    def header_len(self) -> int:
        return self.config.n + 3

    @property
    def spec(self) -> TaskSpec:
        c = self.config
        return TaskSpec(
            name=self.name,
            input_kind="vectors",
            seq_len=self.header_len + c.K,
            n_scored=c.K,
            answer_size=1,
            output_kind="gaussian",
            loss="gaussian_nll",
            input_dim=2 * c.n + 5,
        )

    def hypothesis_space(self) -> HypothesisSpace:
        n = self.config.n
        return HypothesisSpace(math.inf, f"(A, C, Q, R) with A = rho * orthogonal {n}x{n}, a fresh draw per sequence")

    # --- the generative model ----------------------------------------------------------
    def sample_parameters(self, n_seq: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """A, C, Q (diagonal, as a matrix), R and P0 of ``n_seq`` sequences, float64, rounded to float32."""
        c = self.config
        dev, f64 = generator.device, torch.float64
        n = c.n

        def uniform(lo: float, hi: float, *shape: int) -> torch.Tensor:
            return lo + (hi - lo) * torch.rand(shape, generator=generator, device=dev, dtype=f64)

        U = haar_orthogonal(torch.randn(n_seq, n, n, generator=generator, device=dev, dtype=f64))
        A = uniform(c.rho_min, c.rho_max, n_seq)[:, None, None] * U
        C = torch.randn(n_seq, n, generator=generator, device=dev, dtype=f64) / math.sqrt(n)
        q = torch.exp(uniform(math.log(c.q_min), math.log(c.q_max), n_seq, n))
        R = torch.exp(uniform(math.log(c.r_min), math.log(c.r_max), n_seq))
        as_seen = lambda t: t.float().double()  # noqa: E731  (the model's inputs are float32)
        eye = torch.eye(n, dtype=f64, device=dev)
        return {"A": as_seen(A), "C": as_seen(C), "Q": torch.diag_embed(as_seen(q)), "R": as_seen(R),
                "P0": eye.expand(n_seq, n, n).clone()}

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        B, d, K = n, c.n, c.K  # sequences, state dimension, observations
        dev, f64 = generator.device, torch.float64
        p = self.sample_parameters(B, generator)
        A, C, Q, R = p["A"], p["C"], p["Q"], p["R"]
        zx = torch.randn(B, K, d, generator=generator, device=dev, dtype=f64)
        zy = torch.randn(B, K, generator=generator, device=dev, dtype=f64)
        # x_1 = P0^(1/2) z = z (P0 = I); then x_{t+1} = A x_t + Q^(1/2) z, as rows: x_{t+1}' = x_t' A' + w_t'
        noise = zx * torch.diagonal(Q, dim1=-2, dim2=-1).sqrt()[:, None, :]
        x = noise.clone()  # (B, K, d)
        x[:, 0] = zx[:, 0]
        x_, At = _arrays(x, A.transpose(1, 2).contiguous())
        for t in range(1, K):
            x_[:, t:t + 1] += x_[:, t - 1:t] @ At
        y = ((x * C[:, None, :]).sum(-1) + R.sqrt()[:, None] * zy).float().double()  # as the model sees it
        mean, var, filt = kalman_filter(A, C, Q, R, y, p["P0"])

        H = self.header_len
        inputs = torch.zeros(B, H + K, 2 * d + 5, dtype=f64, device=dev)
        rows = torch.arange(d, device=dev)
        inputs[:, :d, :d] = A  # row i of A, flag "row i"
        inputs[:, rows, d + 1 + rows] = 1.0
        inputs[:, d, :d] = C
        inputs[:, d, 2 * d + 1] = 1.0
        inputs[:, d + 1, :d] = torch.diagonal(Q, dim1=-2, dim2=-1)
        inputs[:, d + 1, 2 * d + 2] = 1.0
        inputs[:, d + 2, d] = R
        inputs[:, d + 2, 2 * d + 3] = 1.0
        inputs[:, H:, d] = y
        inputs[:, H:, 2 * d + 4] = 1.0
        return Batch(
            inputs=inputs.float(),
            positions=H - 1 + torch.arange(K, device=dev),  # the R token, then y_1 .. y_{K-1}
            step=torch.arange(1, K + 1, device=dev),
            target=y,
            mean=mean,
            var=var,
            entropy=gaussian_entropy_bits(var),
            latent={**p, "x": x, "y": y, "filter_mean": filt},
        )

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        L = batch.latent
        A, C, Q, R, P0, y = L["A"], L["C"], L["Q"], L["R"], L["P0"], L["y"]
        P = prior_covariances(A, Q, P0, y.shape[1])  # (B, K, n, n): the marginal covariance of x_t
        prior_var = torch.einsum("bi,btij,bj->bt", C, P, C) + R[:, None]
        zeros = torch.zeros_like(prior_var)
        nd_mean, nd_var, _ = kalman_filter(torch.zeros_like(A), C, Q, R, y, P0)
        eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        D = A - eye
        step_cov = D[:, None] @ P[:, :-1] @ D.transpose(1, 2)[:, None] + Q[:, None]  # Cov(x_{t+1} - x_t)
        lo_var = prior_var.clone()
        lo_var[:, 1:] = torch.einsum("bi,btij,bj->bt", C, step_cov, C) + 2 * R[:, None]
        lo_mean = zeros.clone()
        lo_mean[:, 1:] = y[:, :-1]
        return {
            "prior": Prediction(mean=zeros, var=prior_var),
            "no_dynamics": Prediction(mean=nd_mean, var=nd_var),
            "last_observation": Prediction(mean=lo_mean, var=lo_var),
        }

    # --- presentation -------------------------------------------------------------------
    def decode(self, batch: Batch, i: int) -> list[str]:
        n = self.config.n
        vec = lambda v: "[" + ", ".join(f"{a:+.3f}" for a in v[:n]) + "]"  # noqa: E731
        out = []
        for t, v in enumerate(batch.inputs[i].tolist()):
            if t < n:
                out.append(f"A[{t}]={vec(v)}")
            elif t == n:
                out.append(f"C={vec(v)}")
            elif t == n + 1:
                out.append(f"Q=diag{vec(v)}")
            elif t == n + 2:
                out.append(f"R={v[n]:.3f}")
            else:
                out.append(f"y={v[n]:+.3f}")
        return out

    def answer_names(self) -> list[str]:
        return ["y"]


def haar_orthogonal(G: torch.Tensor) -> torch.Tensor:
    """Haar-random orthogonal matrices from Gaussian ones G (B, n, n): the Q of G = QR with a
    positive diagonal in R, by Gram-Schmidt on the columns (each orthogonalised twice against the
    earlier ones, which makes it orthogonal to rounding in float64). The same matrices as
    ``torch.linalg.qr`` with the signs fixed, without its batched LAPACK call, whose threads stall
    for milliseconds when the cores are busy (a training run's)."""
    U = torch.empty_like(G)
    for j in range(G.shape[-1]):
        v = G[:, :, j:j + 1]
        for _ in range(2 if j else 0):
            prev = U[:, :, :j]
            v = v - prev @ (prev.transpose(1, 2) @ v)
        U[:, :, j:j + 1] = v / v.norm(dim=1, keepdim=True)
    return U


def prior_covariances(A: torch.Tensor, Q: torch.Tensor, P0: torch.Tensor, K: int) -> torch.Tensor:
    """The marginal (observation-free) covariances P_t of x_t, t = 1..K: P_1 = P0,
    P_{t+1} = A P_t A' + Q. A, Q, P0 (B, n, n) float64; returns (B, K, n, n)."""
    out = torch.empty(A.shape[0], K, *A.shape[1:], dtype=A.dtype, device=A.device)
    P, At = P0, A.transpose(1, 2)
    for t in range(K):
        out[:, t] = P
        P = torch.baddbmm(Q, A @ P, At)
    return out


def _arrays(*tensors: torch.Tensor) -> list:
    """NumPy views of CPU tensors (writes go through to the tensors), the tensors themselves on other
    devices. The time loops below are written once for both (only ``@``, slicing, ``swapaxes`` and
    arithmetic): on the CPU NumPy's per-call overhead on small batched matrices is about a third of
    torch's, and these loops are a handful of tiny products per time step."""
    return [t.numpy() for t in tensors] if tensors[0].device.type == "cpu" else list(tensors)


def kalman_filter(A: torch.Tensor, C: torch.Tensor, Q: torch.Tensor, R: torch.Tensor, y: torch.Tensor,
                  P0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Kalman filter of a batch of scalar-observation state-space models, in float64.

    A (B, n, n), C (B, n), Q (B, n, n), R (B,), y (B, K), P0 (B, n, n) (default I); x_1 ~ N(0, P0).
    Returns the one-step predictive mean and variance of y_t given y_1..y_{t-1} (B, K) (t = 1: the
    prior predictive N(0, C P0 C' + R)) and the filtered means x̂_{t|t} (B, K, n).

    Covariance form, vectorised over the batch, a loop over the K steps: with the predicted mean
    m and covariance P of x_t, the predictive of y_t is N(C m, S), S = C P C' + R; the gain
    k = P C' / S; x̂_{t|t} = m + k (y_t - C m), P_{t|t} = P - k C P; then m = A x̂_{t|t},
    P = A P_{t|t} A' + Q. Mean and covariance travel together as W = [P | m] (n x (n+1)), so that
    a step is a few small batched products (the sampler's cost is this loop's call count):
    C W = [C P, C m]; W -= k [C P, C m - y_t]; W = A W diag(A', 1) + [Q | 0].
    """
    B, K = y.shape
    n = A.shape[-1]
    dev, f64 = y.device, torch.float64
    if P0 is None:
        P0 = torch.eye(n, dtype=f64, device=dev).expand(B, n, n)
    W = torch.cat([P0.to(f64), torch.zeros(B, n, 1, dtype=f64, device=dev)], dim=2)  # [P | m]
    Qa = torch.cat([Q, torch.zeros(B, n, 1, dtype=f64, device=dev)], dim=2)  # [Q | 0]
    Aa = torch.zeros(B, n + 1, n + 1, dtype=f64, device=dev)  # diag(A', 1)
    Aa[:, :n, :n] = A.transpose(1, 2)
    Aa[:, n, n] = 1.0
    ey = torch.zeros(B, K, 1, n + 1, dtype=f64, device=dev)  # [0, y_t]
    ey[:, :, 0, n] = y
    mean = torch.empty(B, K, dtype=f64, device=dev)
    var = torch.empty(B, K, dtype=f64, device=dev)
    filt = torch.empty(B, K, n, dtype=f64, device=dev)
    W, A_, Aa, Qa, ey, ct, c, R3, mean_, var_, filt_ = _arrays(
        W, A.contiguous(), Aa, Qa, ey, C[:, None, :].contiguous(), C[:, :, None].contiguous(),
        R[:, None, None].contiguous(), mean, var, filt)
    for t in range(K):
        r = ct @ W  # [C P, C m]
        S = r[:, :, :n] @ c + R3  # C P C' + R
        mean_[:, t] = r[:, 0, n]
        var_[:, t] = S[:, 0, 0]
        W = W - (r[:, :, :n].swapaxes(1, 2) / S) @ (r - ey[:, t])  # update: [P_{t|t} | x̂_{t|t}]
        filt_[:, t] = W[:, :, n]
        if t + 1 < K:
            W = (A_ @ W) @ Aa + Qa  # predict
    return mean, var, filt
