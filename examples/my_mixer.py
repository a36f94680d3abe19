"""A user's own sequence mixer, kept outside the windtunnel package (docs/models.md).

    PYTHONPATH=examples windtunnel scorecard my_mixer:EMAMixer
"""
import torch
from pydantic import Field
from torch import nn

from windtunnel.models import ModelConfig, Tap, WindModel


class EMAMixerConfig(ModelConfig):
    n_layers: int = Field(2, ge=1, le=64, description="mixer blocks")
    d_model: int = Field(128, ge=8, le=4096, description="width: the capacity knob")


class EMABlock(nn.Module):
    """x + W_o(ema(u) * sigmoid(g)), (u, g) = W_i LN(x): a gated per-channel moving average."""

    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.inp = nn.Linear(d, 2 * d)
        self.decay = nn.Parameter(torch.linspace(-2.0, 3.0, d))  # sigmoid: decays 0.12 .. 0.95
        self.out = nn.Linear(d, d)
        self.resid_post = Tap()  # a capture point, named by its path: blocks.{i}.resid_post

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, g = self.inp(self.norm(x)).chunk(2, dim=-1)
        a, h, states = torch.sigmoid(self.decay), torch.zeros_like(u[:, 0]), []
        for t in range(u.shape[1]):  # causal: h_t sees u_0 .. u_t only
            h = a * h + (1 - a) * u[:, t]
            states.append(h)
        return self.resid_post(x + self.out(torch.stack(states, 1) * torch.sigmoid(g)))


class EMAMixer(WindModel):
    Config = EMAMixerConfig
    # capabilities the geometry reads (docs/models.md): the moving average is a state carried
    # from position to position; no attention, no head ablation; the final norm is `norm`
    has_recurrent_state = True

    def build(self, c):  # the blocks; the base class builds the embedding before and the head after
        self.blocks = nn.ModuleList(EMABlock(c.d_model) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model)

    def mix(self, x: torch.Tensor) -> torch.Tensor:  # capture names: embed, the taps' paths, final
        for block in self.blocks:
            x = block(x)
        return self.norm(x)
