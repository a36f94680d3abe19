"""The check that a model keeps the contract, on a task's shapes.

A model is named by its registered name (``transformer``) or, for a user's own architecture,
by ``package.module:Class``: the model registry (:data:`~windtunnel.models.base.MODELS`, see
:mod:`windtunnel.registry`) imports the module (that runs the user's code: it is the user's
choice, made by writing the name) and checks that ``Class`` is a
:class:`~windtunnel.models.base.WindModel` subclass with a ``Config``
(:class:`~windtunnel.models.base.ModelConfig` subclass):
:func:`~windtunnel.models.base.check_model_class`. Run configs store the name as written, so a
run folder of a user model opens wherever that module is importable; nothing in a run folder is
ever executed (configs are JSON, weights safetensors).

:func:`check_model` runs a model built on a task (``make_model`` runs it on every user model
it builds) and tests what the rest of windtunnel relies on:
``forward(inputs, positions)``, the output shapes, causality, and the capture points ``embed``
and ``final``. Every failure is a :class:`~windtunnel.config.ConfigError` that names what is
missing. It needs nothing of :mod:`windtunnel.models.base` (any ``nn.Module`` with
``forward``, ``capture_names`` and ``run_with_cache`` can be checked), so the base module
imports it, never the other way round.
"""

from __future__ import annotations

import torch

from windtunnel.config import ConfigError
from windtunnel.tasks.base import TaskSpec


def _inputs(spec: TaskSpec, batch: int, generator: torch.Generator) -> torch.Tensor:
    if spec.input_kind == "tokens":
        hi = spec.vocab_size - (1 if spec.pad_id == spec.vocab_size - 1 else 0)
        return torch.randint(0, hi, (batch, spec.seq_len), generator=generator)
    return torch.randn(batch, spec.seq_len, spec.input_dim, generator=generator)


@torch.no_grad()
def check_model(model: torch.nn.Module, spec: TaskSpec, seed: int = 0, atol: float = 1e-5) -> None:
    """Raise ConfigError naming the first broken part of the model contract on ``spec``'s shapes.

    Checks: ``forward(inputs)`` gives (B, T, O) and ``forward(inputs, positions)`` (B, P, O) equal
    to the full output at those positions; a change of the input at position t leaves every
    output before t unchanged (causality; tested at three positions); ``capture_names()``
    includes ``embed`` and ``final`` and ``run_with_cache`` returns them."""
    name = getattr(model, "name", type(model).__name__)
    gen = torch.Generator().manual_seed(seed)
    out_size = spec.answer_size if spec.output_kind == "categorical" else 2
    x = _inputs(spec, 2, gen)
    was_training = model.training
    model.eval()
    try:
        y = model(x)
        want = (2, spec.seq_len, out_size)
        if not isinstance(y, torch.Tensor) or tuple(y.shape) != want:
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ConfigError(f"model '{name}': forward(inputs) must return shape (B, T, O) = {want} on task "
                              f"'{spec.name}' (O = {out_size}: {spec.output_kind} answers), got {got}")
        pos = torch.tensor(sorted({0, spec.seq_len // 2, spec.seq_len - 1}))
        yp = model(x, pos)
        if tuple(yp.shape) != (2, len(pos), out_size) or not torch.allclose(yp, y[:, pos], atol=atol, rtol=0):
            raise ConfigError(f"model '{name}': forward(inputs, positions) must equal forward(inputs)[:, positions], "
                              f"shape (B, P, O) = {(2, len(pos), out_size)}")
        for t in sorted({1, spec.seq_len // 2, spec.seq_len - 1}):
            x2 = x.clone()
            fresh = _inputs(spec, 2, gen)
            x2[:, t:] = fresh[:, t:]
            y2 = model(x2)
            moved = (y2[:, :t] - y[:, :t]).abs().max().item()
            if moved > atol:
                raise ConfigError(f"model '{name}' is not causal: changing the input from position {t} on moved "
                                  f"an output before it by {moved:.3g}; position t may only see inputs 0..t")
        names = list(model.capture_names())
        lacking = [n for n in ("embed", "final") if n not in names]
        if lacking:
            raise ConfigError(f"model '{name}': capture_names() must include {', '.join(lacking)} "
                              "(the embedded inputs and the final states before the head)")
        _, cache = model.run_with_cache(x, ["embed", "final"])
        absent = [n for n in ("embed", "final") if n not in cache]
        if absent:
            raise ConfigError(f"model '{name}': run_with_cache did not record {', '.join(absent)} "
                              "(WindModel.forward taps them; a forward of its own "
                              "passes them through self.embed_tap and self.final_tap)")
    finally:
        model.train(was_training)
