"""The MHA vs GQA/SW dissociation test, the attention types read from configs, and the claims'
verdicts: pure functions of llm.json numbers, checked on made-up models."""

from types import SimpleNamespace

import numpy as np
import pytest

from windtunnel.llm.architecture import architecture, classify
from windtunnel.llm.claims import _verdict, calibrated, paper_entry, paper_text
from windtunnel.llm.dissociation import dissociation, group_test


def _model(name, group, drop, spread=0.01, n=400, seed=0, random_weights=False):
    rng = np.random.default_rng(seed)
    reps = (drop + spread * rng.standard_normal(n)).tolist()
    return {"name": name, "group": group, "random_weights": random_weights,
            "focusing": {"relative_drop": drop, "monotone_fraction": None, "slope_bits_per_depth": None},
            "bootstrap": {"relative_drop": reps, "monotone_fraction": None, "slope_bits_per_depth": None}}


def test_attention_types_from_config():
    assert classify(16, 16)["attention"] == "MHA" and classify(16, 16)["group"] == "MHA"
    gqa = classify(32, 8)
    assert (gqa["attention"], gqa["kv_ratio"], gqa["group"], gqa["label"]) == ("GQA", 4.0, "GQA/SW", "GQA 32:8")
    assert classify(8, 1)["attention"] == "MQA"
    sw = classify(8, 8, sliding_window=4096)
    assert sw["attention"] == "MHA" and sw["group"] == "GQA/SW" and sw["label"] == "MHA + SW 4096"
    mix = architecture(SimpleNamespace(num_local_experts=8, num_experts_per_tok=2), 32, 8, 4096)
    assert mix["moe"] == {"experts": 8, "top_k": 2} and mix["label"] == "GQA 32:8 + SW 4096 + MoE 8 top-2"
    assert architecture(SimpleNamespace(), 4, 4, None)["moe"] is None


def test_exact_permutation_test_and_its_smallest_p():
    # 4 + 4 models, perfectly separated: 2 of the 70 splits are as extreme (two-sided)
    models = [_model(f"m{i}", "MHA", 0.8 + 0.01 * i, seed=i) for i in range(4)]
    models += [_model(f"g{i}", "GQA/SW", 0.3 + 0.01 * i, seed=10 + i) for i in range(4)]
    t = group_test(models, "relative_drop")
    assert t["permutation"]["n_splits"] == 70 and t["permutation"]["exact"]
    assert t["permutation"]["p"] == pytest.approx(2 / 70) and t["permutation"]["p_min"] == pytest.approx(2 / 70)
    assert t["effect"] == pytest.approx(0.5) and t["status"] == "differs"
    lo, hi = t["prompt_interval"]
    assert 0.48 < lo < 0.5 < hi < 0.52  # replicate spread 0.01 per model, averaged over 4 a side
    # the same separation with 2 + 2 models cannot reach 5%: said plainly
    t = group_test(models[:2] + models[4:6], "relative_drop")
    assert t["status"] == "too few models" and t["permutation"]["p_min"] == pytest.approx(2 / 6)
    assert "even the most extreme split gives p = 0.333" in t["conclusion"]


def test_one_model_on_a_side_and_no_model_on_a_side():
    models = [_model("m", "MHA", 0.8), _model("g1", "GQA/SW", 0.3, seed=1), _model("g2", "GQA/SW", 0.31, seed=2)]
    t = group_test(models, "relative_drop")
    assert t["status"] == "too few models" and "1 MHA, 2 GQA/SW" in t["conclusion"]
    assert "excludes 0: these models differ beyond prompt noise" in t["conclusion"]
    t = group_test(models[1:], "relative_drop")
    assert t["status"] == "no test" and "no MHA model" in t["conclusion"]
    # overlapping prompt noise: the interval includes 0
    noisy = [_model("m", "MHA", 0.50, spread=0.2), _model("g", "GQA/SW", 0.49, spread=0.2, seed=3)]
    assert "includes 0" in group_test(noisy, "relative_drop")["conclusion"]


def test_the_dissociation_is_over_the_models_it_is_given():
    """The comparison gives it the trained models alone (tests/llm/test_llm_compare.py): one test."""
    models = [_model("g", "GQA/SW", 0.4, seed=1), _model("h", "GQA/SW", 0.45, seed=2)]
    d = dissociation(models)
    assert set(d) == {"primary", "alpha", "min_per_side", "trained"}
    assert d["trained"]["relative_drop"]["status"] == "no test"


def test_verdicts_and_paper_values():
    # the control decides: not beaten = does not hold, whatever the criterion says
    assert [_verdict(True, True), _verdict(True, False), _verdict(False, True), _verdict(False, False),
            _verdict(None, True, "no control")] == ["holds", "partly", "does not hold", "does not hold", "not testable"]
    assert paper_entry("EleutherAI/Pythia-410m")["label"] == "Pythia-410M"  # by hub id, any case
    assert paper_entry("./my-model") is None
    assert paper_text([0.15, 0.2]) == "15.0%-20.0%" and paper_text([0.11, 0.13], share=False) == "0.11-0.13"
    assert paper_text("non-monotone") == "non-monotone" and paper_text(0.82) == "82.0%"


def test_calibrated_needs_entropy_that_reads_the_labels():
    """A random network's entropy sits near 1 bit whatever the labels say: it never beats the best
    constant (the median of H_Bayes) and does not follow H_Bayes within a k. Only a model whose
    entropy tracks the labels' evidence is calibrated; older files get the nulls from their prompts."""
    from windtunnel.llm.headline import _sula_nulls

    rng = np.random.default_rng(0)
    k = np.repeat([0, 1, 2, 4], 30)
    h_bayes = np.where(k == 0, 1.0, np.exp(-k / 2) * rng.uniform(0.3, 1.0, k.size))

    def row(h_model):
        nulls = _sula_nulls({"per_prompt": {"k": k.tolist(), "h_bayes": h_bayes.tolist(), "h_model": h_model.tolist()}})
        return {"sula_mae": float(np.abs(h_model - h_bayes).mean()), **{f"sula_{n}": v for n, v in nulls.items()}}

    flat, why = calibrated(row(0.96 + 0.01 * rng.standard_normal(k.size)))
    assert not flat and "best constant" in why
    follows, _ = calibrated(row(h_bayes + 0.05 * rng.standard_normal(k.size)))
    assert follows
    assert calibrated({"sula_mae": None}) == (False, "no SULA calibration measured")
