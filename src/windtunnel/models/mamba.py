"""Mamba-1 (selective state space model) in pure PyTorch, fast enough to train on a CPU.

Each residual block is ``x + mixer(rmsnorm(x))``; the mixer follows Gu & Dao (2023): in_proj to
(u, z), depthwise causal conv1d + SiLU on u, x_proj -> (dt_rank, B, C), dt = softplus(dt_proj(.)),
A = -exp(A_log) (S4D-real init), the selective scan h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t,
y_t = C_t h_t + D u_t, gated by SiLU(z), out_proj. The kernels (C++ on the CPU, ``mamba_ssm``'s
``selective_scan_fn`` on CUDA when it is installed, else pure PyTorch) are in
:mod:`windtunnel.models.ops`, each beside its pure-PyTorch reference.

``variant="authors"``: the Mamba of Paper I's reference code (``vishalmisra/bayesian-wind-tunnel``):
no pre-norm, a final LayerNorm, dt of rank 1 clamped to [1e-4, 10], one A_log shared by all
channels, a LayerNorm on the scan output before the D skip; their scan's numerical guard rails
are left out. Each difference and its initialisation: docs/models.md, "The authors' Mamba".

Capture points: ``embed``, ``blocks.{i}.ssm.dt`` (B, T, d_inner), ``blocks.{i}.ssm.B`` and
``blocks.{i}.ssm.C`` (B, T, d_state), ``blocks.{i}.resid_post`` (B, T, d), ``final`` (the same
for both variants; the authors' dt is captured after its clamp). ``ssm`` is the block's group of
taps for the scan; the mixer's parameters keep ``mamba_ssm``'s names (``blocks.{i}.mixer.*``).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from windtunnel.models.base import (
    ModelConfig,
    Tap,
    WindModel,
    register_model,
)
from windtunnel.models.ops.causal_conv import causal_conv_silu
from windtunnel.models.ops.rms_norm import RMSNorm
from windtunnel.models.ops.selective_scan import selective_scan
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


@torch.no_grad()
def init_dt_bias_(bias: torch.Tensor, dt_min: float = 1e-3, dt_max: float = 0.1) -> None:
    """In place: softplus^-1 of dt ~ log-uniform[dt_min, dt_max] (Gu & Dao's init of the step bias)."""
    u = torch.rand_like(bias)
    dt = torch.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=1e-4)
    bias.copy_(dt + torch.log(-torch.expm1(-dt)))


class ScanTaps(nn.Module):
    """The capture points of a mixer's scan: the step ``dt`` (B, T, d_inner) after its softplus
    (and the authors' clamp), ``B`` and ``C`` (B, T, d_state)."""

    def __init__(self):
        super().__init__()
        self.dt, self.B, self.C = Tap(), Tap(), Tap()


class MambaMixer(nn.Module):
    """The selective SSM of one Mamba block (parameter names as in ``mamba_ssm``); with
    ``variant="authors"`` the authors' (module docstring): rank-1 dt, one A_log (d_state,) for all
    channels, and ``norm``, the LayerNorm(d_inner) of the scan output. It records into the
    :class:`ScanTaps` it is given (the block's ``ssm``), if any."""

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

    def forward(self, x: torch.Tensor, taps: ScanTaps | None = None) -> torch.Tensor:
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = causal_conv_silu(u, self.conv1d)
        dt, B, C = self.x_proj(u).split(self.sizes, dim=-1)
        dt = self.dt_proj(dt)
        if taps is not None:
            B, C = taps.B(B), taps.C(C)
        A = self.A()
        if self.authors:  # scan without D, then LayerNorm, the D skip and the gate
            dt = F.softplus(dt).clamp(1e-4, 10.0)
            if taps is not None:
                dt = taps.dt(dt)
            y = self.norm(selective_scan(u, dt, A, B, C, torch.zeros_like(self.D))) + self.D * u
            return self.out_proj(y * F.silu(z))
        if taps is not None and taps.dt.wanted:  # the scan applies the softplus itself
            taps.dt(F.softplus(dt))
        return self.out_proj(selective_scan(u, dt, A, B, C, self.D, z, dt_softplus=True))


class MambaBlock(nn.Module):
    """x + mixer(rmsnorm(x)); the authors': x + mixer(x). The capture points of the mixer's scan
    are the block's ``ssm`` taps (``blocks.{i}.ssm.dt``), the mixer's parameters ``mixer.*`` as
    in ``mamba_ssm``."""

    def __init__(self, cfg: MambaConfig):
        super().__init__()
        self.norm = nn.Identity() if cfg.variant == "authors" else RMSNorm(cfg.d_model, eps=1e-5)
        self.mixer = MambaMixer(cfg)
        self.ssm = ScanTaps()
        self.resid_post = Tap()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resid_post(x + self.mixer(self.norm(x), self.ssm))


@register_model
class Mamba(WindModel):
    """Embed (+ optional positions), residual Mamba blocks, final RMSNorm (authors: LayerNorm), head.

    ``init`` acts on the embeddings only: the mixers keep their own dt and A initialisation
    under either scheme (a generic re-initialisation such as ``self.apply(init_normal)`` would
    overwrite it)."""

    name = "mamba"
    Config = MambaConfig
    has_recurrent_state = True

    def build(self, c: MambaConfig) -> None:
        self.blocks = nn.ModuleList(MambaBlock(c) for _ in range(c.n_layers))
        self.norm_f = nn.LayerNorm(c.d_model) if c.variant == "authors" else RMSNorm(c.d_model, eps=1e-5)

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm_f(x)
