"""Associative recall (Paper I v3, task C: random-access binding).

Every sequence stores N fresh key-value bindings, then asks for the values of M stored keys.
The exact posterior at a query is a delta on the stored value (entropy 0); the measures are
accuracy and entropy error. Layout of the authors' generator
(``src/data/associative_recall.py``): PAD=0, STORE=1, FILLER=2, QUERY=3, SEP=4, keys from 10,
values after the keys. Sequence: ``[STORE k_i SEP v_i] x N``, ``FILLER x F``, then per query
``QUERY k_q <answer slot>`` with ``FILLER x F/2`` between queries. The prediction is read at
the query key (next-token). The authors fill the answer slot with PAD and mask it; here it
holds a dedicated ANS placeholder (id 5, unused in their layout), so that the padding id
never appears inside a sequence.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field, model_validator

from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task, uniform_probs

PAD, STORE, FILLER, QUERY, SEP, ANS = 0, 1, 2, 3, 4, 5
KEY0 = 10


class RecallConfig(TaskConfig):
    N: int = Field(64, ge=1, le=4096, description="stored key-value pairs")
    M: int = Field(3, ge=1, le=4096, description="queries per sequence (distinct stored keys)")
    F: int = Field(32, ge=0, le=4096, description="filler tokens after the store (F/2 between queries)")
    n_keys: int = Field(256, ge=1, le=65536, description="key vocabulary size")
    n_values: int = Field(256, ge=2, le=65536, description="value vocabulary size")

    profiles = {"paper": {}, "small": {"N": 8, "M": 3, "F": 8, "n_keys": 32, "n_values": 32}}

    @model_validator(mode="after")
    def _check(self):
        if self.N > self.n_keys:
            raise ValueError(f"N = {self.N} pairs need N <= n_keys = {self.n_keys} (keys are distinct)")
        if self.N > self.n_values:
            raise ValueError(f"N = {self.N} pairs need N <= n_values = {self.n_values} (values are distinct)")
        if self.M > self.N:
            raise ValueError(f"M = {self.M} queries need M <= N = {self.N} (queries are distinct stored keys)")
        return self


@register_task
class RecallTask(Task):
    name = "recall"
    Config = RecallConfig
    description = "retrieve the value bound to a queried key among N fresh bindings"
    baseline_names = ("uniform", "stored_uniform")

    @property
    def _query_stride(self) -> int:
        return 3 + self.config.F // 2

    @property
    def spec(self) -> TaskSpec:
        c = self.config
        return TaskSpec(
            name=self.name,
            input_kind="tokens",
            seq_len=4 * c.N + c.F + c.M * 3 + (c.M - 1) * (c.F // 2),
            n_scored=c.M,
            answer_size=c.n_values,
            output_kind="categorical",
            loss="ce",
            vocab_size=KEY0 + c.n_keys + c.n_values,
            pad_id=PAD,
            answer_token_ids=tuple(range(KEY0 + c.n_keys, KEY0 + c.n_keys + c.n_values)),
        )

    def hypothesis_space(self) -> HypothesisSpace:
        c = self.config

        def log_falling(a: int, b: int) -> float:
            return math.lgamma(a + 1) - math.lgamma(a - b + 1)

        log10 = (log_falling(c.n_keys, c.N) + log_falling(c.n_values, c.N)) / math.log(10)
        return HypothesisSpace(log10, f"ordered bindings of {c.N} distinct keys to {c.N} distinct values")

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        dev = generator.device
        keys = torch.rand(n, c.n_keys, generator=generator, device=dev).argsort(1)[:, : c.N]
        values = torch.rand(n, c.n_values, generator=generator, device=dev).argsort(1)[:, : c.N]
        qidx = torch.rand(n, c.N, generator=generator, device=dev).argsort(1)[:, : c.M]
        qkeys, qvals = keys.gather(1, qidx), values.gather(1, qidx)

        spec = self.spec
        inputs = torch.full((n, spec.seq_len), FILLER, dtype=torch.long, device=dev)
        store = inputs[:, : 4 * c.N].view(n, c.N, 4)
        store[:, :, 0] = STORE
        store[:, :, 1] = keys + KEY0
        store[:, :, 2] = SEP
        store[:, :, 3] = values + KEY0 + c.n_keys
        positions = 4 * c.N + c.F + self._query_stride * torch.arange(c.M, device=dev) + 1
        inputs[:, positions - 1] = QUERY
        inputs[:, positions] = qkeys + KEY0
        inputs[:, positions + 1] = ANS  # the answer slot
        probs = torch.nn.functional.one_hot(qvals, c.n_values).double()
        return Batch(
            inputs=inputs,
            positions=positions,
            step=torch.arange(1, c.M + 1, device=dev),
            target=qvals,
            probs=probs,
            entropy=torch.zeros(n, c.M, dtype=torch.float64, device=dev),
            latent={"keys": keys, "values": values, "query_index": qidx},
        )

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        c = self.config
        n, M = batch.target.shape
        stored = torch.zeros(n, c.n_values, dtype=torch.float64, device=batch.target.device)
        stored.scatter_(1, batch.latent["values"], 1.0 / c.N)
        return {
            "uniform": Prediction(probs=uniform_probs((n, M), c.n_values, batch.target.device)),
            # knows which values were stored but not which key each is bound to
            "stored_uniform": Prediction(probs=stored[:, None, :].expand(n, M, c.n_values)),
        }

    def token_names(self) -> list[str]:
        c = self.config
        return (
            ["<pad>", "STORE", "FILLER", "QUERY", "SEP", "ANS"]
            + [f"<unused{i}>" for i in range(6, KEY0)]
            + [f"k{i}" for i in range(c.n_keys)]
            + [f"v{i}" for i in range(c.n_values)]
        )
