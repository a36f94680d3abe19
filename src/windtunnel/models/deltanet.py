"""Gated DeltaNet in pure PyTorch: the transformer's blocks with attention replaced by the gated
delta rule (Schlag et al. 2021; Yang et al. 2024 and 2025; the references: docs/models.md).

Per head, with L2-normalised keys and queries and the state S_t (d_v, d_k),
S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T and z_t = S_t q_t: each step
writes v_t at key k_t, replacing a fraction beta_t of what was stored there, after the whole
memory decays by alpha_t. beta_t = sigmoid(w_b . x_t); alpha_t = exp(-exp(A_log) softplus(w_a . x_t
+ dt_bias)) (Mamba-2's decay; ``gated=False``: alpha_t = 1, the plain delta rule). q, k, v pass a
short causal depthwise convolution and SiLU (``d_conv``; 0: SiLU only), as in the authors' layers.

Two equal forms (``form``): ``recurrent``, one step at a time; ``chunk``, the WY form, chunks of
``chunk_size`` positions solved in parallel (a unit lower-triangular solve per chunk) and a
recurrence over chunks only.

Capture points: the transformer's, with ``blocks.{i}.attn.q|k`` after the convolution and the
normalisation, ``blocks.{i}.attn.beta`` and ``blocks.{i}.attn.alpha`` (B, H, T), and
``blocks.{i}.attn.pattern`` the effective (B, H, T, T) causal matrix P with z = P v.
Capabilities: head ablation and a recurrent state, but no attention distribution (P's rows
need not be nonnegative or sum to 1) and no key weights (the keys pass a convolution and a norm).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from windtunnel.models.base import Tap, register_model
from windtunnel.models.mamba import init_dt_bias_
from windtunnel.models.ops.causal_conv import causal_conv_silu
from windtunnel.models.transformer import Attention, Transformer, TransformerConfig


class DeltaNetConfig(TransformerConfig):
    gated: bool = Field(True, description="decay the memory by alpha_t (gated delta rule); False: alpha_t = 1")
    d_conv: int = Field(4, ge=0, le=16, description="width of the causal convolution on q, k, v (0: none)")
    form: Literal["chunk", "recurrent"] = Field("chunk", description="chunked WY form or step-by-step recurrence")
    chunk_size: int = Field(32, ge=1, le=4096)
    pos_embed: bool = Field(False, description="add learned absolute position embeddings")

    @property
    def has_position_table(self) -> bool:
        return self.pos_embed


# ---------------------------------------------------------------------------------------
# The gated delta rule. Shapes: q, k (B, H, T, dk), v (B, H, T, dv), beta and log_alpha (B, H, T).
# Internally the state is stored transposed, S^T (dk, dv), so that z_t = S_t^T q_t.
# ---------------------------------------------------------------------------------------
def delta_rule_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
                         log_alpha: torch.Tensor) -> torch.Tensor:
    """z (B, H, T, dv) by the recurrence, one position at a time."""
    S = k.new_zeros(*k.shape[:2], k.shape[-1], v.shape[-1])
    alpha = log_alpha.exp()
    out = []
    for t in range(k.shape[2]):
        kt = k[:, :, t]
        S = S * alpha[:, :, t, None, None]
        u = beta[:, :, t, None] * (v[:, :, t] - (kt.unsqueeze(-2) @ S).squeeze(-2))
        S = S + kt.unsqueeze(-1) * u.unsqueeze(-2)
        out.append((q[:, :, t].unsqueeze(-2) @ S).squeeze(-2))
    return torch.stack(out, 2)


def _chunk_terms(q, k, beta, log_alpha):
    """Within-chunk terms on (..., C, .) blocks: G = cumulative log decay, the decay matrix
    D[r, s] = gamma_r / gamma_s (s <= r, else 0), and I + A with A[r, s] = beta_r D[r, s] k_r . k_s (s < r)."""
    C = k.shape[-2]
    G = log_alpha.cumsum(-1)
    incl = torch.ones(C, C, dtype=torch.bool, device=k.device).tril()
    D = (G.unsqueeze(-1) - G.unsqueeze(-2)).masked_fill(~incl, float("-inf")).exp()
    A = (beta.unsqueeze(-1) * D * (k @ k.transpose(-2, -1))).tril(-1)
    return G, D, A + torch.eye(C, dtype=k.dtype, device=k.device)


def delta_rule_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
                       log_alpha: torch.Tensor, chunk_size: int = 32) -> torch.Tensor:
    """z (B, H, T, dv) by the chunked WY form (equal to :func:`delta_rule_recurrent`).

    In a chunk starting from state S_0, the updates u_r = beta_r (v_r - alpha_r S_{r-1}^T k_r)
    solve (I + A) U = beta V - beta gamma K S_0 (gamma_r the decay since the chunk start), and
    z = gamma Q S_0 + (D o Q K^T) U; the state leaves the chunk as gamma_C S_0 + sum_r (gamma_C / gamma_r) k_r u_r^T."""
    T = k.shape[2]
    pad = (-T) % chunk_size
    if pad:  # trailing zero positions (beta 0, alpha 1) change nothing before them
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        beta, log_alpha = (F.pad(x, (0, pad)) for x in (beta, log_alpha))
    n = (T + pad) // chunk_size
    q, k, v = (x.unflatten(2, (n, chunk_size)) for x in (q, k, v))  # (B, H, n, C, d)
    beta, log_alpha = (x.unflatten(2, (n, chunk_size)) for x in (beta, log_alpha))
    G, D, IA = _chunk_terms(q, k, beta, log_alpha)
    solve = lambda rhs: torch.linalg.solve_triangular(IA, rhs, upper=False, unitriangular=True)  # noqa: E731
    U0 = solve(beta.unsqueeze(-1) * v)
    W = solve((beta * G.exp()).unsqueeze(-1) * k)
    QK = (q @ k.transpose(-2, -1)) * D
    S = k.new_zeros(*k.shape[:2], k.shape[-1], v.shape[-1])
    out = []
    for i in range(n):
        U = U0[:, :, i] - W[:, :, i] @ S
        out.append(G[:, :, i].exp().unsqueeze(-1) * (q[:, :, i] @ S) + QK[:, :, i] @ U)
        g_end = G[:, :, i, -1:]
        S = g_end.exp().unsqueeze(-1) * S + ((g_end - G[:, :, i]).exp().unsqueeze(-1) * k[:, :, i]).transpose(-2, -1) @ U
    return torch.cat(out, 2)[:, :, :T]


def delta_rule_pattern(q: torch.Tensor, k: torch.Tensor, beta: torch.Tensor, log_alpha: torch.Tensor) -> torch.Tensor:
    """The causal (B, H, T, T) matrix P with z = P v: the whole sequence as one chunk from S_0 = 0,
    P = (D o Q K^T) (I + A)^-1 diag(beta)."""
    _, D, IA = _chunk_terms(q, k, beta, log_alpha)
    inv_beta = torch.linalg.solve_triangular(IA, torch.diag_embed(beta), upper=False, unitriangular=True)
    return ((q @ k.transpose(-2, -1)) * D) @ inv_beta


class DeltaRuleMixer(Attention):
    """The gated delta rule in the attention's slot: its taps, plus ``beta`` and ``alpha`` (B, H, T)."""

    def __init__(self, cfg: DeltaNetConfig):
        super().__init__(cfg)
        d, h = cfg.d_model, cfg.n_heads
        self.form, self.chunk_size = cfg.form, cfg.chunk_size
        self.conv1d = nn.Conv1d(3 * d, 3 * d, cfg.d_conv, groups=3 * d, padding=cfg.d_conv - 1) if cfg.d_conv else None
        self.b_proj = nn.Linear(d, h)
        if cfg.gated:
            self.a_proj = nn.Linear(d, h)
            self.A_log = nn.Parameter(torch.empty(h))
            self.dt_bias = nn.Parameter(torch.empty(h))
        else:
            self.a_proj = None
        self.beta, self.alpha = Tap(), Tap()
        self.reset_special_parameters()

    @torch.no_grad()
    def reset_special_parameters(self) -> None:
        """The decay's own init (as Mamba-2 and Gated DeltaNet): A ~ U[1, 16], softplus(dt_bias) log-uniform."""
        if self.a_proj is not None:
            self.A_log.copy_(torch.empty_like(self.A_log).uniform_(1, 16).log())
            init_dt_bias_(self.dt_bias)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.qkv(x)
        y = causal_conv_silu(y, self.conv1d) if self.conv1d is not None else F.silu(y)
        q, k, v = self.split(y)
        return F.normalize(q, dim=-1), F.normalize(k, dim=-1), v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        beta = self.beta(torch.sigmoid(self.b_proj(x)).transpose(1, 2))
        if self.a_proj is not None:
            log_alpha = (-self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)).transpose(1, 2)
        else:
            log_alpha = torch.zeros_like(beta)
        if self.alpha.wanted:
            self.alpha(log_alpha.exp())
        dtype = torch.promote_types(q.dtype, torch.float32)
        with torch.autocast(q.device.type, enabled=False):  # the solves need float32 (or float64)
            args = [t.to(dtype) for t in (q, k, v, beta, log_alpha)]
            if self.pattern.wanted:
                self.pattern(delta_rule_pattern(args[0], args[1], args[3], args[4]))
            if self.form == "recurrent":
                return delta_rule_recurrent(*args).to(v.dtype)
            return delta_rule_chunked(*args, chunk_size=self.chunk_size).to(v.dtype)


@register_model
class DeltaNet(Transformer):
    name = "deltanet"
    Config = DeltaNetConfig
    mixer = DeltaRuleMixer
    #: the pattern is the delta rule's effective matrix P (z = P v): its rows are neither
    #: nonnegative nor normalised, so it is no attention distribution; the head mask and
    #: bypasses are the transformer's, and the memory is a fixed-size recurrent state
    has_attention = False
    has_head_ablation = True
    has_recurrent_state = True

    def key_weights(self, layer: int) -> torch.Tensor | None:
        """None: q and k pass a causal convolution, SiLU and L2 normalisation after the QKV
        projection, so its weights alone do not define the keys (nor, for the values, W_O W_V)."""
        return None

    def ov_weights(self, layer: int) -> torch.Tensor | None:
        return None

