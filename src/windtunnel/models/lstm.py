"""Stacked LSTM (Paper I v3, section 2.3): embed (+ optional positions), n_layers LSTM layers with
dropout between them (as ``nn.LSTM(num_layers=n)``), LayerNorm, head.

Capture points: ``embed``, ``layers.{i}.hidden`` (B, T, d: the output of LSTM layer i), ``final``.
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from windtunnel.models.base import Capture, InputAdapter, ModelConfig, OutputHead, WindModel, register_model
from windtunnel.tasks.base import TaskSpec


class LSTMConfig(ModelConfig):
    n_layers: int = Field(6, ge=1, le=64)
    d_model: int = Field(192, ge=1, le=16384)
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout between LSTM layers")
    pos_embed: bool = Field(False, description="add learned absolute position embeddings")

    @property
    def has_position_table(self) -> bool:
        return self.pos_embed


@register_model
class LSTM(WindModel):
    name = "lstm"
    Config = LSTMConfig

    def __init__(self, spec: TaskSpec, config: LSTMConfig | None = None, **params):
        super().__init__(spec, config, **params)
        c = self.config
        self.embed = InputAdapter(spec, c.d_model, c.max_len if c.pos_embed else None, c.init)
        # one nn.LSTM per layer (same parameters as a stacked one) so every layer can be captured
        self.layers = nn.ModuleList(nn.LSTM(c.d_model, c.d_model, batch_first=True) for _ in range(c.n_layers))
        self.drop = nn.Dropout(c.dropout)
        self.norm = nn.LayerNorm(c.d_model)
        self.head = OutputHead(spec, c.d_model, tied=c.tie_head)

    def capture_names(self) -> list[str]:
        return ["embed"] + [f"layers.{i}.hidden" for i in range(self.config.n_layers)] + ["final"]

    def mix(self, x: torch.Tensor, cache: Capture) -> torch.Tensor:
        for i, lstm in enumerate(self.layers):
            if i:
                x = self.drop(x)
            x, _ = lstm(x)
            cache.put(f"layers.{i}.hidden", x)
        return self.norm(x)
