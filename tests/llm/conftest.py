"""Fixtures: tiny randomly initialised models of each family, saved to a temporary folder with a
small byte-level BPE tokenizer and loaded through the same path as a user's model."""

from __future__ import annotations

import pytest
from llm_tiny import FAMILIES, build_model, build_tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory):
    pytest.importorskip("transformers", reason="the llm tests need transformers: make setup EXTRAS=llm")
    path = tmp_path_factory.mktemp("tok")
    build_tokenizer(path)
    return path


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, tiny_tokenizer_dir):
    """{family: folder} of saved tiny models with the shared tokenizer."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    out = {}
    for fam in FAMILIES:
        path = tmp_path_factory.mktemp(fam)
        build_model(fam, path, len(tok))
        tok.save_pretrained(path)
        out[fam] = path
    return out
