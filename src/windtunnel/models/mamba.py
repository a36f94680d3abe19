"""Mamba-1 (selective state space model) in pure PyTorch, fast enough to train on a CPU.

Each residual block is ``x + mixer(rmsnorm(x))``; the mixer follows Gu & Dao (2023): in_proj to
(u, z), depthwise causal conv1d + SiLU on u, x_proj -> (dt_rank, B, C), dt = softplus(dt_proj(.)),
A = -exp(A_log) (S4D-real init), the selective scan h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t,
y_t = C_t h_t + D u_t, gated by SiLU(z), out_proj. On CUDA the ``mamba_ssm`` kernel
``selective_scan_fn`` is used when it is installed.

``variant="authors"``: the Mamba of Paper I's reference code (``vishalmisra/bayesian-wind-tunnel``,
``experiments/paper1_hmm/train_mamba.py``). Its blocks are ``x + mixer(x)`` (no pre-norm) and the
final norm is a LayerNorm; in the mixer dt has rank 1 (dt_proj weight U(+-0.01), bias 0.1, so dt
starts at softplus(0.1)), dt = clamp(softplus(.), 1e-4, 10), A = -exp(min(A_log, 5)) with one
A_log (d_state,) shared by all channels, A = -0.1 [1..d_state] at init, and the scan output
passes a LayerNorm(d_inner) before the D skip: out_proj((LN(scan) + D u) * SiLU(z)). The head is
our ``OutputHead``: a Linear with bias and PyTorch's initialisation, as theirs (their embedding
is PyTorch's N(0, 1): ``init="torch"``). One departure: their scan also clamps exp's argument to
[-20, 0], dt B u to +-10 and the state to +-100, and their model zeroes NaNs in the residual
stream; these numerical guard rails are left out, so the scan runs in the C++ kernel (or
``mamba_ssm``'s) rather than a Python loop over time. They do nothing unless a value reaches them.

Capture points: ``embed``, ``blocks.{i}.ssm.dt`` (B, T, d_inner), ``blocks.{i}.ssm.B`` and
``blocks.{i}.ssm.C`` (B, T, d_state), ``blocks.{i}.resid_post`` (B, T, d), ``final`` (the same
for both variants; the authors' dt is captured after its clamp).
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from windtunnel.models import scan_ext
from windtunnel.models.base import (
    Capture,
    InputAdapter,
    ModelConfig,
    OutputHead,
    WindModel,
    register_model,
)
from windtunnel.tasks.base import TaskSpec


class MambaConfig(ModelConfig):
    n_layers: int = Field(6, ge=1, le=128)
    d_model: int = Field(192, ge=1, le=16384)
    d_state: int = Field(16, ge=1, le=256)
    d_conv: int = Field(4, ge=1, le=16)
    expand: int = Field(2, ge=1, le=8)
    dt_rank: int | None = Field(None, ge=1, description="rank of the dt projection; default ceil(d_model / 16)")
    pos_embed: bool = Field(False, description="add learned absolute position embeddings")
    variant: Literal["reference", "authors"] = Field(
        "reference", description="reference: Gu & Dao's Mamba (pre-RMSNorm blocks, final RMSNorm); authors: the Mamba "
                                 "of Paper I's code (dt rank 1, A shared by the channels, LayerNorm after the scan, "
                                 "no pre-norm, final LayerNorm; docs/models.md)")

    @model_validator(mode="after")
    def _check_variant(self):
        if self.variant == "authors" and self.dt_rank not in (None, 1):
            raise ValueError(f"dt_rank={self.dt_rank} does not go with variant='authors', whose dt has rank 1; "
                             "leave dt_rank unset")
        return self

    @property
    def has_position_table(self) -> bool:
        return self.pos_embed

    def resolve(self, spec: TaskSpec) -> MambaConfig:
        cfg = super().resolve(spec)
        if cfg.dt_rank is not None:
            return cfg
        return cfg.replace(dt_rank=1 if cfg.variant == "authors" else math.ceil(cfg.d_model / 16))


# ---------------------------------------------------------------------------------------
# The selective scan
# ---------------------------------------------------------------------------------------
class SelectiveScan(torch.autograd.Function):
    """The selective scan without the D skip: y_t = C_t . h_t, h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t.

    Shapes: u, dt (B, T, Di); A (Di, N); B, C (B, T, N). Internally time-major, so each step of
    the loop over time is one contiguous in-place update vectorised over batch, channels and
    state. The backward runs the adjoint recurrence g_t = C_t dL/dy_t + exp(dt_{t+1} A) g_{t+1}
    by hand, keeping only two (T, B, Di, N) tensors alive in each pass."""

    @staticmethod
    def forward(ctx, u, dt, A, B, C):
        u, dt, B, C = (x.transpose(0, 1).contiguous() for x in (u, dt, B, C))
        dA = (dt.unsqueeze(-1) * A).exp_()  # (T, B, Di, N)
        h = (dt * u).unsqueeze(-1) * B.unsqueeze(2)  # dt B u, turned into h in place
        for t in range(1, h.shape[0]):
            h[t].addcmul_(dA[t], h[t - 1])
        ctx.save_for_backward(u, dt, A, B, C, dA, h)
        return (h @ C.unsqueeze(-1)).squeeze(-1).transpose(0, 1)

    @staticmethod
    def backward(ctx, grad_y):
        u, dt, A, B, C, dA, h = ctx.saved_tensors
        gy = grad_y.transpose(0, 1).contiguous().unsqueeze(-2)  # (T, B, 1, Di)
        g = gy.mT * C.unsqueeze(2)  # dL/dh (T, B, Di, N), turned into the adjoint in place
        for t in range(g.shape[0] - 2, -1, -1):
            g[t].addcmul_(dA[t + 1], g[t + 1])
        grad_C = (gy @ h).squeeze(-2)
        grad_B = ((dt * u).unsqueeze(-2) @ g).squeeze(-2)
        grad_dtu = (g @ B.unsqueeze(-1)).squeeze(-1)
        s = g[1:].mul_(h[:-1]).mul_(dA[1:])  # dL/d(dt A) at t >= 1 (h_{-1} = 0)
        grad_dt = grad_dtu * u
        grad_dt[1:] += (s * A).sum(-1)
        grad_A = s.mul_(dt[1:].unsqueeze(-1)).sum((0, 1))
        return ((grad_dtu * dt).transpose(0, 1), grad_dt.transpose(0, 1), grad_A,
                grad_B.transpose(0, 1), grad_C.transpose(0, 1))


class CppSelectiveScan(torch.autograd.Function):
    """The selective scan with the D skip, in C++ (``csrc/selective_scan.cpp``), optionally with
    dt = softplus(dt_raw) and the gate out = y * silu(z) fused in: the forward keeps only a
    (batch, d_inner, d_state) state in flight and saves nothing but its inputs; the backward
    recomputes the states block by block and returns every gradient in one pass.

    Shapes: u, dt (B, T, Di); A (Di, N); B, C (B, T, N); D (Di,); z (B, T, Di) or None. B, C and z
    may be views with unit last stride (slices of the projections' outputs)."""

    @staticmethod
    def forward(ctx, u, dt, A, B, C, D, z=None, dt_softplus=False):
        args = [u.contiguous(), dt.contiguous(), A.t().contiguous(), _unit_last(B), _unit_last(C), D.contiguous(),
                None if z is None else _unit_last(z)]
        ctx.dt_softplus = dt_softplus
        ctx.save_for_backward(*args)
        return torch.ops.windtunnel_scan.fwd(*args, dt_softplus)

    @staticmethod
    def backward(ctx, grad_y):
        gu, gdt, gAt, gB, gC, gD, gz = torch.ops.windtunnel_scan.bwd(*ctx.saved_tensors, ctx.dt_softplus,
                                                                     grad_y.contiguous())
        return gu, gdt, gAt.t(), gB, gC, gD, gz if ctx.saved_tensors[-1] is not None else None, None


def _unit_last(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


class CppCausalConvSiLU(torch.autograd.Function):
    """SiLU of the depthwise causal conv1d, in C++: shifted multiply-adds over channel vectors,
    reading u in place (a view into in_proj's output). u (B, T, Di); weight (Di, 1, K); bias (Di,)."""

    @staticmethod
    def forward(ctx, u, weight, bias):
        w = weight.squeeze(1).t().contiguous()
        ctx.save_for_backward(u, w, bias)
        return torch.ops.windtunnel_scan.conv_silu_fwd(u, w, bias)

    @staticmethod
    def backward(ctx, grad_out):
        gu, gw, gb = torch.ops.windtunnel_scan.conv_silu_bwd(*ctx.saved_tensors, grad_out.contiguous())
        return gu, gw.t().unsqueeze(1), gb


def causal_conv_silu(u: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
    """silu(conv(u)) over time with the output at t seeing u up to t. u (B, T, Di) -> (B, T, Di)."""
    if u.device.type == "cpu" and conv.bias is not None and scan_ext.use_cpp():
        dtype = torch.promote_types(u.dtype, torch.float32)
        with torch.autocast("cpu", enabled=False):
            return CppCausalConvSiLU.apply(u.to(dtype), conv.weight.to(dtype), conv.bias.to(dtype))
    return F.silu(conv(u.mT)[..., : u.shape[1]].mT)


class CppRMSNorm(torch.autograd.Function):
    """RMSNorm over the last dimension in C++: one pass forward, one pass backward."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y, rstd = torch.ops.windtunnel_scan.rms_norm_fwd(x2, weight.contiguous(), eps)
        ctx.save_for_backward(x2, weight, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, grad_y):
        x2, weight, rstd = ctx.saved_tensors
        gx, gw = torch.ops.windtunnel_scan.rms_norm_bwd(x2, weight.contiguous(), rstd, grad_y.reshape(x2.shape))
        return gx.view(grad_y.shape), gw, None


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` (same parameters and result), fused in C++ on the CPU path."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and self.weight is not None
                and self.weight.dtype == x.dtype and scan_ext.use_cpp()):
            return CppRMSNorm.apply(x, self.weight, self.eps if self.eps is not None else torch.finfo(x.dtype).eps)
        return super().forward(x)


@functools.cache
def _cuda_selective_scan():
    """``mamba_ssm``'s fused selective scan, or None when it is not installed."""
    try:
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    except ImportError:
        return None
    return selective_scan_fn


def selective_scan(u: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                   C: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """y_t = C_t . h_t + D u_t with h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t and h_{-1} = 0.

    Shapes: u, dt (B, T, Di); A (Di, N); B, C (B, T, N); D (Di,). Returns (B, T, Di)."""
    kernel = _cuda_selective_scan() if u.is_cuda else None
    if kernel is not None:
        return kernel(u.mT, dt.mT, A, B.mT, C.mT, D.float()).mT
    dtype = torch.promote_types(u.dtype, torch.float32)
    with torch.autocast(u.device.type, enabled=False):  # the scan runs in float32 (or float64)
        if u.device.type == "cpu" and scan_ext.use_cpp():
            return CppSelectiveScan.apply(*(x.to(dtype) for x in (u, dt, A, B, C, D)))
        y = SelectiveScan.apply(*(x.to(dtype) for x in (u, dt, A, B, C)))
    return y + u * D


@torch.no_grad()
def init_dt_bias_(bias: torch.Tensor, dt_min: float = 1e-3, dt_max: float = 0.1) -> None:
    """In place: softplus^-1 of dt ~ log-uniform[dt_min, dt_max] (Gu & Dao's init of the step bias)."""
    u = torch.rand_like(bias)
    dt = torch.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=1e-4)
    bias.copy_(dt + torch.log(-torch.expm1(-dt)))


class MambaMixer(nn.Module):
    """The selective SSM of one Mamba block (parameter names as in ``mamba_ssm``); with
    ``variant="authors"`` the authors' (module docstring): rank-1 dt, one A_log (d_state,) for all
    channels, and ``norm``, the LayerNorm(d_inner) of the scan output."""

    captures = ("dt", "B", "C")

    def __init__(self, cfg: MambaConfig):
        super().__init__()
        self.authors = cfg.variant == "authors"
        d, di, n = cfg.d_model, cfg.expand * cfg.d_model, cfg.d_state
        r = 1 if self.authors else cfg.dt_rank
        self.sizes = (r, n, n)
        self.in_proj = nn.Linear(d, 2 * di, bias=False)
        self.conv1d = nn.Conv1d(di, di, cfg.d_conv, groups=di, padding=cfg.d_conv - 1)
        self.x_proj = nn.Linear(di, r + 2 * n, bias=False)
        self.dt_proj = nn.Linear(r, di)
        a = torch.arange(1, n + 1, dtype=torch.float32)
        self.A_log = nn.Parameter(torch.log(0.1 * a) if self.authors else torch.log(a).repeat(di, 1))
        self.D = nn.Parameter(torch.ones(di))
        self.out_proj = nn.Linear(di, d, bias=False)
        self.norm = nn.LayerNorm(di) if self.authors else None
        self._init_dt(r)

    @torch.no_grad()
    def _init_dt(self, dt_rank: int) -> None:
        """dt_proj weight U(+-dt_rank^-0.5); bias = softplus^-1 of dt ~ log-uniform[dt_min, dt_max].
        The authors': weight U(+-0.01), bias 0.1."""
        if self.authors:
            nn.init.uniform_(self.dt_proj.weight, -0.01, 0.01)
            nn.init.constant_(self.dt_proj.bias, 0.1)
            return
        nn.init.uniform_(self.dt_proj.weight, -dt_rank ** -0.5, dt_rank ** -0.5)
        init_dt_bias_(self.dt_proj.bias)

    def A(self) -> torch.Tensor:
        """The state matrix's diagonals, (d_inner, d_state)."""
        if self.authors:
            return -torch.exp(self.A_log.clamp(max=5.0)).repeat(len(self.D), 1)
        return -torch.exp(self.A_log)

    def forward(self, x: torch.Tensor, cache: Capture, name: str) -> torch.Tensor:
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = causal_conv_silu(u, self.conv1d)
        dt, B, C = self.x_proj(u).split(self.sizes, dim=-1)
        dt = self.dt_proj(dt)
        cache.put(f"{name}.B", B)
        cache.put(f"{name}.C", C)
        A = self.A()
        if self.authors:  # scan without D, then LayerNorm, the D skip and the gate
            dt = F.softplus(dt).clamp(1e-4, 10.0)
            cache.put(f"{name}.dt", dt)
            y = self.norm(selective_scan(u, dt, A, B, C, torch.zeros_like(self.D))) + self.D * u
            return self.out_proj(y * F.silu(z))
        if u.device.type == "cpu" and scan_ext.use_cpp():  # softplus, scan and gate in one C++ pass
            if cache.wants(f"{name}.dt"):
                cache.put(f"{name}.dt", F.softplus(dt))
            dtype = torch.promote_types(u.dtype, torch.float32)
            with torch.autocast("cpu", enabled=False):
                y = CppSelectiveScan.apply(*(t.to(dtype) for t in (u, dt, A, B, C, self.D, z)), True)
            return self.out_proj(y)
        dt = F.softplus(dt)
        cache.put(f"{name}.dt", dt)
        y = selective_scan(u, dt, A, B, C, self.D)
        return self.out_proj(y * F.silu(z))


class MambaBlock(nn.Module):
    """x + mixer(rmsnorm(x)); the authors': x + mixer(x)."""

    def __init__(self, cfg: MambaConfig):
        super().__init__()
        self.norm = nn.Identity() if cfg.variant == "authors" else RMSNorm(cfg.d_model, eps=1e-5)
        self.mixer = MambaMixer(cfg)

    def forward(self, x: torch.Tensor, cache: Capture, name: str) -> torch.Tensor:
        x = x + self.mixer(self.norm(x), cache, f"{name}.ssm")
        cache.put(f"{name}.resid_post", x)
        return x


@register_model
class Mamba(WindModel):
    """Embed (+ optional positions), residual Mamba blocks, final RMSNorm (authors: LayerNorm), head.

    ``init`` acts on the embeddings only: the mixers keep their own dt and A initialisation
    under either scheme (a generic re-initialisation such as ``self.apply(init_normal)`` would
    overwrite it)."""

    name = "mamba"
    Config = MambaConfig
    has_recurrent_state = True

    def __init__(self, spec: TaskSpec, config: MambaConfig | None = None, **params):
        super().__init__(spec, config, **params)
        c = self.config
        self.embed = InputAdapter(spec, c.d_model, c.max_len if c.pos_embed else None, c.init)
        self.blocks = nn.ModuleList(MambaBlock(c) for _ in range(c.n_layers))
        self.norm_f = nn.LayerNorm(c.d_model) if c.variant == "authors" else RMSNorm(c.d_model, eps=1e-5)
        self.head = OutputHead(spec, c.d_model, tied=c.tie_head)

    def capture_names(self) -> list[str]:
        names = ["embed"]
        for i in range(self.config.n_layers):
            names += [f"blocks.{i}.ssm.{k}" for k in MambaMixer.captures] + [f"blocks.{i}.resid_post"]
        return names + ["final"]

    def mix(self, x: torch.Tensor, cache: Capture) -> torch.Tensor:
        for i, block in enumerate(self.blocks):
            x = block(x, cache, f"blocks.{i}")
        return self.norm_f(x)
