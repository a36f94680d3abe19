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

    def propose(dd: torch.Tensor, cc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(dd.shape, generator=generator, device=a.device, dtype=torch.float64)
        u = torch.rand(dd.shape, generator=generator, device=a.device, dtype=torch.float64)
        v = (1 + cc * x) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * x * x + dd - dd * v + dd * torch.log(v.clamp_min(1e-300)))
        return dd * v, ok

    # the first proposal for every element at once, without indexing (the same draws, in the same
    # order, as a pass over all of them); then only the rejected ones, until none is left
    out, ok = propose(d, c)
    todo = ~ok
    while True:
        idx = todo.nonzero(as_tuple=True)
        if idx[0].numel() == 0:
            break
        val, acc = propose(d[idx], c[idx])
        sel = tuple(i[acc] for i in idx)
        out[sel] = val[acc]
        todo[sel] = False
    if boost.any():
        u = torch.rand(a.shape, generator=generator, device=a.device, dtype=torch.float64)
        out = torch.where(boost, out * u ** (1.0 / alpha), out)
    return out


def flat_dirichlet(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Rows of Dirichlet(1, ..., 1) over the last axis of ``shape`` (float64): normalised
    Exponential(1) draws, -log(1 - U), the law of the gamma route without its rejection loop."""
    u = torch.rand(shape, generator=generator, device=generator.device, dtype=torch.float64)
    g = torch.log1p(-u).neg_()
    return g / g.sum(-1, keepdim=True)


def dirichlet(alpha: float, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Rows of Dirichlet(alpha, ..., alpha) over the last axis of ``shape`` (float64)."""
    g = gamma(torch.full(shape, float(alpha), device=generator.device), generator)
    return g / g.sum(-1, keepdim=True)


def categorical(probs: torch.Tensor, generator: torch.Generator, n: int | None = None) -> torch.Tensor:
    """One draw per row of ``probs`` (..., K) by inverse CDF, from an explicit generator; with
    ``n``, n independent draws per row (..., n): the same draws as one draw per row of ``probs``
    repeated n times along a new axis before the last, without repeating its CDF."""
    u = torch.rand(probs.shape[:-1] + (1 if n is None else n,), generator=generator, device=probs.device, dtype=probs.dtype)
    cdf = probs.cumsum(-1)
    out = torch.searchsorted(cdf, u * cdf[..., -1:]).clamp_max(probs.shape[-1] - 1)
    return out.squeeze(-1) if n is None else out
