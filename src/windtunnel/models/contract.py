"""Models from outside the package, and the check that a model keeps the contract.

A model is named by its registered name (``transformer``) or, for a user's own architecture,
by ``package.module:Class``: the module is imported (that runs the user's code: it is the
user's choice, made by writing the name) and ``Class`` must be a
:class:`~windtunnel.models.base.WindModel` subclass with a ``Config``
(:class:`~windtunnel.models.base.ModelConfig` subclass). Run configs store the name as
written, so a run folder of a user model opens wherever that module is importable; nothing
in a run folder is ever executed (configs are JSON, weights safetensors).

:func:`check_model` builds a model on a task and tests what the rest of windtunnel relies
on: ``forward(inputs, positions)``, the output shapes, causality, and the capture points
``embed`` and ``final``. Every failure is a :class:`~windtunnel.config.ConfigError` that
names what is missing.
"""

from __future__ import annotations

import importlib
import inspect
import re

import torch

from windtunnel.config import ConfigError
from windtunnel.tasks.base import TaskSpec

#: ``package.module:Class``
USER_MODEL = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


def is_user_model(name: str) -> bool:
    return ":" in name


def load_user_model(name: str) -> type:
    """The class named ``package.module:Class`` (imports the module), checked to be a WindModel."""
    from windtunnel.models.base import ModelConfig, WindModel

    if not USER_MODEL.match(name):
        raise ConfigError(f"model '{name}' is not a registered name nor package.module:Class")
    module_name, _, cls_name = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"model '{name}': cannot import module '{module_name}' ({exc}); "
                          "it must be importable (installed, or on PYTHONPATH)") from None
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise ConfigError(f"model '{name}': module '{module_name}' has no attribute '{cls_name}'")
    if not (inspect.isclass(cls) and issubclass(cls, WindModel)):
        raise ConfigError(f"model '{name}' must be a subclass of windtunnel.models.WindModel "
                          f"(got {cls!r}); see docs/models.md, 'Bring your own architecture'")
    config = getattr(cls, "Config", None)
    if not (inspect.isclass(config) and issubclass(config, ModelConfig)):
        raise ConfigError(f"model '{name}' needs a class attribute Config, a subclass of "
                          "windtunnel.models.ModelConfig (its fields are the model's parameters)")
    missing = [m for m in ("mix", "capture_names") if getattr(cls, m) is getattr(WindModel, m)]
    if missing and "_run" not in vars(cls):
        raise ConfigError(f"model '{name}' does not implement {' and '.join(missing)} "
                          "(mix: embedded inputs (B, T, d) -> states (B, T, d), causally; capture_names: a list)")
    if "positions" not in inspect.signature(cls.forward).parameters:
        raise ConfigError(f"model '{name}': forward must accept (inputs, positions=None)")
    cls.name = name  # run configs, tables and folders name it as the user wrote it
    return cls


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
                              "(call cache.put(name, tensor) where they are computed)")
    finally:
        model.train(was_training)
