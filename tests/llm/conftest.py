"""Fixtures: tiny randomly initialised models of each family, saved to a temporary folder with a
small byte-level BPE tokenizer and loaded through the same path as a user's model."""

from __future__ import annotations

import pytest
from llm_tiny import FAMILIES, SMALL, build_model, build_tokenizer


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



@pytest.fixture(scope="session")
def pools(tmp_path_factory):
    """Every eighth prompt of the shipped mixed and math pools, as pool files (small runs)."""
    import json

    from windtunnel.llm.prompts import load_pool

    d = tmp_path_factory.mktemp("pools")
    out = {}
    for which in ("mixed", "math"):
        p = load_pool(which)
        f = d / f"{which}.json"
        f.write_text(json.dumps({"prompts": p["prompts"][::8]}))
        out[f"{which}_pool"] = str(f)
    return out


@pytest.fixture(scope="session")
def tiny_run(tiny_models, pools, tmp_path_factory):
    """(folder, llm.json document) of every analysis on the tiny GPT-NeoX, with its control (the default)."""
    from windtunnel.llm import run_llm

    out = tmp_path_factory.mktemp("run")
    return out, run_llm(str(tiny_models["gpt_neox"]), None, out, **SMALL, **pools)
