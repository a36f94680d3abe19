"""Causal pre-norm transformer decoder with learned absolute positions (Paper I, section 2.1),
and ``swa_transformer``, the same with sliding-window attention.

Capture points (TransformerLens names): ``embed``, ``blocks.{i}.attn.q|k|v|z`` (B, H, T, dh),
``blocks.{i}.attn.pattern`` (B, H, T, T), ``blocks.{i}.resid_post`` (B, T, d), ``final``.
Ablations: the ``head_mask`` buffer (n_layers, n_heads) multiplies each head's output ``z``
before W_O, and :meth:`Transformer.set_bypass` skips a block, its attention or its FFN.
Capabilities (:class:`~windtunnel.models.base.WindModel`): attention, head ablation, key and
OV weights from the fused QKV layout, ``norm1`` before each attention, ``norm`` as the final norm.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from windtunnel.config import ConfigError
from windtunnel.models.base import (
    ModelConfig,
    Tap,
    WindModel,
    init_normal,
    make_norm,
    register_model,
)
from windtunnel.tasks.base import TaskSpec

Bypass = Literal["block", "attn", "ffn"]


class TransformerConfig(ModelConfig):
    n_layers: int = Field(6, ge=1, le=128)
    n_heads: int = Field(6, ge=1, le=256)
    d_model: int = Field(192, ge=1, le=16384)
    d_ffn: int | None = Field(None, ge=1, description="FFN width; default 4 * d_model")
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    norm_eps: float = Field(1e-5, gt=0.0, le=0.1, description="epsilon of every norm (the authors' RMSNorm: 1e-6)")
    bias: bool = Field(True, description="biases in the FFN and an untied head (the attention has none; the authors' "
                                         "TinyGPT has none anywhere)")
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    embed_std: float | None = Field(
        None, gt=0.0, le=10.0, description="the token embedding redrawn from N(0, embed_std) after the init, every "
                                           "other weight as `init` draws it (None: as `init` draws it); 1.0 gives "
                                           "init=torch's embedding scale alone")

    def resolve(self, spec: TaskSpec) -> TransformerConfig:
        cfg = super().resolve(spec)
        if cfg.d_model % cfg.n_heads:
            raise ConfigError(f"d_model {cfg.d_model} must be a multiple of n_heads {cfg.n_heads}")
        return cfg if cfg.d_ffn is not None else cfg.replace(d_ffn=4 * cfg.d_model)

    def knob_step(self, knob: str) -> int:
        return self.n_heads if knob == "d_model" else 1


class FeedForward(nn.Module):
    """Linear(d, d_ffn) -> GELU -> Linear(d_ffn, d) -> dropout."""

    def __init__(self, d: int, d_ffn: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.fc1 = nn.Linear(d, d_ffn, bias=bias)
        self.fc2 = nn.Linear(d_ffn, d, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(F.gelu(self.fc1(x))))


def causal_mask(T: int, window: int | None = None, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool, True where query t may attend to key s: s <= t, and t - s < ``window`` if given."""
    t = torch.arange(T, device=device)
    lag = t[:, None] - t[None, :]
    return (lag >= 0) & (lag < window) if window is not None else lag >= 0


class Attention(nn.Module):
    """Multi-head causal self-attention with fused QKV and no biases, optionally restricted to a
    sliding window of the last ``window`` positions (the query's own included).

    Uses ``scaled_dot_product_attention`` unless the pattern is captured, which needs the
    explicit softmax(QK^T / sqrt(dh)) path; both give the same outputs. Subclasses (other token
    mixers with heads) override :meth:`heads` and :meth:`attend` and keep the head mask, the
    capture points (the taps ``q``, ``k``, ``v``, ``pattern``, ``z``; a subclass adds its own)
    and the output projection."""

    def __init__(self, cfg: TransformerConfig, window: int | None = None):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.window = window
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.dropout = cfg.dropout
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.q, self.k, self.v, self.pattern, self.z = (Tap() for _ in range(5))

    def split(self, y: torch.Tensor) -> torch.Tensor:
        """(B, T, n * d) -> n tensors (B, H, T, dh), stacked on a leading axis."""
        B, T, _ = y.shape
        return y.view(B, T, -1, self.n_heads, self.proj.in_features // self.n_heads).permute(2, 0, 3, 1, 4)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """q, k, v (B, H, T, dh) of the normed block input x (B, T, d)."""
        return tuple(self.split(self.qkv(x)))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Each head's output z (B, H, T, dh)."""
        T = x.shape[1]
        p = self.dropout if self.training else 0.0
        windowed = self.window is not None and self.window < T
        if self.pattern.wanted:
            scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
            pattern = self.pattern(scores.masked_fill(~causal_mask(T, self.window, x.device), float("-inf")).softmax(-1))
            return F.dropout(pattern, p, self.training) @ v
        if windowed:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T, self.window, x.device),
                                                  dropout_p=p)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

    def forward(self, x: torch.Tensor, head_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.heads(x)
        z = self.attend(q, k, v, x)
        if head_mask is not None:
            z = z * head_mask[:, None, None]
        q, k, v, z = self.q(q), self.k(k), self.v(v), self.z(z)
        return self.resid_drop(self.proj(z.transpose(1, 2).reshape(B, T, d)))


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + ffn(norm(x))."""

    def __init__(self, cfg: TransformerConfig, attn: nn.Module | None = None):
        super().__init__()
        self.norm1 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        self.attn = attn if attn is not None else Attention(cfg)
        self.norm2 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ffn, cfg.dropout, cfg.bias)
        self.resid_post = Tap()

    def forward(self, x: torch.Tensor, head_mask: torch.Tensor | None = None, bypass: Bypass | None = None) -> torch.Tensor:
        if bypass not in ("block", "attn"):
            x = x + self.attn(self.norm1(x), head_mask)
        if bypass not in ("block", "ffn"):
            x = x + self.ffn(self.norm2(x))
        return self.resid_post(x)


@register_model
class Transformer(WindModel):
    """Causal decoder: embed + positions, pre-norm blocks, final norm, head. Init N(0, 0.02)
    (``init="torch"``: PyTorch's defaults)."""

    name = "transformer"
    Config = TransformerConfig
    mixer: type[nn.Module] = Attention  # the token mixer of every block (other mixers with heads: subclasses)
    has_attention = True
    has_head_ablation = True

    def build(self, c: TransformerConfig) -> None:
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(Block(c, self.make_attention(c)) for _ in range(c.n_layers))
        self.norm = make_norm(c.norm, c.d_model, c.norm_eps)

    def __init__(self, spec: TaskSpec, config: TransformerConfig | None = None, **params):
        super().__init__(spec, config, **params)
        c = self.config
        if c.init == "normal":
            self.apply(init_normal)
        for block in self.blocks:  # parameters with their own initialisation, under either scheme
            if hasattr(block.attn, "reset_special_parameters"):
                block.attn.reset_special_parameters()
        if c.embed_std is not None:  # the embedding's scale alone (drawn last: the other weights unchanged)
            self.embed.redraw_tokens(c.embed_std)
        self.register_buffer("head_mask", torch.ones(c.n_layers, c.n_heads), persistent=False)
        self.bypass: list[Bypass | None] = [None] * c.n_layers

    def head_bias(self) -> bool:
        return self.config.bias

    def make_attention(self, cfg: TransformerConfig) -> nn.Module:
        """The token mixer of one block."""
        return self.mixer(cfg)

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop(x)
        # On the CPU skip the multiply when no head is masked (checking costs nothing there);
        # on an accelerator always multiply, so that no device sync is needed.
        masked = self.head_mask.device.type != "cpu" or not bool(self.head_mask.all())
        for i, block in enumerate(self.blocks):
            x = block(x, self.head_mask[i] if masked else None, self.bypass[i])
        return self.norm(x)

    # --- capabilities --------------------------------------------------------------------
    def _qkv_block(self, layer: int, which: int) -> torch.Tensor:
        """(H, d_head, d) slice ``which`` (0 q, 1 k, 2 v) of layer ``layer``'s fused QKV weight, float64."""
        attn = self.blocks[layer].attn
        w = attn.qkv.weight.detach().double()
        d, H = w.shape[1], attn.n_heads
        return w[which * d : (which + 1) * d].reshape(H, d // H, d)

    def key_weights(self, layer: int) -> torch.Tensor | None:
        """W_K of every head, rows d + h*d_head .. d + (h+1)*d_head of the fused ``qkv.weight``."""
        return self._qkv_block(layer, 1)

    def ov_weights(self, layer: int) -> torch.Tensor | None:
        """W_O W_V of every head: head h reads the V block's rows h*d_head.. and writes through
        the output projection's columns h*d_head.."""
        wv = self._qkv_block(layer, 2)
        H, dh, d = wv.shape
        wo = self.blocks[layer].attn.proj.weight.detach().double().reshape(d, H, dh).permute(1, 0, 2)  # (H, d, dh)
        return wo @ wv

    def attention_norm(self, layer: int) -> nn.Module | None:
        return self.blocks[layer].norm1

    def attention_output(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        return self.blocks[layer].attn.proj(z)

    # --- ablations ---------------------------------------------------------------------
    def set_bypass(self, layer: int, what: Bypass | None) -> None:
        """Make block ``layer`` the identity ("block"), skip its attention ("attn") or its FFN
        ("ffn"); None restores it."""
        n = self.config.n_layers
        if not isinstance(layer, int) or not 0 <= layer < n:
            raise ConfigError(f"layer must be an integer in 0..{n - 1}, got {layer!r}")
        if what not in ("block", "attn", "ffn", None):
            raise ConfigError(f"bypass must be one of block, attn, ffn or None, got {what!r}")
        self.bypass[layer] = what

    def clear_ablations(self) -> None:
        """Unmask every head and remove every bypass."""
        self.head_mask.fill_(1.0)
        self.bypass = [None] * self.config.n_layers


# ---------------------------------------------------------------------------------------
# Sliding-window attention
# ---------------------------------------------------------------------------------------
class SWATransformerConfig(TransformerConfig):
    window: int = Field(16, ge=1, le=1 << 20, description="each query attends to the last `window` positions, "
                                                          "its own included")


@register_model
class SWATransformer(Transformer):
    """The transformer with every attention restricted to a sliding window (Beltagy et al. 2020,
    Longformer; Jiang et al. 2023, Mistral 7B). Same parameters, capture points and ablations."""

    name = "swa_transformer"
    Config = SWATransformerConfig

    def make_attention(self, cfg: SWATransformerConfig) -> nn.Module:
        return Attention(cfg, window=cfg.window)
