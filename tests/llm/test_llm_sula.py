"""SULA for pretrained LMs: prompt format, exact posterior, label choice, controls, metrics."""

import math
import re

import numpy as np
import pytest

from windtunnel.config import ConfigError
from windtunnel.llm import sula_prompts as S
from windtunnel.tasks.sula import CARRIER_WORDS

LABELS = ("dax", "lug")


def _counts(text, labels=LABELS):
    found = re.findall(r": (\w+|\[MASK\])(?:,|\.)", text)
    return found.count(labels[0]), found.count(labels[1]), found


@pytest.fixture(scope="module")
def sets():
    return S.generate(S.Draws([0, 1, 2, 4, 8], 50, 0.9, seed=42), S.Wording(LABELS, ("mip", "zorb")), S_CONTROLS)


S_CONTROLS = ("lexical_remap", "shuffled", "ablation_labels", "ablation_carriers")


def test_prompt_format_and_counts(sets):
    main = sets["main"]
    assert len(main.texts) == 250 and list(np.bincount(main.k)[[0, 1, 2, 4, 8]]) == [50] * 5
    assert list(main.k) == sorted(main.k)  # k-major order
    for text, k in zip(main.texts, main.k):
        if k == 0:
            assert re.fullmatch(r"\w+:", text)
        else:
            assert re.fullmatch(r"(\w+: (dax|lug), )*\w+: (dax|lug)\. \w+:", text), text
            assert len(_counts(text)[2]) == k
        assert not text.endswith(" ")
        words = re.findall(r"(\w+):", text)
        assert all(w in CARRIER_WORDS for w in words)


def test_posterior_is_exact(sets):
    main = sets["main"]
    for text, _k, p, h in zip(main.texts, main.k, main.p_bayes, main.h_bayes):
        n1, n2, _ = _counts(text)
        expect = 1 / (1 + math.exp(-(n1 - n2) * math.log(9)))
        assert p == pytest.approx(expect, abs=1e-12)
        hb = -(expect * math.log2(expect) + (1 - expect) * math.log2(1 - expect)) if 0 < expect < 1 else 0.0
        assert h == pytest.approx(hb, abs=1e-12)
        if n1 == n2:
            assert h == pytest.approx(1.0)


def test_expected_bayes_entropy_by_k():
    """E[H_Bayes | k] by exact enumeration over the number of matching labels (Paper III's closed-form SULA table)."""
    table = {0: 1.000, 1: 0.469, 2: 0.258, 4: 0.078, 8: 0.008}
    for k, want in table.items():
        e = 0.0
        for m in range(k + 1):
            p = 1 / (1 + math.exp(-(2 * m - k) * math.log(9)))
            h = -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
            e += math.comb(k, m) * 0.9**m * 0.1 ** (k - m) * h
        assert e == pytest.approx(want, abs=1e-3)
        labels = [0] * k
        assert S._posterior_l1(labels, k, 0.9) == pytest.approx(1 / (1 + 9.0 ** -k))


def test_generation_is_seeded(sets):
    again = S.generate(S.Draws([0, 1, 2, 4, 8], 50, 0.9, seed=42), S.Wording(LABELS))
    assert again["main"].texts == sets["main"].texts
    assert S.generate(S.Draws([0, 1, 2, 4, 8], 50, 0.9, seed=1), S.Wording(LABELS))["main"].texts != sets["main"].texts


def test_controls(sets):
    main = sets["main"]
    remap = sets["lexical_remap"]
    assert np.array_equal(remap.h_bayes, main.h_bayes)
    assert remap.texts[-1] == main.texts[-1].replace("dax", "mip").replace("lug", "zorb")
    assert np.all(sets["shuffled"].h_bayes == 1.0) and np.all(sets["ablation_labels"].h_bayes == 1.0)
    for t, tm in zip(sets["ablation_labels"].texts, main.texts):
        assert "dax" not in t and "lug" not in t
        assert t.count("[MASK]") == len(_counts(tm)[2])
    carriers = sets["ablation_carriers"]
    assert np.array_equal(carriers.h_bayes, main.h_bayes)
    k8 = carriers.texts[-1]
    assert k8.startswith("[MASK]: ") and k8.count("[MASK]") == 8 and _counts(k8)[:2] == _counts(main.texts[-1])[:2]
    # the query word (the last) is kept
    assert k8.split(". ")[-1] == main.texts[-1].split(". ")[-1]
    assert all(s.meta["posterior"] for s in sets.values())


class _Tok:
    """A tokenizer stub: words in ``single`` are one token each (distinct ids, fixed across
    processes: ``hash`` of a str is salted per process and collided mod 1000 in CI), others two."""

    def __init__(self, single):
        self.ids = {w: 100 + i for i, w in enumerate(sorted(single))}

    def __call__(self, text, add_special_tokens=False):
        w = text.strip()
        return {"input_ids": [self.ids[w]] if w in self.ids else [1, 2]}


def test_single_token_labels_and_fallback():
    assert S.single_token_labels(_Tok({"lug", "zorb", "wug", "gax"}), ["dax", "lug", "mip", "zorb", "wug"], 2) == ["lug", "zorb"]
    # none of the candidates is a single token: the consonant-vowel-consonant sweep takes over
    assert S.single_token_labels(_Tok({"bab", "bac"}), ["dax"], 2) == ["bab", "bac"]
    with pytest.raises(ConfigError, match="single tokens"):
        S.single_token_labels(_Tok(set()), ["dax"], 2)


def test_model_posterior_and_calibration():
    lp = np.array([[0.2, 0.2], [0.09, 0.01], [0.0, 0.5]])
    p1, h, mass = S.model_posterior(lp)
    assert np.allclose(p1, [0.5, 0.9, 0.0]) and np.allclose(mass, [0.4, 0.1, 0.5])
    assert np.allclose(h, [1.0, -(0.9 * math.log2(0.9) + 0.1 * math.log2(0.1)), 0.0])
    c = S.calibration([1.0, 0.5, 0.2, 0.1], [1.0, 0.4, 0.4, 0.0], [0, 1, 1, 2])
    assert c["mae"] == pytest.approx((0 + 0.1 + 0.2 + 0.1) / 4)
    assert c["per_k"]["0"]["corr"] != c["per_k"]["0"]["corr"]  # NaN: H_Bayes constant at k = 0
    assert c["per_k"]["1"]["mae"] == pytest.approx(0.15)
    # the nulls: 1 bit everywhere, and the best constant (the median 0.4) by hand
    assert c["uniform_mae"] == pytest.approx((0 + 0.6 + 0.6 + 1.0) / 4)
    assert c["constant_mae"] == pytest.approx((0.6 + 0 + 0 + 0.4) / 4)
    assert all(S.constant_mae([1.0, 0.4, 0.4, 0.0]) <= np.abs(np.array([1.0, 0.4, 0.4, 0.0]) - x).mean() + 1e-12
               for x in np.linspace(0, 1, 101))  # no constant does better
    # the count-only predictor: the median within each k (k = 1: 0.4 and 0.4), exact for one prompt per k
    assert c["count_mae"] == pytest.approx(0.0)
    assert S.constant_mae([1.0, 0.2, 0.6, 0.0], [0, 1, 1, 2]) == pytest.approx((0 + 0.2 + 0.2 + 0) / 4)


def test_within_k_correlation_reads_the_labels_not_the_count():
    """An entropy that depends on k alone correlates with H_Bayes across prompts, but not within k;
    one that follows H_Bayes within each k does."""
    rng = np.random.default_rng(0)
    ks = np.repeat([1, 2, 4, 8], 40)
    h_bayes = np.exp(-ks / 3) * rng.uniform(0.2, 1.0, ks.size)
    by_count = 1.0 - ks / 10
    assert S.spearman(by_count, h_bayes)[0] > 0.5
    rho, p = S.within_k(by_count + 1e-3 * rng.standard_normal(ks.size), h_bayes, ks)
    assert abs(rho) < 0.3 and p > 0.01
    rho, p = S.within_k(h_bayes + 0.01 * rng.standard_normal(ks.size), h_bayes, ks)
    assert rho > 0.8 and p < 1e-6


def test_trajectory_intervals():
    ks = np.repeat([0, 1, 2], 20)
    pc1 = -ks + np.random.default_rng(0).normal(0, 0.1, 60)
    t = S.trajectory(pc1, ks, 200, 0)
    assert t["spearman_k_pc1"] < -0.9
    for k in "012":
        lo, hi = t["per_k"][k]["ci"]
        assert lo <= t["per_k"][k]["mean"] <= hi
