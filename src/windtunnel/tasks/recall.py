"""Associative recall (Paper I v3, task C: random-access binding), in two layouts.

Every sequence stores N fresh key-value bindings, then asks for the values of stored keys; the
prediction is read at each query key (next-token). The exact posterior at a query is a delta on
the stored value (entropy 0); the measures are accuracy and entropy error.

``format="store_sep"`` (default): the authors' generator (``src/data/associative_recall.py``):
PAD=0, STORE=1, FILLER=2, QUERY=3, SEP=4, ANS=5 (the answer slot, a masked PAD in theirs, so
that the padding id never occurs in a sequence), keys from 10, values after the keys:
``[STORE k_i SEP v_i] x N``, ``FILLER x F``, then ``QUERY k_q ANS`` per query with
``FILLER x F/2`` between queries; M distinct stored keys are queried.

``format="mqar"``: multi-query associative recall as in HazyResearch/zoology (``multiquery_ar``),
every token id shifted by one so that id 0 stays the padding id: the N pairs ``k v``, then every
stored key queried once at an even offset 2 g of the rest, the gaps g drawn without replacement
from the power law of ``power_a``; with ``random_non_queries`` every filler is a uniformly random
token. The gaps are drawn once per batch (zoology: per sequence), since the Batch contract shares
scored positions across a batch. Details: docs/tasks.md, "recall".
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field, model_validator

from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task, uniform_probs

PAD, STORE, FILLER, QUERY, SEP, ANS = 0, 1, 2, 3, 4, 5
KEY0 = 10


class RecallConfig(TaskConfig):
    format: Literal["store_sep", "mqar"] = Field(
        "store_sep", description="store_sep: the authors' layout; mqar: zoology's multi-query associative recall")
    N: int = Field(64, ge=1, le=4096, description="stored key-value pairs")
    M: int = Field(3, ge=1, le=4096, description="store_sep: queries per sequence (distinct stored keys); "
                                                 "mqar queries every key (M = N)")
    F: int = Field(32, ge=0, le=4096, description="store_sep: filler tokens after the store (F/2 between queries)")
    n_keys: int = Field(256, ge=1, le=65536, description="store_sep: key vocabulary size")
    n_values: int = Field(256, ge=2, le=65536, description="store_sep: value vocabulary size")
    vocab_size: int = Field(8192, ge=4, le=1_000_000,
                            description="mqar: zoology's vocabulary (filler 0, keys below vocab_size/2, values above)")
    seq_len: int = Field(64, ge=4, le=65536, description="mqar: sequence length (even; 4 N <= seq_len < vocab_size)")
    power_a: float = Field(0.01, gt=0, le=1.0, description="mqar: power-law exponent of the query gaps (1: uniform)")
    random_non_queries: bool = Field(True, description="mqar: replace fillers by random tokens")

    presets = {"paper": {}, "small": {"N": 8, "M": 8, "F": 8, "n_keys": 32, "n_values": 32},
                "mqar": {"format": "mqar", "N": 8, "vocab_size": 8192, "seq_len": 64}}

    @model_validator(mode="after")
    def _check(self):
        if self.format == "mqar":
            return self._check_mqar()
        if self.N > self.n_keys:
            raise ValueError(f"N = {self.N} pairs need N <= n_keys = {self.n_keys} (keys are distinct)")
        if self.N > self.n_values:
            raise ValueError(f"N = {self.N} pairs need N <= n_values = {self.n_values} (values are distinct)")
        if self.M > self.N:
            raise ValueError(f"M = {self.M} queries need M <= N = {self.N} (queries are distinct stored keys)")
        return self

    def _check_mqar(self):
        set_ = self.model_fields_set
        ignored = sorted(set_ & {"M", "F", "n_keys", "n_values"})
        if ignored:
            raise ValueError(f"{', '.join(ignored)} belong to format 'store_sep'; format 'mqar' is set by "
                             "N, vocab_size, seq_len, power_a and random_non_queries (every stored key is queried)")
        if self.seq_len % 2:
            raise ValueError(f"seq_len = {self.seq_len} must be even (format 'mqar')")
        if 4 * self.N > self.seq_len:
            raise ValueError(f"N = {self.N} pairs need 4 N <= seq_len = {self.seq_len} (format 'mqar')")
        if self.seq_len >= self.vocab_size:
            raise ValueError(f"seq_len = {self.seq_len} must be < vocab_size = {self.vocab_size} (format 'mqar')")
        if self.N > self.vocab_size // 2 - 1:
            raise ValueError(f"N = {self.N} pairs need N <= vocab_size/2 - 1 = {self.vocab_size // 2 - 1} keys")
        return self

    # --- the answer and query layout of either format -------------------------------------
    @property
    def n_queries(self) -> int:
        return self.N if self.format == "mqar" else self.M

    @property
    def key_count(self) -> int:
        return self.vocab_size // 2 - 1 if self.format == "mqar" else self.n_keys

    @property
    def value_count(self) -> int:
        return self.vocab_size - self.vocab_size // 2 if self.format == "mqar" else self.n_values


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
    def _value0(self) -> int:
        """Token id of the first value."""
        c = self.config
        return 1 + c.vocab_size // 2 if c.format == "mqar" else KEY0 + c.n_keys

    @property
    def _key0(self) -> int:
        return 2 if self.config.format == "mqar" else KEY0

    @property
    def spec(self) -> TaskSpec:
        c = self.config
        if c.format == "mqar":
            seq_len, vocab = c.seq_len, c.vocab_size + 1
        else:
            seq_len, vocab = 4 * c.N + c.F + c.M * 3 + (c.M - 1) * (c.F // 2), KEY0 + c.n_keys + c.n_values
        return TaskSpec(
            name=self.name,
            input_kind="tokens",
            seq_len=seq_len,
            n_scored=c.n_queries,
            answer_size=c.value_count,
            output_kind="categorical",
            loss="ce",
            vocab_size=vocab,
            pad_id=PAD,
            answer_token_ids=tuple(range(self._value0, self._value0 + c.value_count)),
        )

    def hypothesis_space(self) -> HypothesisSpace:
        c = self.config

        def log_falling(a: int, b: int) -> float:
            return math.lgamma(a + 1) - math.lgamma(a - b + 1)

        log10 = (log_falling(c.key_count, c.N) + log_falling(c.value_count, c.N)) / math.log(10)
        return HypothesisSpace(log10, f"ordered bindings of {c.N} distinct keys to {c.N} distinct values")

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        dev = generator.device
        keys = torch.rand(n, c.key_count, generator=generator, device=dev).argsort(1)[:, : c.N]
        values = torch.rand(n, c.value_count, generator=generator, device=dev).argsort(1)[:, : c.N]
        qidx = torch.rand(n, c.N, generator=generator, device=dev).argsort(1)[:, : c.n_queries]
        qkeys, qvals = keys.gather(1, qidx), values.gather(1, qidx)
        if c.format == "mqar":
            inputs, positions = self._mqar_layout(keys, values, qkeys, generator)
        else:
            inputs, positions = self._store_sep_layout(keys, values, qkeys)
        M = c.n_queries
        return Batch(
            inputs=inputs,
            positions=positions,
            step=torch.arange(1, M + 1, device=dev),
            target=qvals,
            probs=torch.nn.functional.one_hot(qvals, c.value_count).double(),
            entropy=torch.zeros(n, M, dtype=torch.float64, device=dev),
            latent={"keys": keys, "values": values, "query_index": qidx},
        )

    def _store_sep_layout(self, keys, values, qkeys) -> tuple[torch.Tensor, torch.Tensor]:
        c, (n, dev) = self.config, (keys.shape[0], keys.device)
        inputs = torch.full((n, self.spec.seq_len), FILLER, dtype=torch.long, device=dev)
        store = inputs[:, : 4 * c.N].view(n, c.N, 4)
        store[:, :, 0] = STORE
        store[:, :, 1] = keys + KEY0
        store[:, :, 2] = SEP
        store[:, :, 3] = values + self._value0
        positions = 4 * c.N + c.F + self._query_stride * torch.arange(c.M, device=dev) + 1
        inputs[:, positions - 1] = QUERY
        inputs[:, positions] = qkeys + KEY0
        inputs[:, positions + 1] = ANS  # the answer slot
        return inputs, positions

    def _mqar_layout(self, keys, values, qkeys, generator) -> tuple[torch.Tensor, torch.Tensor]:
        """zoology's ``_mqar``: pairs, then every key at an even offset 2 g of the query region,
        the gaps g drawn without replacement from the power law (once per batch, see above)."""
        c, (n, dev) = self.config, (keys.shape[0], keys.device)
        filler = 1  # zoology's token 0
        space = (c.seq_len - 2 * c.N) // 2
        g = torch.arange(1, space + 1, dtype=torch.float64, device=dev)
        p = c.power_a * g ** (c.power_a - 1)
        gaps = torch.multinomial(p / p.sum(), c.N, replacement=False, generator=generator).sort().values
        positions = 2 * c.N + 2 * gaps
        inputs = torch.full((n, c.seq_len), filler, dtype=torch.long, device=dev)
        inputs[:, 0 : 2 * c.N : 2] = keys + self._key0
        inputs[:, 1 : 2 * c.N : 2] = values + self._value0
        inputs[:, positions] = qkeys + self._key0
        if c.random_non_queries:
            noise = torch.randint(1, c.vocab_size + 1, inputs.shape, generator=generator, device=dev)
            inputs = torch.where(inputs == filler, noise, inputs)
        return inputs, positions

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        c = self.config
        n, M = batch.target.shape
        stored = torch.zeros(n, c.value_count, dtype=torch.float64, device=batch.target.device)
        stored.scatter_(1, batch.latent["values"], 1.0 / c.N)
        return {
            "uniform": Prediction(probs=uniform_probs((n, M), c.value_count, batch.target.device)),
            # knows which values were stored but not which key each is bound to
            "stored_uniform": Prediction(probs=stored[:, None, :].expand(n, M, c.value_count)),
        }

    def hypothesis_tokens(self) -> tuple[list[int], str] | None:
        """The key tokens."""
        n = self.config.key_count
        return list(range(self._key0, self._key0 + n)), f"the {n} key tokens"

    def token_names(self) -> list[str]:
        c = self.config
        if c.format == "mqar":
            return ["<pad>", "FILL"] + [f"k{i}" for i in range(c.key_count)] + [f"v{i}" for i in range(c.value_count)]
        return (
            ["<pad>", "STORE", "FILLER", "QUERY", "SEP", "ANS"]
            + [f"<unused{i}>" for i in range(6, KEY0)]
            + [f"k{i}" for i in range(c.n_keys)]
            + [f"v{i}" for i in range(c.n_values)]
        )
