"""Mamba-2 (state space duality) through the Hugging Face ``transformers`` implementation.

The residual blocks and final norm of ``transformers.Mamba2Model`` (its pure-PyTorch chunked
scan runs on the CPU; ``mamba_ssm`` kernels are used on CUDA when installed) sit between the
shared input adapter and output head. ``transformers`` is imported only when a model is built.

Capture points: ``embed``, ``blocks.{i}.resid_post`` (B, T, d), ``final``.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from windtunnel.config import ConfigError, require
from windtunnel.models.base import ModelConfig, Tap, WindModel, register_model
from windtunnel.tasks.base import TaskSpec


class Mamba2Config(ModelConfig):
    n_layers: int = Field(6, ge=1, le=128)
    d_model: int = Field(192, ge=1, le=16384)
    d_state: int = Field(16, ge=1, le=256)
    d_conv: int = Field(4, ge=1, le=16)
    expand: int = Field(2, ge=1, le=8)
    head_dim: int = Field(16, ge=1, le=256, description="SSM head size; expand * d_model must be a multiple")
    n_groups: int = Field(1, ge=1, le=64, description="groups sharing B and C; must divide the head count")
    chunk_size: int = Field(64, ge=1, le=4096, description="length of the chunks of the SSD scan")
    pos_embed: bool = Field(False, description="add learned absolute position embeddings")

    @property
    def has_position_table(self) -> bool:
        return self.pos_embed

    @property
    def n_heads(self) -> int:
        return self.expand * self.d_model // self.head_dim

    def resolve(self, spec: TaskSpec) -> Mamba2Config:
        cfg = super().resolve(spec)
        if (cfg.expand * cfg.d_model) % cfg.head_dim:
            raise ConfigError(f"expand * d_model = {cfg.expand * cfg.d_model} must be a multiple of "
                              f"head_dim {cfg.head_dim}")
        if cfg.n_heads % cfg.n_groups:
            raise ConfigError(f"n_groups {cfg.n_groups} must divide the number of heads {cfg.n_heads}")
        return cfg

    def knob_step(self, knob: str) -> int:
        if knob != "d_model":
            return 1
        unit = self.head_dim * self.n_groups  # expand * d_model must be a multiple of this
        return unit // math.gcd(unit, self.expand)


def _transformers():
    return require("transformers", "llm", "model 'mamba2'")


@register_model
class Mamba2(WindModel):
    name = "mamba2"
    Config = Mamba2Config
    has_recurrent_state = True

    embed_first = False  # transformers' backbone draws its weights before the embedding, as it always did

    def build(self, c: Mamba2Config) -> None:
        hf = _transformers()
        backbone = hf.Mamba2Model(hf.Mamba2Config(
            vocab_size=1, hidden_size=c.d_model, num_hidden_layers=c.n_layers, state_size=c.d_state,
            conv_kernel=c.d_conv, expand=c.expand, head_dim=c.head_dim, num_heads=c.n_heads,
            n_groups=c.n_groups, chunk_size=c.chunk_size, initializer_range=0.02, use_cache=False,
            pad_token_id=None, bos_token_id=None, eos_token_id=None))
        self.blocks = backbone.layers  # the backbone's own embedding table is not used
        for block in self.blocks:  # a capture point on each of transformers' blocks (no parameters)
            block.resid_post = Tap()
        self.norm_f = backbone.norm_f

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block.resid_post(block(x))
        return self.norm_f(x)
