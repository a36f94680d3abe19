"""Capture of activations by name, as TransformerLens's hook points: a :class:`Tap` records the value
passing through it into the :class:`Capture` of the
:meth:`~windtunnel.models.base.WindModel.run_with_cache` in progress (:data:`ACTIVE`, per thread)."""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar

import torch
from torch import nn


class Capture:
    """Activations recorded during one forward pass, keyed by capture name (detached)."""

    def __init__(self, names: Iterable[str] = ()):
        self.names = frozenset(names)
        self.store: dict[str, torch.Tensor] = {}

    def wants(self, name: str) -> bool:
        return name in self.names

    def put(self, name: str, value: torch.Tensor) -> None:
        if name in self.names:
            self.store[name] = value.detach()


NO_CAPTURE = Capture()
#: the capture that taps record into: that of the run_with_cache in progress (in this thread)
ACTIVE: ContextVar[Capture] = ContextVar("windtunnel_capture", default=NO_CAPTURE)


class Tap(nn.Module):
    """A capture point: the identity, recording its input under its own module path into the
    capture in progress (:meth:`WindModel.run_with_cache`), as TransformerLens's ``HookPoint``.

    ``self.pattern = Tap()`` in ``model.blocks[0].attn`` is the capture name
    ``blocks.0.attn.pattern``; ``pattern = self.pattern(pattern)`` records it. The model's
    capture names are its taps' paths (:meth:`WindModel.capture_names`), so a name is always
    where its value is taken. :attr:`wanted` says whether the capture in progress asks for this
    tap, to skip work only the capture needs. A tap has no parameters (state dicts are unchanged)
    and forward hooks on it see every value it passes."""

    def __init__(self, name: str | None = None):
        super().__init__()
        self.fixed = name is not None  # named by its value (embed, final), not by its path
        self.name: str | None = name  # its path in the model, set by WindModel.taps(), unless fixed

    @property
    def wanted(self) -> bool:
        return ACTIVE.get().wants(self.name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ACTIVE.get().put(self.name, x)
        return x

    def extra_repr(self) -> str:
        return repr(self.name) if self.name else ""
