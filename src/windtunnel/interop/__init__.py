"""Interop: windtunnel's runs and results in the tools researchers already use (docs/interop.md).

Each submodule is imported on its own (``from windtunnel.interop import api``); this package
imports none of them, so nothing optional (pandas, TransformerLens, ...) loads with it.
"""
