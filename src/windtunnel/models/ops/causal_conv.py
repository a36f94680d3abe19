"""SiLU of a depthwise causal conv1d over time (Mamba's and DeltaNet's short convolution):
:func:`causal_conv_silu` (in C++ on the CPU when ``scan_ext`` says so) beside
:func:`causal_conv_silu_ref`, the same with ``nn.Conv1d``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from windtunnel.models.ops import scan_ext


def causal_conv_silu(u: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
    """silu(conv(u)) over time with the output at t seeing u up to t. u (B, T, Di) -> (B, T, Di)."""
    if u.device.type == "cpu" and conv.bias is not None and scan_ext.use_cpp():
        dtype = torch.promote_types(u.dtype, torch.float32)
        with torch.autocast("cpu", enabled=False):
            return CppCausalConvSiLU.apply(u.to(dtype), conv.weight.to(dtype), conv.bias.to(dtype))
    return causal_conv_silu_ref(u, conv)


def causal_conv_silu_ref(u: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
    """:func:`causal_conv_silu` by ``conv`` itself (padded both sides by K - 1: the first T outputs are causal)."""
    return F.silu(conv(u.mT)[..., : u.shape[1]].mT)


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
