"""Bijection elimination (Paper I, task A: belief accumulation).

A fresh permutation pi of V symbols is drawn for every sequence. The model sees (key, value)
pairs (x_i, pi(x_i)) and must predict pi(x_k) at each new key. With keys drawn without
replacement the exact posterior is uniform over the values not yet revealed:
p(pi(x_k) = y | context) = 1 / (V - k + 1) for unused y, so H_Bayes(k) = log2(V - k + 1).
With replacement, a repeated key has a delta posterior on its revealed value.

Formats (Paper I and the authors' code):
- ``sepvocab`` ("production", v3-era): ``[k1, v1+V, k2, v2+V, ..., k_L]``, length 2L-1;
  keys are tokens 0..V-1, values V..2V-1; every key position is scored.
- ``paired`` (Paper I v1): ``[k1, v1, ..., kL, vL, q]``, length 2L+1, a shared vocabulary
  of V symbols; every key position is scored, plus the final query q.
The padding id is the last id of the vocabulary and never appears in a sequence.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field, model_validator

from windtunnel.infotheory import entropy_bits
from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task, uniform_probs


class BijectionConfig(TaskConfig):
    V: int = Field(20, ge=2, le=512, description="number of symbols (keys and values)")
    L: int = Field(19, ge=1, le=1024, description="number of context pairs")
    format: Literal["sepvocab", "paired"] = Field(
        "sepvocab", description="sepvocab: values offset by V, every key scored; paired: shared vocab + final query"
    )
    with_replacement: bool = Field(False, description="draw keys with replacement (a seen key has a delta posterior)")
    query: Literal["context", "fresh"] = Field(
        "context", description="paired format: query key drawn from the context keys, or a key not in the context"
    )

    length_field = "L"
    presets = {"paper": {"V": 20, "L": 19, "format": "paired"}, "production": {"V": 20, "L": 19, "format": "sepvocab"}}

    @model_validator(mode="after")
    def _check(self):
        if not self.with_replacement and self.L > self.V:
            raise ValueError(f"L = {self.L} context pairs need L <= V = {self.V} when keys are drawn without replacement")
        if self.format == "paired" and self.query == "fresh":
            if self.with_replacement:
                raise ValueError("query = 'fresh' needs with_replacement = false")
            if self.L >= self.V:
                raise ValueError(f"query = 'fresh' needs L < V (an unused key must remain); got L = {self.L}, V = {self.V}")
        return self


@register_task
class BijectionTask(Task):
    name = "bijection"
    Config = BijectionConfig
    description = "infer a fresh random bijection of V symbols from (key, value) pairs"
    baseline_names = ("uniform",)

    @property
    def spec(self) -> TaskSpec:
        c = self.config
        sep = c.format == "sepvocab"
        n_sym = 2 * c.V if sep else c.V
        return TaskSpec(
            name=self.name,
            input_kind="tokens",
            seq_len=2 * c.L - 1 if sep else 2 * c.L + 1,
            n_scored=c.L if sep else c.L + 1,
            answer_size=c.V,
            output_kind="categorical",
            loss="ce",
            vocab_size=n_sym + 1,
            pad_id=n_sym,
            answer_token_ids=tuple(range(c.V, 2 * c.V)) if sep else tuple(range(c.V)),
        )

    def hypothesis_space(self) -> HypothesisSpace:
        v = self.config.V
        return HypothesisSpace(math.lgamma(v + 1) / math.log(10), f"{v}! permutations, a fresh one per sequence")

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        dev = generator.device
        V, L = c.V, c.L
        perm = torch.rand(n, V, generator=generator, device=dev).argsort(dim=1)  # pi(x) = perm[:, x]
        if c.with_replacement:
            keys = torch.randint(0, V, (n, L), generator=generator, device=dev)
        else:
            keys = torch.rand(n, V, generator=generator, device=dev).argsort(dim=1)[:, :L]
        values = perm.gather(1, keys)

        # posterior at key i given pairs 0..i-1: delta on the value of a seen key, else uniform
        # over the values not yet revealed (a bijection: revealed values are exactly those of
        # the distinct keys seen).
        seen_val = torch.zeros(n, L, V, dtype=torch.bool, device=dev)  # value revealed before i
        onehot_v = torch.nn.functional.one_hot(values, V).bool()
        seen_val[:, 1:] = onehot_v[:, :-1].cumsum(1).gt(0)
        probs = self._posterior(seen_val, keys, values)

        if c.format == "sepvocab":
            inputs = torch.empty(n, 2 * L - 1, dtype=torch.long, device=dev)
            inputs[:, 0::2] = keys
            inputs[:, 1::2] = values[:, :-1] + V
            positions = torch.arange(0, 2 * L - 1, 2, device=dev)
            target = values
        else:
            if c.query == "context":
                qi = torch.randint(0, L, (n,), generator=generator, device=dev)
                query = keys.gather(1, qi[:, None])[:, 0]
            else:  # a key outside the context: the L-th..(V-1)-th keys of a fresh ordering
                order = torch.rand(n, V, generator=generator, device=dev)
                order.scatter_(1, keys, 2.0)  # push used keys to the end
                query = order.argmin(dim=1)
            q_val = perm.gather(1, query[:, None])[:, 0]
            seen_all = onehot_v.any(1)  # (n, V) values revealed by the whole context
            q_probs = self._posterior(seen_all[:, None], query[:, None], q_val[:, None], ctx_keys=keys)
            probs = torch.cat([probs, q_probs], dim=1)
            inputs = torch.empty(n, 2 * L + 1, dtype=torch.long, device=dev)
            inputs[:, 0:-1:2] = keys
            inputs[:, 1:-1:2] = values
            inputs[:, -1] = query
            positions = torch.arange(0, 2 * L + 1, 2, device=dev)
            target = torch.cat([values, q_val[:, None]], dim=1)

        P = positions.numel()
        return Batch(
            inputs=inputs,
            positions=positions,
            step=torch.arange(1, P + 1, device=dev),
            target=target,
            probs=probs,
            entropy=entropy_bits(probs),
            latent={"permutation": perm, "keys": keys, "values": values},
        )

    def _posterior(self, seen_val, keys, values, ctx_keys=None) -> torch.Tensor:
        """Exact posterior (n, P, V) for query keys ``keys`` (n, P) given the revealed values.

        A key already in the context (earlier in the sequence, or among ``ctx_keys`` for the
        paired query) has a delta posterior on its value.
        """
        n, P, V = seen_val.shape
        if ctx_keys is None:  # key i is seen iff it equals an earlier key
            ctx_k = keys
            earlier = torch.ones(P, P, dtype=torch.bool, device=keys.device).tril(-1)
        else:
            ctx_k = ctx_keys
            earlier = torch.ones(P, ctx_k.shape[1], dtype=torch.bool, device=keys.device)
        match = (keys[:, :, None] == ctx_k[:, None, :]) & earlier  # (n, P, Lctx)
        repeated = match.any(-1)
        free = (~seen_val).double()
        probs = free / free.sum(-1, keepdim=True)
        if repeated.any():
            delta = torch.nn.functional.one_hot(values, V).double()
            probs = torch.where(repeated[..., None], delta, probs)
        return probs

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        # The best context-blind predictor is uniform over the V values (symmetry of the prior).
        return {"uniform": Prediction(probs=uniform_probs(tuple(batch.target.shape), self.config.V, batch.target.device))}

    alternates_keys_values = True  # [k1, v1, k2, v2, ...] in both formats, scored at the keys

    def hypothesis_tokens(self) -> tuple[list[int], str] | None:
        """The V key tokens (0..V-1 in both formats)."""
        return list(range(self.config.V)), f"the {self.config.V} key tokens"

    def value_tokens(self) -> tuple[list[int], str] | None:
        """sep-vocab: the V value tokens V..2V-1; paired: None (keys and values share 0..V-1)."""
        V = self.config.V
        return (list(range(V, 2 * V)), f"the {V} value tokens") if self.config.format == "sepvocab" else None

    def token_names(self) -> list[str]:
        V = self.config.V
        if self.config.format == "sepvocab":
            return [f"k{i}" for i in range(V)] + [f"v{i}" for i in range(V)] + ["<pad>"]
        return [f"s{i}" for i in range(V)] + ["<pad>"]
