"""Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): the transformer
with softmax(q . k) replaced by a positive feature map, phi(q) . phi(k).

Head h at position t: z_t = sum_{s<=t} (phi(q_t) . phi(k_s)) v_s / (phi(q_t) . sum_{s<=t} phi(k_s)),
three equal ways (``form``): ``parallel``, the masked (T, T) matrix of scores; ``cumsum``, causal
cumulative sums of phi(k_s) v_s^T and phi(k_s); ``recurrent``, the RNN with state S_t = S_{t-1} +
phi(k_t) v_t^T and normaliser n_t = n_{t-1} + phi(k_t), one step at a time. Everything else
(blocks, learned positions, FFN, head mask, bypasses, initialisation) is the transformer's.

Capture points: the transformer's, ``blocks.{i}.attn.q|k|v|z`` (q, k before the feature map) and
``blocks.{i}.attn.pattern``, the normalised weights of the values (rows sum to 1, causal).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from windtunnel.models.base import register_model
from windtunnel.models.transformer import Attention, Transformer, TransformerConfig

FEATURE_MAPS = {
    "elu": lambda x: F.elu(x) + 1.0,  # Katharopoulos et al.'s elu(x) + 1
    "relu": F.relu,
    "softplus": F.softplus,
}
EPS = 1e-6  # added to the normaliser (relu features can make it 0)


class LinearAttentionConfig(TransformerConfig):
    feature_map: Literal["elu", "relu", "softplus"] = Field("elu", description="phi: elu(x) + 1, relu or softplus")
    form: Literal["parallel", "cumsum", "recurrent"] = Field(
        "parallel", description="how the outputs are computed (all equal): the masked (T, T) score matrix, "
                                "causal cumulative sums, or the recurrence one step at a time")


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     form: str = "parallel") -> torch.Tensor:
    """Causal normalised linear attention of feature-mapped q, k (B, H, T, dk) over v (B, H, T, dv)."""
    if form == "parallel":
        scores = (q @ k.transpose(-2, -1)).tril()
        return (scores @ v) / (scores.sum(-1, keepdim=True) + EPS)
    if form == "cumsum":
        kv = (k.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(2)  # (B, H, T, dk, dv)
        num = (q.unsqueeze(-2) @ kv).squeeze(-2)
        return num / ((q * k.cumsum(2)).sum(-1, keepdim=True) + EPS)
    if form == "recurrent":
        S = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
        n = q.new_zeros(*q.shape[:2], q.shape[-1])
        out = []
        for t in range(q.shape[2]):
            S = S + k[:, :, t, :, None] * v[:, :, t, None, :]
            n = n + k[:, :, t]
            qt = q[:, :, t]
            out.append((qt.unsqueeze(-2) @ S).squeeze(-2) / ((qt * n).sum(-1, keepdim=True) + EPS))
        return torch.stack(out, 2)
    raise ValueError(f"unknown form {form!r}")


class LinearAttentionMixer(Attention):
    def __init__(self, cfg: LinearAttentionConfig):
        super().__init__(cfg)
        self.phi = FEATURE_MAPS[cfg.feature_map]
        self.form = cfg.form

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        fq, fk = self.phi(q), self.phi(k)
        if self.pattern.wanted:
            scores = (fq @ fk.transpose(-2, -1)).tril()
            self.pattern(scores / (scores.sum(-1, keepdim=True) + EPS))
        return linear_attention(fq, fk, v, self.form)


@register_model
class LinearAttention(Transformer):
    name = "linear_attention"
    Config = LinearAttentionConfig
    mixer = LinearAttentionMixer
    #: the transformer's capabilities (its pattern rows are nonnegative and sum to 1; key
    #: weights are W_K before the elementwise feature map), plus a recurrent state: the
    #: running sums S_t and n_t
    has_recurrent_state = True
