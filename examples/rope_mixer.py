"""Attention with rotary positions, written from docs/models.md alone: 4 layers of width 128, the
FFN width as its capacity knob (the hybrid's knob too), no position table.

    PYTHONPATH=examples windtunnel scorecard rope_mixer:RoPEMixer --dry-run
"""
import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from windtunnel.models import ModelConfig, Tap, WindModel


class RoPEMixerConfig(ModelConfig):
    n_layers: int = Field(4, ge=1, le=64, description="attention blocks")
    n_heads: int = Field(4, ge=1, le=64, description="heads per block (each of width d_model / n_heads, even)")
    d_model: int = Field(128, ge=8, le=4096, description="width of the residual stream")
    d_ffn: int = Field(512, ge=1, le=65536, description="FFN width: the capacity knob")

    @property
    def has_position_table(self) -> bool:  # positions enter as rotations of queries and keys
        return False

    def capacity_knob(self) -> str:
        return "d_ffn"


def rotate(x: torch.Tensor) -> torch.Tensor:
    """Rotary positions (Su et al. 2021): channel pairs of x (B, H, T, dh) turned by t * theta_i."""
    T, half = x.shape[-2], x.shape[-1] // 2
    theta = 10000.0 ** (-torch.arange(half, device=x.device, dtype=x.dtype) / half)
    angle = torch.arange(T, device=x.device, dtype=x.dtype)[:, None] * theta
    cos, sin, a, b = angle.cos(), angle.sin(), x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class RoPEBlock(nn.Module):
    """x + W_o attn(rope(q), rope(k), v) of LN(x), then x + FFN(LN(x)): a pre-norm block."""

    def __init__(self, c: RoPEMixerConfig):
        super().__init__()
        self.heads = c.n_heads
        self.norm1, self.norm2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model, bias=False)
        self.out = nn.Linear(c.d_model, c.d_model, bias=False)
        self.ffn = nn.Sequential(nn.Linear(c.d_model, c.d_ffn), nn.GELU(), nn.Linear(c.d_ffn, c.d_model))
        self.resid_post = Tap()  # blocks.{i}.resid_post

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = (y.view(B, T, self.heads, -1).transpose(1, 2) for y in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        z = F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True)  # causal: t sees 0 .. t
        x = x + self.out(z.transpose(1, 2).reshape(B, T, d))
        return self.resid_post(x + self.ffn(self.norm2(x)))


class RoPEMixer(WindModel):
    Config = RoPEMixerConfig

    def build(self, c):
        self.blocks = nn.ModuleList(RoPEBlock(c) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model)

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)
