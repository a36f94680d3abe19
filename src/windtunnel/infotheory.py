"""Information-theoretic primitives in bits, shared by tasks, metrics and geometry.

All functions work on the last axis of a tensor and broadcast over the rest. They follow
the convention 0 log 0 = 0. Oracles call them in float64.
"""

from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)


def entropy_bits(p: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shannon entropy -sum p log2 p of probability vectors along ``dim`` (0 log 0 = 0)."""
    # where p = 0 the clamp makes log finite, so the term is 0 * finite = 0 (no mask needed)
    return -(p * torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))).sum(dim) / LN2 + 0.0  # + 0.0: -0.0 -> 0.0


def kl_bits(p: torch.Tensor, q: torch.Tensor, dim: int = -1, eps: float = 0.0) -> torch.Tensor:
    """KL(p || q) in bits. Terms with p = 0 contribute 0.

    Where q = 0 but p > 0 the divergence is +inf, unless ``eps`` > 0 clips q from below
    (the authors' scripts use 1e-10 or 1e-12; say which when you report it).
    """
    if eps > 0:
        q = q.clamp_min(eps)
    tiny = torch.finfo(p.dtype).tiny
    terms = torch.where(p > 0, p * (torch.log(p.clamp_min(tiny)) - torch.log(q)), torch.zeros_like(p))
    return terms.sum(dim) / LN2


def binary_entropy_bits(p: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of a Bernoulli(p)."""
    return entropy_bits(torch.stack([p, 1 - p], dim=-1))


def gaussian_entropy_bits(var: torch.Tensor) -> torch.Tensor:
    """Differential entropy in bits of a univariate Gaussian with variance ``var``."""
    return 0.5 * torch.log2(2 * math.pi * math.e * var)


def gaussian_kl_bits(mean_p, var_p, mean_q, var_q) -> torch.Tensor:
    """KL(N(mean_p, var_p) || N(mean_q, var_q)) in bits, elementwise."""
    nats = 0.5 * (torch.log(var_q / var_p) + (var_p + (mean_p - mean_q) ** 2) / var_q - 1.0)
    return nats / LN2
