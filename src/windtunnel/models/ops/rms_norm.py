"""RMSNorm over the last dimension: :class:`RMSNorm`, ``nn.RMSNorm`` (its reference: same
parameters and result) fused in C++ on the CPU when ``scan_ext`` says so."""

from __future__ import annotations

import torch
from torch import nn

from windtunnel.models.ops import scan_ext


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` (same parameters and result), fused in C++ on the CPU path."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and self.weight is not None
                and self.weight.dtype == x.dtype and scan_ext.use_cpp()):
            return CppRMSNorm.apply(x, self.weight, self.eps if self.eps is not None else torch.finfo(x.dtype).eps)
        return super().forward(x)


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
