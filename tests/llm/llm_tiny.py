"""Tiny randomly initialised models of each family and a small byte-level BPE tokenizer (helpers
for the llm tests, from :mod:`windtunnel.llm.tiny`; the fixtures live in conftest.py)."""

from windtunnel.llm.tiny import FAMILIES, TinyShape, build_model, build_tokenizer

__all__ = ["FAMILIES", "SMALL", "TinyShape", "build_model", "build_tokenizer"]

#: a tiny run's options: every analysis, a few prompts each, few resamples
SMALL = dict(n_per_quintile=3, sula_ks="0,1,4", sula_n_per_k=4, n_bootstrap=20, n_null=10, batch_size=32,
             intervention_layers="1;0,2", intervention_conditions="true_cut,random_cut,true_shift_plus")
