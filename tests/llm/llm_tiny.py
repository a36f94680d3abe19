"""Tiny randomly initialised models of each family and a small byte-level BPE tokenizer (helpers
for the llm tests, from :mod:`windtunnel.llm.tiny`; the fixtures live in conftest.py)."""

from windtunnel.llm.tiny import FAMILIES, build_model, build_tokenizer

__all__ = ["FAMILIES", "build_model", "build_tokenizer"]
