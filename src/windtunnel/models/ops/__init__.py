"""The kernels of the models, each beside its pure-PyTorch reference (as ``mamba_ssm.ops``).

- :mod:`~windtunnel.models.ops.selective_scan`: ``selective_scan`` (one call, dispatched once to
  the fastest kernel available: ``mamba_ssm``'s on CUDA, the C++ one on the CPU, else pure
  PyTorch with a hand-written backward) and ``selective_scan_ref``, a plain loop over time with
  the same signature;
- :mod:`~windtunnel.models.ops.causal_conv`: the depthwise causal conv1d + SiLU of Mamba and
  DeltaNet, ``causal_conv_silu`` and ``causal_conv_silu_ref``;
- :mod:`~windtunnel.models.ops.rms_norm`: ``RMSNorm``, ``nn.RMSNorm`` fused in C++ on the CPU;
- :mod:`~windtunnel.models.ops.scan_ext`: the C++ extension (``models/csrc/selective_scan.cpp``),
  built on first use, and the choice of path (``WINDTUNNEL_SCAN=auto|cpp|torch``).

Import the submodules; this package itself re-exports nothing.
"""
