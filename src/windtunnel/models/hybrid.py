"""A hybrid that interleaves the transformer's attention blocks with Mamba blocks (as Jamba,
Lieber et al. 2024, and Samba, Ren et al. 2024, mix attention and state space layers).

``layout`` names the kinds of one period of layers, repeated to ``n_layers``: ``A`` is the
transformer's pre-norm block (attention + FFN), ``M`` is the Mamba residual block. No position
table by default: the Mamba layers carry the order (``pos_embed`` adds one).

Capture points: ``embed``; ``blocks.{i}.attn.q|k|v|pattern|z`` at attention layers,
``blocks.{i}.ssm.dt|B|C`` at Mamba layers; ``blocks.{i}.resid_post`` at every layer; ``final``.
Initialisation: the embeddings and the attention blocks follow ``init``; the Mamba blocks keep
their own, as in ``mamba``.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from windtunnel.models.base import WindModel, init_normal, make_norm, register_model
from windtunnel.models.mamba import MambaBlock, MambaConfig
from windtunnel.models.transformer import Block, TransformerConfig
from windtunnel.tasks.base import TaskSpec


class HybridConfig(TransformerConfig, MambaConfig):
    """The transformer's fields (attention and FFN) and Mamba's (the SSM), plus the layout."""

    layout: str = Field("MA", min_length=1, max_length=128, pattern=r"^[AM]+$",
                        description="layer kinds, repeated to n_layers: A attention + FFN block, M Mamba block")
    norm: Literal["layernorm", "rmsnorm"] = Field("rmsnorm", description="norm of the attention blocks and the final norm")

    def capacity_knob(self) -> str:
        # d_model moves in steps of n_heads, each changing the count by several percent
        return "d_ffn"

    @property
    def kinds(self) -> str:
        """The kind of every layer, e.g. 'MAMA' for layout 'MA' and 4 layers."""
        return (self.layout * self.n_layers)[: self.n_layers]


@register_model
class Hybrid(WindModel):
    name = "hybrid"
    Config = HybridConfig
    #: Mamba layers carry a recurrent state; attention sits at some layers only and has no
    #: head mask or bypass, so the attention analyses and ablations do not apply
    has_recurrent_state = True

    def build(self, c: HybridConfig) -> None:
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(Block(c) if kind == "A" else MambaBlock(c) for kind in c.kinds)
        self.norm = make_norm(c.norm, c.d_model, c.norm_eps)

    def __init__(self, spec: TaskSpec, config: HybridConfig | None = None, **params):
        super().__init__(spec, config, **params)
        c = self.config
        if c.init == "normal":
            for block in self.blocks:
                if isinstance(block, Block):
                    block.apply(init_normal)
            self.head.apply(init_normal)
        if c.embed_std is not None:  # the embedding's scale alone, as the transformer's
            self.embed.redraw_tokens(c.embed_std)

    def head_bias(self) -> bool:
        return self.config.bias

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)
