"""The Task contract: a validated config, a vectorised sampler, and the exact posterior.

A task samples a fresh latent hypothesis for every sequence from an explicit
``torch.Generator`` and returns a :class:`Batch` that carries, at every scored position,
the exact Bayesian posterior over the answer space (or the Gaussian posterior predictive),
its entropy in bits, and the latent truth. Sampling is vectorised over the batch and runs on
whatever device the generator lives on; oracles are computed in float64.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from windtunnel.compat import task_preset
from windtunnel.config import ConfigError, StrictConfig
from windtunnel.registry import Registry

SPLITS = ("train", "eval", "probe")


class TaskConfig(StrictConfig):
    """Base of every task config."""

    #: name of the field that sets the sequence length (for length generalisation), if any
    length_field: ClassVar[str | None] = None
    #: named presets of the task's parameters, e.g. {"small": {...}} for a CPU-sized variant
    #: (``windtunnel sample TASK --preset small``; called "profiles" before, a name that now
    #: belongs to the run profiles of ``windtunnel train --profile``)
    presets: ClassVar[dict[str, dict[str, Any]]] = {}


@dataclass(frozen=True)
class TaskSpec:
    """What a model needs to know about a task's inputs and outputs."""

    name: str
    input_kind: Literal["tokens", "vectors"]
    seq_len: int
    #: number of scored positions per sequence
    n_scored: int
    #: categorical answers: size of the answer space; gaussian: 1
    answer_size: int
    output_kind: Literal["categorical", "gaussian"]
    #: default training loss: hard cross-entropy, soft cross-entropy on the posterior, Gaussian NLL
    loss: Literal["ce", "soft_ce", "gaussian_nll"]
    #: token tasks: vocabulary size including the reserved padding id
    vocab_size: int = 0
    pad_id: int = -1
    #: token ids whose embeddings correspond to the answers (for tied output heads), or None
    answer_token_ids: tuple[int, ...] | None = None
    #: vector tasks: dimension of each input vector
    input_dim: int = 0


@dataclass
class Batch:
    """A batch of sequences with the exact posterior at every scored position.

    Shapes: B sequences, T positions, P scored positions, A answers.
    ``positions`` and ``step`` are shared by every sequence of the batch.
    """

    inputs: torch.Tensor  # (B, T) long token ids, or (B, T, D) float32 vectors
    positions: torch.Tensor  # (P,) long: indices into T of the scored positions
    step: torch.Tensor  # (P,) long: k, the 1-based index of each prediction
    target: torch.Tensor  # (B, P): true answer index (long), or true value (float64)
    entropy: torch.Tensor  # (B, P) float64: entropy of the exact posterior, bits
    probs: torch.Tensor | None = None  # (B, P, A) float64: exact posterior (categorical)
    mean: torch.Tensor | None = None  # (B, P) float64: posterior predictive mean (gaussian)
    var: torch.Tensor | None = None  # (B, P) float64: posterior predictive variance (gaussian)
    latent: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(self.inputs.shape[0])

    def to(self, device: torch.device | str) -> Batch:
        def move(x):
            return x.to(device) if isinstance(x, torch.Tensor) else x

        kw = {f.name: move(getattr(self, f.name)) for f in fields(self) if f.name != "latent"}
        return Batch(**kw, latent={k: move(v) for k, v in self.latent.items()})


@dataclass(frozen=True)
class HypothesisSpace:
    """How many latent hypotheses a sequence may come from, and why memorising fails."""

    log10_size: float  # log10 of the number of hypotheses (inf for continuous spaces)
    description: str

    def __str__(self) -> str:
        if math.isinf(self.log10_size):
            return f"continuous ({self.description})"
        if self.log10_size < 6:
            return f"{10 ** self.log10_size:,.0f} ({self.description})"
        return f"~10^{self.log10_size:.1f} ({self.description})"


@dataclass
class Prediction:
    """A predictive distribution at every scored position: categorical or Gaussian."""

    probs: torch.Tensor | None = None  # (B, P, A)
    mean: torch.Tensor | None = None  # (B, P)
    var: torch.Tensor | None = None  # (B, P)


class Task(ABC):
    """A wind tunnel. Subclasses set ``name``, ``Config``, ``description`` and implement
    :meth:`spec`, :meth:`sample`, :meth:`hypothesis_space`, :meth:`baselines` and
    :meth:`token_names` (token tasks) or override :meth:`decode`."""

    name: ClassVar[str]
    Config: ClassVar[type[TaskConfig]]
    description: ClassVar[str] = ""
    #: names of the baselines :meth:`baselines` returns, besides "bayes"
    baseline_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: TaskConfig | None = None, **params: Any):
        if config is not None and params:
            raise ConfigError("pass either a config object or keyword parameters, not both")
        self.config = config if config is not None else self.Config.build(params, where=f"task '{self.name}'")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"

    # --- the contract -------------------------------------------------------------------
    @property
    @abstractmethod
    def spec(self) -> TaskSpec: ...

    @abstractmethod
    def sample(self, n: int, generator: torch.Generator) -> Batch:
        """``n`` fresh sequences, each with its own latent hypothesis, on the generator's device."""

    @abstractmethod
    def hypothesis_space(self) -> HypothesisSpace: ...

    def baselines(self, batch: Batch) -> dict[str, Prediction]:
        """Reference predictors at every scored position; always includes ``bayes``."""
        out = {"bayes": Prediction(probs=batch.probs, mean=batch.mean, var=batch.var)}
        out.update(self._baselines(batch))
        return out

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        return {}

    # --- presentation -------------------------------------------------------------------
    def token_names(self) -> list[str]:
        """Readable name of every token id (token tasks)."""
        raise NotImplementedError

    def decode(self, batch: Batch, i: int) -> list[str]:
        """Readable tokens of sequence ``i``."""
        names = self.token_names()
        return [names[t] for t in batch.inputs[i].tolist()]

    def answer_names(self) -> list[str]:
        """Readable name of every answer index."""
        ids = self.spec.answer_token_ids
        names = self.token_names()
        return [names[t] for t in ids] if ids is not None else [str(a) for a in range(self.spec.answer_size)]

    def latent_json(self, batch: Batch, i: int) -> dict[str, Any]:
        return {k: v[i].tolist() for k, v in batch.latent.items()}

    # --- what the geometry analyses ask of a task ---------------------------------------
    #: sequences alternate key and value tokens (keys at even, values at odd positions) and are
    #: scored at the keys, so every earlier value token is an answer already used: the attention
    #: analysis then splits each key's attention into self / earlier keys / earlier values
    alternates_keys_values: ClassVar[bool] = False

    def hypothesis_tokens(self) -> tuple[list[int], str] | None:
        """Token ids whose keys should form the hypothesis frame (the key-frame analysis), and
        what they are; None when the task has none (vector inputs). Default: the answer tokens
        (``spec.answer_token_ids``) of a token task that has at least two."""
        spec = self.spec
        if spec.input_kind != "tokens" or spec.answer_token_ids is None or len(spec.answer_token_ids) < 2:
            return None
        return list(spec.answer_token_ids), "the answer tokens"

    def value_tokens(self) -> tuple[list[int], str] | None:
        """Further tokens the key-frame analysis measures beside :meth:`hypothesis_tokens`: the
        tokens that show the answers in the context, when they are other tokens than the
        hypothesis tokens (the attention must tell them apart to know which answers are used);
        None when there are none. Default: None."""
        return None

    def state_labels(self, batch: Batch) -> tuple[torch.Tensor, int, str] | None:
        """A discrete latent state at every scored position, to cluster the model's states by:
        labels (B, P) long in 0..k-1, k and what they are; None when the task has none (Gaussian
        tasks). Default: the argmax of the exact posterior over the answers (ties to the lowest)."""
        if batch.probs is None:
            return None
        return (batch.probs.argmax(-1), int(batch.probs.shape[-1]),
                "argmax of the exact posterior (ties to the lowest answer)")

    @property
    def length(self) -> int | None:
        """The value of the task's length parameter (``Config.length_field``), or None."""
        f = self.Config.length_field
        return None if f is None else int(getattr(self.config, f))

    def length_test(self) -> tuple[int, ...]:
        """Lengths (values of the length parameter, the task's own included) at which the
        ablation analysis re-evaluates the model with its top attention layers removed (Paper I's
        length test); empty when the task asks for none. Default: none."""
        return ()

    def with_length(self, length: int) -> Task:
        """The same task with a different sequence length (for length generalisation)."""
        f = self.Config.length_field
        if f is None:
            raise ConfigError(f"task '{self.name}' has no length parameter")
        return type(self)(self.config.replace(**{f: length}))

    # --- helpers for subclasses ---------------------------------------------------------
    @staticmethod
    def _check_n(n: int) -> None:
        if not isinstance(n, int) or n < 1:
            raise ConfigError(f"n (number of sequences) must be a positive integer, got {n!r}")


# ---------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------
TASKS: Registry[type[Task]] = Registry("task")
register_task = TASKS.register
task_names = TASKS.names
task_class = TASKS.get


def make_task(name: str, params: dict[str, Any] | None = None, preset: str | None = None, *,
              profile: str | None = None) -> Task:
    """Build a registered task from parameters, optionally starting from a named preset
    (``TaskConfig.presets``). ``profile`` is the deprecated name of ``preset``."""
    cls = task_class(name)
    preset = task_preset(preset, profile)
    merged: dict[str, Any] = {}
    if preset is not None:
        if preset not in cls.Config.presets:
            allowed = ", ".join(cls.Config.presets) or "none"
            raise ConfigError(f"unknown preset '{preset}' for task '{name}'; available: {allowed}")
        merged.update(cls.Config.presets[preset])
    merged.update(params or {})
    return cls(cls.Config.build(merged, where=f"task '{name}'"))


# ---------------------------------------------------------------------------------------
# Random streams
# ---------------------------------------------------------------------------------------
def stream_seed(seed: int, split: str) -> int:
    """A 63-bit seed for one split, derived with NumPy's SeedSequence so that the train,
    eval and probe streams of one base seed are independent and never the same stream."""
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    ss = np.random.SeedSequence(int(seed), spawn_key=(SPLITS.index(split),))
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


def make_generator(seed: int, split: str = "train", device: torch.device | str = "cpu") -> torch.Generator:
    """An explicit generator for one data stream (``split``) of a run on ``device``."""
    g = torch.Generator(device=device)
    g.manual_seed(stream_seed(seed, split))
    return g


def uniform_probs(shape: tuple[int, ...], size: int, device) -> torch.Tensor:
    """Uniform categorical probabilities of the given leading shape over ``size`` answers."""
    return torch.full((*shape, size), 1.0 / size, dtype=torch.float64, device=device)
