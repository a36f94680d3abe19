"""Random draws that torch.distributions cannot take an explicit generator for."""

from __future__ import annotations

import torch


def gamma(alpha: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Gamma(alpha, 1) draws, elementwise, from an explicit generator (Marsaglia-Tsang).

    ``torch.distributions.Gamma`` uses the global RNG; this rejection sampler draws only from
    ``generator`` and runs on its device. For alpha < 1 it uses Gamma(alpha + 1) * U^(1/alpha).
    """
    alpha = alpha.to(torch.float64)
    boost = alpha < 1
    a = torch.where(boost, alpha + 1, alpha)
    d = a - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    out = torch.empty_like(a)
    todo = torch.ones_like(a, dtype=torch.bool)
    while todo.any():
        idx = todo.nonzero(as_tuple=True)
        dd, cc = d[idx], c[idx]
        x = torch.randn(dd.shape, generator=generator, device=a.device, dtype=torch.float64)
        u = torch.rand(dd.shape, generator=generator, device=a.device, dtype=torch.float64)
        v = (1 + cc * x) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * x * x + dd - dd * v + dd * torch.log(v.clamp_min(1e-300)))
        sel = tuple(i[ok] for i in idx)
        out[sel] = (dd * v)[ok]
        todo[sel] = False
    if boost.any():
        u = torch.rand(a.shape, generator=generator, device=a.device, dtype=torch.float64)
        out = torch.where(boost, out * u ** (1.0 / alpha), out)
    return out


def dirichlet(alpha: float, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Rows of Dirichlet(alpha, ..., alpha) over the last axis of ``shape`` (float64)."""
    g = gamma(torch.full(shape, float(alpha), device=generator.device), generator)
    return g / g.sum(-1, keepdim=True)


def categorical(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row of ``probs`` (..., K) by inverse CDF, from an explicit generator."""
    u = torch.rand(probs.shape[:-1] + (1,), generator=generator, device=probs.device, dtype=probs.dtype)
    cdf = probs.cumsum(-1)
    return torch.searchsorted(cdf, u * cdf[..., -1:]).squeeze(-1).clamp_max(probs.shape[-1] - 1)
