"""HMM filtering (Paper I, task B: belief accumulation and transport).

Every sequence has its own hidden Markov model: each row of the S x S transition matrix T and
of the S x O emission matrix E is drawn from Dirichlet(alpha), optionally floored and put on
a 0.01 grid as in the authors' code; the initial state is uniform. The sequence shows the
matrices in a header, then the observations; at each observation the model must output the
filtering posterior p(s_t | o_1..t), computed exactly by the forward algorithm in float64
log space from the very matrices the model sees.

Token format (authors' ``HMMTokenizer``): probability tokens for 0.05, 0.06, ..., 1.00 (ids
0-95), [TRANS]=96, [EMIT]=97, [SEP]=98, [OBS]=99, observation symbols 100..100+O-1, and a
padding id after them (vocabulary 105 + 1 for S = O = 5). With ``floor`` below 0.05 the
probability tokens start at 0.00 instead (101 of them) and the other ids shift by 5. The 0.01
grid is always on: a token header can only show grid values. Sequence:
``[TRANS] T(row-major) [EMIT] E(row-major) [SEP]`` (53 tokens for S = O = 5) followed by
``[OBS] o_t`` pairs; the scored positions are the observation symbols.

First-step conventions: ``observe_first`` (authors' code: s_1 ~ pi, alpha_1 ∝ pi * E[:, o_1])
or ``transition_first`` (summary A: s_0 ~ pi unobserved, s_1 ~ T[s_0]); the sampler follows
the same convention as the posterior.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field, model_validator

from windtunnel.infotheory import entropy_bits
from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task, uniform_probs
from windtunnel.tasks.sampling import categorical, dirichlet


class HMMConfig(TaskConfig):
    S: int = Field(5, ge=2, le=16, description="number of hidden states")
    O: int = Field(5, ge=2, le=64, description="number of observation symbols")  # noqa: E741 (the paper's name, a config key)
    K: int = Field(20, ge=1, le=4096, description="number of observations per sequence")
    alpha: float = Field(1.0, gt=0, le=1000, description="Dirichlet concentration of every T and E row")
    floor: float = Field(
        0.05, ge=0, lt=0.5, description="floor entries at this value and renormalise before the 0.01 grid (0: off)"
    )
    first_step: Literal["observe_first", "transition_first"] = Field(
        "observe_first",
        description="observe_first: alpha_1 ∝ pi*E(o_1) (authors' code); transition_first: a transition before o_1",
    )

    length_field = "K"
    presets = {"paper": {}, "small": {"S": 3, "O": 3, "K": 8}}

    @model_validator(mode="after")
    def _check(self):
        if round(100 * self.floor) * max(self.S, self.O) > 100:
            raise ValueError(f"floor = {self.floor} is too large: floor * max(S, O) must be <= 1")
        return self

    @property
    def min_cents(self) -> int:
        """Smallest probability token, in cents: 5 (authors' table) when floor >= 0.05, else 0."""
        return 5 if self.floor >= 0.05 else 0


@register_task
class HMMTask(Task):
    name = "hmm"
    Config = HMMConfig
    description = "filter the hidden state of a fresh random HMM shown in the header"
    baseline_names = ("uniform", "emission_only")

    @property
    def header_len(self) -> int:
        c = self.config
        return 3 + c.S * c.S + c.S * c.O

    @property
    def token_ids(self) -> dict[str, int]:
        """Ids of the special tokens, the first observation symbol and the padding id."""
        n_prob = 101 - self.config.min_cents
        ids = {"[TRANS]": n_prob, "[EMIT]": n_prob + 1, "[SEP]": n_prob + 2, "[OBS]": n_prob + 3, "o0": n_prob + 4}
        ids["<pad>"] = ids["o0"] + self.config.O
        return ids

    @property
    def spec(self) -> TaskSpec:
        c = self.config
        pad = self.token_ids["<pad>"]
        return TaskSpec(
            name=self.name,
            input_kind="tokens",
            seq_len=self.header_len + 2 * c.K,
            n_scored=c.K,
            answer_size=c.S,
            output_kind="categorical",
            loss="soft_ce",
            vocab_size=pad + 1,
            pad_id=pad,
            answer_token_ids=None,
        )

    def hypothesis_space(self) -> HypothesisSpace:
        c = self.config
        # grid rows: compositions of the free cents over the entries of a row
        def row_count(width: int) -> float:
            free = 100 - width * round(100 * c.floor)
            return math.lgamma(free + width) - math.lgamma(width) - math.lgamma(free + 1)

        log10 = (c.S * row_count(c.S) + c.S * row_count(c.O)) / math.log(10)
        return HypothesisSpace(log10, f"a fresh (T, E) pair per sequence: S={c.S} rows of T, S rows of E on the 0.01 grid")

    # --- the generative model ----------------------------------------------------------
    def sample_matrices(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.config
        T = self._row_prep(dirichlet(c.alpha, (n, c.S, c.S), generator))
        E = self._row_prep(dirichlet(c.alpha, (n, c.S, c.O), generator))
        return T, E

    def _row_prep(self, rows: torch.Tensor) -> torch.Tensor:
        c = self.config
        if c.floor > 0:
            rows = rows.clamp_min(c.floor)
            rows = rows / rows.sum(-1, keepdim=True)
        return discretize_rows(rows, round(100 * c.floor)) / 100.0

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        dev = generator.device
        T, E = self.sample_matrices(n, generator)
        pi = torch.full((n, c.S), 1.0 / c.S, dtype=torch.float64, device=dev)
        states = torch.empty(n, c.K, dtype=torch.long, device=dev)
        s = categorical(pi, generator)
        if c.first_step == "transition_first":
            s = categorical(T[torch.arange(n, device=dev), s], generator)
        rows = torch.arange(n, device=dev)
        for t in range(c.K):
            if t > 0:
                s = categorical(T[rows, s], generator)
            states[:, t] = s
        obs = categorical(E[rows[:, None], states], generator)  # (n, K)
        probs = forward_filter(T, E, obs, first_step=c.first_step)

        ids = self.token_ids
        header = torch.cat(
            [
                torch.full((n, 1), ids["[TRANS]"], device=dev),
                torch.round(T * 100).long().flatten(1) - c.min_cents,
                torch.full((n, 1), ids["[EMIT]"], device=dev),
                torch.round(E * 100).long().flatten(1) - c.min_cents,
                torch.full((n, 1), ids["[SEP]"], device=dev),
            ],
            dim=1,
        )
        body = torch.stack([torch.full_like(obs, ids["[OBS]"]), obs + ids["o0"]], dim=2).flatten(1)
        positions = self.header_len + 2 * torch.arange(c.K, device=dev) + 1
        return Batch(
            inputs=torch.cat([header, body], dim=1).long(),
            positions=positions,
            step=torch.arange(1, c.K + 1, device=dev),
            target=states,
            probs=probs,
            entropy=entropy_bits(probs),
            latent={"transition": T, "emission": E, "states": states, "observations": obs},
        )

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        E, obs = batch.latent["emission"], batch.latent["observations"]
        lik = E.gather(2, obs[:, None, :].expand(-1, E.shape[1], -1)).transpose(1, 2)  # (n, K, S)
        return {
            "uniform": Prediction(probs=uniform_probs(tuple(obs.shape), self.config.S, obs.device)),
            # uses the current observation and the emission matrix, ignores the dynamics
            "emission_only": Prediction(probs=lik / lik.sum(-1, keepdim=True)),
        }

    def hypothesis_tokens(self) -> tuple[list[int], str] | None:
        """The O observation symbols: the evidence each position reads."""
        o0 = self.token_ids["o0"]
        return list(range(o0, o0 + self.config.O)), f"the {self.config.O} observation symbols"

    def state_labels(self, batch: Batch) -> tuple[torch.Tensor, int, str] | None:
        """The most likely hidden state (the answers are the S hidden states)."""
        return (batch.probs.argmax(-1), int(self.config.S),
                "most likely hidden state (argmax of the filtering posterior)")

    def length_test(self) -> tuple[int, ...]:
        """The trained K and K = 50 (Paper I: top-layer attention removed at K = 50)."""
        return tuple(sorted({self.config.K, 50}))

    def token_names(self) -> list[str]:
        probs = [f"{cents / 100:.2f}" for cents in range(self.config.min_cents, 101)]
        return probs + ["[TRANS]", "[EMIT]", "[SEP]", "[OBS]"] + [f"o{i}" for i in range(self.config.O)] + ["<pad>"]


def discretize_rows(rows: torch.Tensor, floor_cents: int) -> torch.Tensor:
    """Round probability rows to whole cents (float64) that sum to exactly 100, each >= floor.

    Cents are added to the smallest entries or removed from the largest ones, one per round,
    until every row sums to 100 (at most ``width`` rounds after rounding).
    """
    cents = torch.round(rows * 100).clamp_min(floor_cents)
    for _ in range(4 * rows.shape[-1] + 100):
        diff = 100 - cents.sum(-1)  # (…,)
        if not diff.any():
            return cents
        up = (diff > 0).to(cents.dtype)
        down = (diff < 0).to(cents.dtype)
        lo = torch.nn.functional.one_hot(cents.argmin(-1), cents.shape[-1]).to(cents.dtype)
        hi = torch.nn.functional.one_hot(cents.argmax(-1), cents.shape[-1]).to(cents.dtype)
        cents = cents + up[..., None] * lo - down[..., None] * hi
    raise RuntimeError("discretisation did not converge")  # unreachable for valid configs


def forward_filter(
    T: torch.Tensor, E: torch.Tensor, obs: torch.Tensor, first_step: str = "observe_first", pi: torch.Tensor | None = None
) -> torch.Tensor:
    """Filtering posteriors p(s_t | o_1..t) for a batch of HMMs, in float64.

    T (n, S, S) with T[b, i, j] = p(s_{t+1}=j | s_t=i); E (n, S, O); obs (n, K) long.
    Returns (n, K, S). Vectorised over the batch (state-major layout); a loop over the K
    time steps. The recursion is the scaled forward algorithm: alpha_t is renormalised at
    every step, so it is a probability vector throughout and cannot underflow; it gives the
    log-space recursion's numbers to machine precision at 2.5x its speed (the tests check it
    against enumeration of all hidden paths).
    """
    n, S, _ = T.shape
    K = obs.shape[1]
    Tp = T.double().permute(1, 2, 0).contiguous()  # (i, j, n)
    lik = E.double().gather(2, obs[:, None, :].expand(-1, S, -1)).permute(2, 1, 0).contiguous()  # (K, S, n)
    alpha = (torch.full((n, S), 1.0 / S, dtype=torch.float64, device=T.device) if pi is None else pi.double()).T
    out = torch.empty(K, S, n, dtype=torch.float64, device=T.device)
    for t in range(K):
        if t > 0 or first_step == "transition_first":
            alpha = (alpha[:, None, :] * Tp).sum(0)  # sum_i alpha_i T_ij
        alpha = alpha * lik[t]
        alpha = torch.div(alpha, alpha.sum(0), out=out[t])
    return out.permute(2, 0, 1).contiguous()
