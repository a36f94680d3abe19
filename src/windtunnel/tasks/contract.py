"""The check that a user's task keeps the Task contract.

A task is named by its registered name (``hmm``) or, for a user's own wind tunnel, by
``package.module:Class``: the task registry (:data:`~windtunnel.tasks.base.TASKS`, see
:mod:`windtunnel.registry`) imports the module, checks that ``Class`` is a
:class:`~windtunnel.tasks.base.Task` subclass, names it as written and runs :func:`check_task`
on it once. Run configs store the name as written, so a run folder of a user task opens
wherever that module is importable.

:func:`check_task` builds the task with its default parameters and samples a tiny batch from a
seeded generator, twice: what the trainer, the evaluation and the analyses rely on (shapes,
dtypes, normalised posteriors, entropies in bits, reproducible streams) must hold. A failure is
one :class:`~windtunnel.config.ConfigError` that names the task and the broken rule.
"""

from __future__ import annotations

import inspect

import torch

from windtunnel.config import ConfigError
from windtunnel.infotheory import entropy_bits, gaussian_entropy_bits
from windtunnel.tasks.base import Batch, Task, TaskConfig, TaskSpec

#: sequences in the batch the check samples
N_CHECK = 4


def check_task(cls: type[Task], seed: int = 0, atol: float = 1e-6) -> None:
    """Raise ConfigError naming the first rule of the Task contract that ``cls`` breaks.

    Rules: a ``Config`` (:class:`~windtunnel.tasks.base.TaskConfig` subclass) whose defaults
    build; ``spec``, ``sample`` and ``hypothesis_space`` implemented; ``spec`` a
    :class:`~windtunnel.tasks.base.TaskSpec` that fits itself; ``sample(n, generator)`` a
    :class:`~windtunnel.tasks.base.Batch` of ``spec``'s shapes whose posterior rows are
    normalised (categorical) or whose variances are positive (Gaussian), with the entropy in bits
    of that posterior, drawn from the generator alone (the same seed gives the same batch)."""
    name = getattr(cls, "name", None) or cls.__qualname__

    def broken(rule: str) -> ConfigError:
        return ConfigError(f"task '{name}' breaks the Task contract: {rule} (see docs/tasks.md, 'Your own task')")

    config = getattr(cls, "Config", None)
    if not (inspect.isclass(config) and issubclass(config, TaskConfig)):
        raise broken("it needs a class attribute Config, a subclass of windtunnel.tasks.TaskConfig "
                     "(its fields are the task's parameters)")
    if inspect.isabstract(cls):
        raise broken(f"it does not implement {', '.join(sorted(cls.__abstractmethods__))}")
    try:
        task = cls()
    except ConfigError as exc:
        raise broken(f"it must build with its default parameters ({exc})") from None
    spec = task.spec
    if not isinstance(spec, TaskSpec):
        raise broken(f"spec must be a windtunnel.tasks.TaskSpec, got {type(spec).__name__}")
    _check_spec(spec, broken)

    batch = task.sample(N_CHECK, torch.Generator().manual_seed(seed))
    if not isinstance(batch, Batch):
        raise broken(f"sample(n, generator) must return a windtunnel.tasks.Batch, got {type(batch).__name__}")
    _check_batch(batch, spec, broken, atol)
    again = task.sample(N_CHECK, torch.Generator().manual_seed(seed))
    if not (isinstance(again, Batch) and again.inputs.shape == batch.inputs.shape
            and torch.equal(again.inputs, batch.inputs) and torch.equal(again.target, batch.target)):
        raise broken("sample must draw from the generator it is given alone: two generators with the same seed "
                     "gave different batches")


def _check_spec(spec: TaskSpec, broken) -> None:
    if spec.input_kind not in ("tokens", "vectors") or spec.output_kind not in ("categorical", "gaussian"):
        raise broken(f"spec.input_kind must be tokens or vectors and spec.output_kind categorical or gaussian, "
                     f"got {spec.input_kind!r} and {spec.output_kind!r}")
    if not 1 <= spec.n_scored <= spec.seq_len:
        raise broken(f"spec.n_scored must lie in 1..seq_len = {spec.seq_len}, got {spec.n_scored}")
    if spec.answer_size < 1:
        raise broken(f"spec.answer_size must be at least 1, got {spec.answer_size}")
    if (spec.loss == "gaussian_nll") != (spec.output_kind == "gaussian"):
        raise broken(f"spec.loss {spec.loss!r} does not fit spec.output_kind {spec.output_kind!r} "
                     "(gaussian_nll for gaussian outputs, ce or soft_ce for categorical ones)")
    if spec.input_kind == "tokens" and spec.vocab_size < 1:
        raise broken(f"a token task needs spec.vocab_size >= 1, got {spec.vocab_size}")
    if spec.input_kind == "vectors" and spec.input_dim < 1:
        raise broken(f"a vector task needs spec.input_dim >= 1, got {spec.input_dim}")


def _check_batch(b: Batch, spec: TaskSpec, broken, atol: float) -> None:
    B, T, P = N_CHECK, spec.seq_len, spec.n_scored

    def shape(field: str, x, want: tuple[int, ...]) -> None:
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != want:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise broken(f"batch.{field} must have shape {want} for sample({B}, ...) on spec "
                         f"(seq_len {T}, n_scored {P}), got {got}")

    if spec.input_kind == "tokens":
        shape("inputs", b.inputs, (B, T))
        if b.inputs.dtype != torch.long or int(b.inputs.min()) < 0 or int(b.inputs.max()) >= spec.vocab_size:
            raise broken(f"batch.inputs of a token task must be long ids in 0..{spec.vocab_size - 1} (spec.vocab_size)")
    else:
        shape("inputs", b.inputs, (B, T, spec.input_dim))
        if not b.inputs.is_floating_point():
            raise broken("batch.inputs of a vector task must be floating point")
    shape("positions", b.positions, (P,))
    shape("step", b.step, (P,))
    if b.positions.dtype != torch.long or int(b.positions.min()) < 0 or int(b.positions.max()) >= T:
        raise broken(f"batch.positions must be long indices into 0..{T - 1} (the scored positions)")
    shape("target", b.target, (B, P))
    shape("entropy", b.entropy, (B, P))
    if spec.output_kind == "categorical":
        shape("probs", b.probs, (B, P, spec.answer_size))
        probs = b.probs
        if probs.dtype != torch.float64:
            raise broken(f"batch.probs (the exact posterior) must be float64, got {probs.dtype}")
        sums = probs.sum(-1).flatten()
        worst = sums[(sums - 1).abs().argmax()].item()
        if not bool((probs >= 0).all()) or abs(worst - 1) > atol:
            raise broken("every posterior row of batch.probs must be normalised (non-negative, summing to 1); "
                         f"got a row summing to {worst:.6g} and a smallest entry {probs.min().item():.3g}")
        if b.target.dtype != torch.long or int(b.target.min()) < 0 or int(b.target.max()) >= spec.answer_size:
            raise broken(f"batch.target of a categorical task must be long answer indices in 0..{spec.answer_size - 1}")
        want = entropy_bits(probs)
    else:
        shape("mean", b.mean, (B, P))
        shape("var", b.var, (B, P))
        if not bool((b.var > 0).all()):
            raise broken("batch.var (the posterior predictive variance) must be positive")
        want = gaussian_entropy_bits(b.var)
    if not torch.allclose(b.entropy.double(), want.double(), atol=1e-6, rtol=1e-6):
        raise broken("batch.entropy must be the entropy of the exact posterior in bits")
