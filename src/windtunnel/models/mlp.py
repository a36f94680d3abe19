"""Attention-free MLP baselines (Paper I, section 2.2), two variants:

``per_position``: the authors' control. Token + position embedding, n_layers residual blocks
x + FFN(LN(x)) with FFN = Linear(d_model, d_ffn) -> GELU -> Linear(d_ffn, d_model), final norm,
head. Nothing mixes positions, so each output sees only its own token and index.

``prefix``: the capacity-matched MLP that sees the whole context. For output position p the
d_embed-dimensional embeddings of tokens 0..p (zeros in the slots after p) are flattened to
max_len * d_embed values, mapped by Linear to ``width``, then n_layers residual layers
x + GELU(Linear(LN(x))) (the paper's "residual Linear + LN layers"), final norm, head. The first
Linear of a zero-padded prefix is a prefix sum of per-slot contributions, so all positions are
computed in one pass (and the deep layers only at the requested positions).

Capture points: ``embed``, ``blocks.{i}.resid_post``, ``final``; for ``prefix`` the last two are
(B, P, width) when positions are given.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from windtunnel.config import ConfigError
from windtunnel.models.base import ModelConfig, Tap, WindModel, register_model
from windtunnel.models.transformer import FeedForward
from windtunnel.tasks.base import TaskSpec


class MLPConfig(ModelConfig):
    variant: Literal["per_position", "prefix"] = "per_position"
    n_layers: int | None = Field(None, ge=1, le=256, description="default 9 (per_position) or 18 (prefix)")
    d_model: int = Field(192, ge=1, le=16384, description="per_position: residual width")
    d_ffn: int = Field(768, ge=1, le=65536, description="per_position: hidden width of each block")
    width: int = Field(384, ge=1, le=16384, description="prefix: residual width")
    d_embed: int = Field(32, ge=1, le=1024, description="prefix: token embedding size per slot")

    def resolve(self, spec: TaskSpec) -> MLPConfig:
        cfg = super().resolve(spec)
        if cfg.variant == "prefix" and cfg.tie_head:
            raise ConfigError("tie_head=True is not available for the prefix MLP (its width is not d_embed)")
        if cfg.n_layers is None:
            cfg = cfg.replace(n_layers=9 if cfg.variant == "per_position" else 18)
        return cfg

    def capacity_knob(self) -> str:
        return "d_ffn" if self.variant == "per_position" else "width"


class ResidualFFN(nn.Module):
    """x + FFN(LN(x))."""

    def __init__(self, d: int, d_ffn: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ffn = FeedForward(d, d_ffn)
        self.resid_post = Tap()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resid_post(x + self.ffn(self.norm(x)))


class ResidualLinear(nn.Module):
    """x + GELU(Linear(LN(x)))."""

    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)
        self.resid_post = Tap()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resid_post(x + F.gelu(self.fc(self.norm(x))))


@register_model
class MLP(WindModel):
    name = "mlp"
    Config = MLPConfig

    def build(self, c: MLPConfig) -> None:
        if c.variant == "per_position":
            self.blocks = nn.ModuleList(ResidualFFN(c.d_model, c.d_ffn) for _ in range(c.n_layers))
        else:
            self.inp = nn.Linear(c.max_len * c.d_embed, c.width)
            self.blocks = nn.ModuleList(ResidualLinear(c.width) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(self.head_width())

    def embed_width(self) -> int:
        return self.config.d_model if self.config.variant == "per_position" else self.config.d_embed

    def head_width(self) -> int:
        return self.config.d_model if self.config.variant == "per_position" else self.config.width

    def position_rows(self) -> int | None:
        return self.config.max_len if self.config.variant == "per_position" else None  # the prefix's slots are its positions

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def forward(self, inputs: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        if self.config.variant == "per_position":
            return super().forward(inputs, positions)
        e = self.embed_tap(self.embed(inputs))  # (B, T, d_embed)
        T, max_len = e.shape[1], self.config.max_len
        if T > max_len:
            raise ValueError(f"input length {T} exceeds the prefix MLP's context (max_len {max_len})")
        slots = self.inp.weight.view(self.config.width, max_len, -1)[:, :T]  # (width, T, d_embed)
        h = torch.einsum("btd,wtd->btw", e, slots).cumsum(1) + self.inp.bias
        if positions is not None:
            h = h[:, positions]
        return self.head(self.final_tap(self.mix(h)))
