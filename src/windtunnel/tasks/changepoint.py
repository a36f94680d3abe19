"""Bayesian online change-point detection (belief revision; Adams & MacKay 2007).

Every sequence is a stream of ``n_steps`` categorical observations over ``n_obs`` symbols. The
generating distribution p ~ Dirichlet(alpha, ..., alpha) is drawn at t = 1, and before each
step t >= 2 a change-point happens independently with probability ``h`` (constant hazard): then
p is redrawn from the same prior, otherwise it stays. No change is drawn before x_1.

Tokens: the symbols are ids 0..n_obs-1 (the answers), a start token ``<s>`` = n_obs and a
padding id n_obs + 1 that never occurs. The sequence is ``<s> x_1 ... x_{T-1}`` (T = n_steps):
every position is scored, with the next observation as the target.

The exact predictive is the run-length recursion of Adams & MacKay with the Dirichlet-categorical
predictive (:func:`run_length_filter`; float64, renormalised at every step): after x_1..x_j,
p(x_{j+1} = k) = sum_r pi_j(r) (c_k(r) + alpha) / (r + n_obs alpha), with
pi_j(r) = (1 - h) w_j(r) + h [r = 0], w_j the run-length posterior and c_k(r) the count of k
among the last r observations. h = 0 is the ``never_forgets`` baseline; h = 1 makes the
predictive uniform. The recursion in full, the latents, baselines and state labels:
docs/tasks.md, "changepoint".
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from windtunnel.infotheory import entropy_bits
from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task, uniform_probs
from windtunnel.tasks.sampling import categorical, dirichlet, flat_dirichlet
from windtunnel.tasks.streams import counts_before, predictive, stream_inputs, stream_spec


class ChangepointConfig(TaskConfig):
    n_obs: int = Field(4, ge=2, le=64, description="number of observation symbols")
    n_steps: int = Field(32, ge=1, le=1024, description="observations per sequence (= scored positions)")
    h: float = Field(0.05, ge=0, le=1, description="hazard: probability of a change-point before each step t >= 2")
    alpha: float = Field(1.0, gt=0, le=1000, description="Dirichlet concentration of each segment's distribution")

    length_field = "n_steps"
    presets = {"small": {"n_obs": 3, "n_steps": 8, "h": 0.2}}


@register_task
class ChangepointTask(Task):
    name = "changepoint"
    Config = ChangepointConfig
    description = "predict the next symbol of a stream whose distribution changes at random times (belief revision)"
    baseline_names = ("uniform", "never_forgets", "forgets_everything")

    @property
    def token_ids(self) -> dict[str, int]:
        n = self.config.n_obs
        return {"<s>": n, "<pad>": n + 1}

    @property
    def spec(self) -> TaskSpec:
        return stream_spec(self.name, self.config.n_obs, self.config.n_steps, "soft_ce")

    def hypothesis_space(self) -> HypothesisSpace:
        c = self.config
        return HypothesisSpace(
            math.inf,
            f"a fresh p in the {c.n_obs}-simplex per segment and a change-point pattern "
            f"(2^{max(c.n_steps - 1, 0)} patterns, hazard {c.h})",
        )

    # --- the generative model ----------------------------------------------------------
    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        dev = generator.device
        T = c.n_steps
        change = torch.rand(n, T, generator=generator, device=dev, dtype=torch.float64) < c.h
        change[:, 0] = False  # the first observation opens the first segment
        opens = change.clone()
        opens[:, 0] = True
        segment = opens.flatten().cumsum(0).view(n, T) - 1  # (n, T): index of each step's segment in the batch
        fresh = segment_distributions(int(segment[-1, -1]) + 1, c.n_obs, c.alpha, generator)
        dist = fresh[segment]  # (n, T, n_obs)
        obs = categorical(dist, generator)  # (n, T)
        probs, run_length = run_length_filter(obs, c.n_obs, c.h, c.alpha)

        # the true r_j: observations of x_j's segment among x_1..x_j (0 at position 0)
        t = torch.arange(T, device=dev)
        start = torch.where(change, t, torch.zeros_like(t)).cummax(1).values  # 0-based first step of the segment
        true_rl = torch.cat([torch.zeros(n, 1, dtype=torch.long, device=dev), (t - start + 1)[:, :-1]], dim=1)

        inputs = stream_inputs(obs, c.n_obs)
        return Batch(
            inputs=inputs,
            positions=torch.arange(T, device=dev),
            step=torch.arange(1, T + 1, device=dev),
            target=obs,
            probs=probs,
            entropy=entropy_bits(probs),
            latent={
                "observations": obs,
                "changes": change.long(),
                "distributions": dist,
                "run_length": run_length,
                "true_run_length": true_rl,
            },
        )

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        c = self.config
        obs = batch.latent["observations"]
        n, T = obs.shape
        before = counts_before(obs, c.n_obs)  # counts of x_1..x_j at position j
        last = torch.cat([before[:, :1], before[:, 1:] - before[:, :-1]], dim=1)  # x_j alone (none at position 0)
        return {
            "uniform": Prediction(probs=uniform_probs((n, T), c.n_obs, obs.device)),
            # h = 0: one segment, the Dirichlet-categorical predictive of every observation so far
            "never_forgets": Prediction(probs=predictive(before, c.alpha)),
            # a window of one: the predictive from the last observation alone (prior at position 0)
            "forgets_everything": Prediction(probs=predictive(last, c.alpha)),
        }

    def state_labels(self, batch: Batch) -> tuple[torch.Tensor, int, str] | None:
        """The MAP run length (ties to the shortest), bucketed by powers of two: 0, 1, 2-3, 4-7,
        ...: how much of the past the exact predictive mostly rests on (0: nothing, the prior;
        a small bucket right after a detected change)."""
        rl = batch.latent["run_length"]
        label, k = run_length_buckets(rl.argmax(-1), rl.shape[-1])
        return label, k, "MAP run length (ties to the shortest) in buckets 0, 1, 2-3, 4-7, ..."

    def token_names(self) -> list[str]:
        return [f"x{i}" for i in range(self.config.n_obs)] + ["<s>", "<pad>"]


def segment_distributions(n: int, n_obs: int, alpha: float, generator: torch.Generator) -> torch.Tensor:
    """``n`` draws of p ~ Dirichlet(alpha, ..., alpha) (float64, (n, n_obs)). alpha = 1 (the
    default) normalises Exponential(1) draws, -log(1 - U), instead of running the gamma
    sampler's rejection loop; the law is the same."""
    return flat_dirichlet((n, n_obs), generator) if alpha == 1.0 else dirichlet(alpha, (n, n_obs), generator)


def run_length_buckets(r: torch.Tensor, max_len: int) -> tuple[torch.Tensor, int]:
    """Run lengths r in 0..max_len-1 to buckets 0 -> 0, 1 -> 1, 2-3 -> 2, 4-7 -> 3, ...; and the
    number of buckets for run lengths up to max_len - 1."""
    label = torch.where(r > 0, torch.floor(torch.log2(r.clamp_min(1).double())).long() + 1, torch.zeros_like(r))
    k = 1 if max_len <= 1 else int(math.floor(math.log2(max_len - 1))) + 2
    return label, k


def run_length_filter(obs: torch.Tensor, n_obs: int, h: float, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact next-symbol predictive and the run-length posterior of a batch of streams.

    obs (B, T) long in 0..n_obs-1. Returns ``probs`` (B, T, n_obs) float64, where probs[:, j] is
    p(x_{j+1} | x_1..j) (j = 0: the prior predictive), and ``run_length`` (B, T, T) float64,
    where run_length[:, j, r] = p(r_j = r | x_1..j), the number of observations of the current
    segment among x_1..x_j (r_0 = 0).

    The weights are indexed by the segment's boundary i = j - r (the segment is x_{i+1..j}), so
    the counts of every candidate segment are differences of cumulative counts. What does not
    depend on the recursion is computed for all (j, i) at once: E[b, j, i], the
    Dirichlet-categorical predictive of the observed x_{j+1} given the segment x_{i+1..j}. The
    loop over time carries only the posterior over boundaries W[b, j, i] = p(the current segment
    is x_{i+1..j} | x_1..j), renormalised at every step (a probability vector throughout, so long
    streams cannot underflow), in three tensor operations per step vectorised over the batch and
    the boundaries. The prior of the next observation's segment is PI = (1 - h) W + h [i = j],
    and the predictive mixes the segments' predictives with weights PI, as sums of
    non-negative terms.
    """
    B, T = obs.shape
    dev, f64 = obs.device, torch.float64
    onehot = torch.nn.functional.one_hot(obs, n_obs).to(f64)  # (B, T, n)
    # cum[b, k, i]: count of symbol k in x_1..x_i (i = 0..T-1)
    cum = torch.cat([torch.zeros(B, n_obs, 1, dtype=f64, device=dev), onehot[:, :-1].cumsum(1).transpose(1, 2)], dim=2)
    t = torch.arange(T, device=dev)
    lower = t[:, None] >= t[None, :]  # [j, i]: boundary i <= position j
    inv = torch.where(lower, 1.0 / ((t[:, None] - t[None, :]).clamp_min(0).to(f64) + n_obs * alpha), 0.0)
    E = torch.bmm(onehot, cum)  # [b, j, i]: count of x_{j+1} in x_1..x_i (exact: 0/1 times counts)
    upto_j = E.diagonal(dim1=1, dim2=2)[:, :, None] + alpha  # count of x_{j+1} in x_1..x_j, plus alpha
    E.neg_().add_(upto_j).mul_(inv)  # (count of x_{j+1} in x_{i+1..j} + alpha) / (j - i + n alpha)
    change = torch.eye(T, dtype=f64, device=dev).mul_(h)  # a change-point before x_{j+1}: the empty segment

    W = torch.zeros(B, T, T, dtype=f64, device=dev)
    W[:, 0, 0] = 1.0  # x_1 opens the first segment: PI[0] = (1 - h) + h = 1 at i = 0
    # full rows (zero beyond the diagonal, as E is); hE[j] = h [i = j] E[j], so that
    # PI_j * E_j = hE_j + (1 - h) W_j * E_j is one operation
    w, e, he = W.unbind(1), E.unbind(1), (E * change).unbind(1)
    for j in range(T - 1):
        post = torch.addcmul(he[j], w[j], e[j], value=1.0 - h)  # observe x_{j+1}
        torch.div(post, post.sum(1, keepdim=True), out=w[j + 1])

    # predictive: sum_i PI_ji (count in x_{i+1..j} + alpha) / (j - i + n alpha); observation x_{u+1}
    # lies in the segments with boundary i <= u < j, so its weight is a cumulative sum over i
    S = torch.add(change, W, alpha=1.0 - h, out=E).mul_(inv)  # E is spent: reuse its memory
    coef = S.cumsum(-1)
    total = coef[..., -1:].mul(alpha)
    probs = torch.baddbmm(total.expand(-1, -1, n_obs), coef.tril_(-1), onehot)
    del S, E, coef
    # run length r at position j is boundary j - r; r > j points at W[:, j, T-1] = 0 (j < T-1)
    idx = torch.where(lower, t[:, None] - t[None, :], T - 1)
    return probs, W.gather(2, idx.expand(B, T, T))
