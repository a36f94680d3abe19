"""Stacked LSTM (Paper I v3, section 2.3): embed (+ optional positions), n_layers LSTM layers with
dropout between them (as ``nn.LSTM(num_layers=n)``), LayerNorm, head; and the same stack of GRU
layers (Cho et al. 2014), ``gru``.

Capture points: ``embed``, ``blocks.{i}.resid_post`` (B, T, d: the output of recurrent layer i; the
one per-layer name of every architecture, ``layers.{i}.hidden`` before), ``final``. The recurrent
layers are still the module list ``layers`` (the parameter names of saved checkpoints are
unchanged); ``blocks`` holds only each layer's capture point, a parameter-free :class:`LayerTaps`.
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from windtunnel.models.base import ModelConfig, Tap, WindModel, register_model


class LSTMConfig(ModelConfig):
    n_layers: int = Field(6, ge=1, le=64)
    d_model: int = Field(192, ge=1, le=16384)
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout between recurrent layers")
    pos_embed: bool = Field(False, description="add learned absolute position embeddings")

    @property
    def has_position_table(self) -> bool:
        return self.pos_embed


class GRUConfig(LSTMConfig):
    pass


class LayerTaps(nn.Module):
    """The capture point of one recurrent layer, ``resid_post`` (its output)."""

    def __init__(self):
        super().__init__()
        self.resid_post = Tap()


class RecurrentStack(WindModel):
    """One ``cell`` module (``nn.LSTM`` or ``nn.GRU``) per layer: the same parameters as a stacked
    one, so that every layer can be captured."""

    cell: type[nn.Module]
    has_recurrent_state = True

    def build(self, c: LSTMConfig | GRUConfig) -> None:
        self.layers = nn.ModuleList(self.cell(c.d_model, c.d_model, batch_first=True) for _ in range(c.n_layers))
        self.blocks = nn.ModuleList(LayerTaps() for _ in range(c.n_layers))
        self.drop = nn.Dropout(c.dropout)
        self.norm = nn.LayerNorm(c.d_model)

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        for i, (layer, taps) in enumerate(zip(self.layers, self.blocks, strict=True)):
            if i:
                x = self.drop(x)
            x = taps.resid_post(layer(x)[0])
        return self.norm(x)


@register_model
class LSTM(RecurrentStack):
    name = "lstm"
    Config = LSTMConfig
    cell = nn.LSTM


@register_model
class GRU(RecurrentStack):
    name = "gru"
    Config = GRUConfig
    cell = nn.GRU
