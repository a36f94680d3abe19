"""The selective scan of Mamba-1: one :func:`selective_scan` that picks its kernel once per call,
beside :func:`selective_scan_ref`, a plain loop over time with the same signature and result
(as ``mamba_ssm`` keeps ``selective_scan_fn`` beside ``selective_scan_ref``).

    y_t = C_t . h_t + D u_t,   h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t,   h_{-1} = 0,

optionally with dt = softplus(dt) first and the gate y * silu(z) after. Shapes: u, dt, z
(B, T, Di); A (Di, N); B, C (B, T, N); D (Di,). Returns (B, T, Di), computed in float32 (or
float64 for float64 inputs) whatever autocast says.

Kernels, fastest first: on CUDA ``mamba_ssm``'s fused scan when it is installed; on the CPU the
C++ kernel (``scan_ext``, ``WINDTUNNEL_SCAN``) with softplus, D skip and gate fused in; else
:class:`SelectiveScan`, pure PyTorch with its own backward.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from windtunnel.models.ops import scan_ext


def selective_scan(u: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   D: torch.Tensor, z: torch.Tensor | None = None, dt_softplus: bool = False) -> torch.Tensor:
    """The selective scan (module docstring) on the fastest kernel available for ``u``'s device."""
    dtype = torch.promote_types(u.dtype, torch.float32)
    if u.device.type == "cpu" and scan_ext.use_cpp():  # softplus, scan, D skip and gate in one C++ pass
        with torch.autocast("cpu", enabled=False):
            return CppSelectiveScan.apply(*(x.to(dtype) for x in (u, dt, A, B, C, D)),
                                          None if z is None else z.to(dtype), dt_softplus)
    if dt_softplus:
        dt = F.softplus(dt)
    kernel = _cuda_selective_scan() if u.is_cuda else None
    if kernel is not None:
        y = kernel(u.mT, dt.mT, A, B.mT, C.mT, D.float()).mT
    else:
        with torch.autocast(u.device.type, enabled=False):  # the scan runs in float32 (or float64)
            y = SelectiveScan.apply(*(x.to(dtype) for x in (u, dt, A, B, C)))
        y = y + u * D
    return y if z is None else y * F.silu(z)


def selective_scan_ref(u: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                       D: torch.Tensor, z: torch.Tensor | None = None, dt_softplus: bool = False) -> torch.Tensor:
    """The selective scan as written (module docstring): a loop over time, autograd's backward."""
    dtype = torch.promote_types(u.dtype, torch.float32)
    u, dt, A, B, C, D = (x.to(dtype) for x in (u, dt, A, B, C, D))
    if dt_softplus:
        dt = F.softplus(dt)
    h = u.new_zeros(u.shape[0], u.shape[2], A.shape[1])  # (B, Di, N)
    ys = []
    for t in range(u.shape[1]):
        h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * u[:, t])[..., None] * B[:, t, None, :]
        ys.append((h * C[:, t, None, :]).sum(-1))
    y = torch.stack(ys, 1) + u * D
    return y if z is None else y * F.silu(z.to(dtype))


# ---------------------------------------------------------------------------------------
# The kernels
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


@functools.cache
def _cuda_selective_scan():
    """``mamba_ssm``'s fused selective scan, or None when it is not installed."""
    try:
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    except ImportError:
        return None
    return selective_scan_fn
