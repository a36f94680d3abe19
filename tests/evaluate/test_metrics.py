"""Calibration metrics against hand-computed numbers (arithmetic in the comments)."""

import json
import math

import pytest
import torch

from windtunnel.evaluate.metrics import (
    AUTHORS_KL_EPS,
    Bootstrap,
    accuracy,
    bootstrap_ci,
    entropy_error,
    model_prediction,
    per_position,
    per_position_curve,
    summarize,
)
from windtunnel.tasks.base import Prediction

F64 = torch.float64


def cat(*rows):
    """A categorical Prediction of shape (B, 1, A) from B probability rows."""
    return Prediction(probs=torch.tensor(rows, dtype=F64).unsqueeze(1))


def test_uniform4_vs_bayes_uniform2():
    model = cat([0.25, 0.25, 0.25, 0.25])
    bayes = cat([0.5, 0.5, 0.0, 0.0])
    m = per_position(model, bayes)
    assert all(v.shape == (1, 1) and v.dtype == F64 for v in m.values())
    # H_model = log2 4 = 2, H_Bayes = log2 2 = 1, dh = 1
    assert m["h_model"].item() == pytest.approx(2.0)
    assert m["h_bayes"].item() == pytest.approx(1.0)
    assert m["dh"].item() == pytest.approx(1.0)
    # KL(B||M) = 2 * 0.5 * log2(0.5 / 0.25) = 1
    assert m["kl_bayes_model"].item() == pytest.approx(1.0)
    # the model puts 0.25 + 0.25 on answers Bayes rules out: KL(M||B) = inf, invalid mass 0.5
    assert math.isinf(m["kl_model_bayes"].item())
    assert m["invalid_mass"].item() == pytest.approx(0.5)
    # clipped at 1e-10: 2 * 0.25 * log2(0.25/0.5) + 2 * 0.25 * log2(0.25/1e-10)
    #   = -0.5 + 0.5 * log2(2.5e9) = -0.5 + 0.5 * 31.2192809... = 15.1096404...
    clipped = per_position(model, bayes, eps=AUTHORS_KL_EPS)
    assert clipped["kl_model_bayes"].item() == pytest.approx(15.10964047, abs=1e-7)
    assert clipped["kl_bayes_model"].item() == pytest.approx(1.0)


def test_entropy_per_example_before_averaging():
    # two one-hot examples on different answers: each has entropy 0 (the averaged
    # distribution [0.5, 0.5] would have 1 bit, which must not be what we report)
    m = per_position(cat([1.0, 0.0], [0.0, 1.0]), cat([1.0, 0.0], [0.0, 1.0]))
    assert per_position_curve(m["h_model"]).tolist() == [0.0]
    assert m["kl_model_bayes"].tolist() == [[0.0], [0.0]]
    assert m["invalid_mass"].tolist() == [[0.0], [0.0]]


def test_aggregations_differ():
    # one position, dh = +0.5 and -0.5: mean |dh| = 0.5; |mean dh| = |0| = 0
    dh = torch.tensor([[0.5], [-0.5]], dtype=F64)
    assert entropy_error(dh).item() == pytest.approx(0.5)
    assert entropy_error(dh, how="abs_mean").item() == pytest.approx(0.0)
    # two positions: [[0.5, 0.25], [-0.5, 0.25]]
    #   mean_abs = (0.5 + 0.25 + 0.5 + 0.25) / 4 = 0.375
    #   abs_mean = (|0.5 - 0.5| / 2 + |0.25 + 0.25| / 2) / 2 = (0 + 0.25) / 2 = 0.125
    dh = torch.tensor([[0.5, 0.25], [-0.5, 0.25]], dtype=F64)
    assert entropy_error(dh, "mean_abs").item() == pytest.approx(0.375)
    assert entropy_error(dh, "abs_mean").item() == pytest.approx(0.125)
    # positions subset [1]: both give 0.25
    assert entropy_error(dh, positions=[1]).item() == pytest.approx(0.25)
    assert entropy_error(dh, "abs_mean", positions=[1]).item() == pytest.approx(0.25)
    assert per_position_curve(dh).tolist() == pytest.approx([0.0, 0.25])
    assert per_position_curve(dh, positions=slice(1, 2)).tolist() == pytest.approx([0.25])
    with pytest.raises(ValueError):
        entropy_error(dh, how="median")


def test_gaussian():
    # model N(0, 1) from raw outputs (mean, log_var) = (0, 0); Bayes N(1, 2)
    model = model_prediction(torch.zeros(1, 1, 2), "gaussian")
    bayes = Prediction(mean=torch.ones(1, 1, dtype=F64), var=torch.full((1, 1), 2.0, dtype=F64))
    m = per_position(model, bayes)
    assert set(m) == {"h_model", "h_bayes", "dh", "kl_bayes_model", "kl_model_bayes"}
    # h = 0.5 log2(2 pi e var): 0.5 log2(2 pi e) = 2.0470956 for var 1; +0.5 for var 2
    assert m["h_model"].item() == pytest.approx(2.04709558, abs=1e-7)
    assert m["dh"].item() == pytest.approx(-0.5)
    # KL(N(0,1)||N(1,2)) = 0.5 (ln(2/1) + (1 + (0-1)^2)/2 - 1) nats = 0.5 ln 2 nats = 0.5 bits
    assert m["kl_model_bayes"].item() == pytest.approx(0.5)
    # KL(N(1,2)||N(0,1)) = 0.5 (ln(1/2) + (2 + 1)/1 - 1) = 1 - 0.5 ln 2 nats
    #   = 1/ln 2 - 0.5 bits = 1.4426950 - 0.5 = 0.9426950
    assert m["kl_bayes_model"].item() == pytest.approx(0.94269504, abs=1e-7)


def test_model_prediction_categorical_and_accuracy():
    # softmax([0, ln 3]) = [1/4, 3/4]
    pred = model_prediction(torch.tensor([[[0.0, math.log(3.0)]]]), "categorical")
    assert pred.probs.dtype == F64
    assert pred.probs[0, 0].tolist() == pytest.approx([0.25, 0.75])
    # argmax of [.1, .7, .2] is 1 (target 1: hit); argmax of [.5, .3, .2] is 0 (target 2: miss)
    probs = torch.tensor([[[0.1, 0.7, 0.2], [0.5, 0.3, 0.2]]], dtype=F64)
    assert accuracy(probs, torch.tensor([[1, 2]])).tolist() == [[1.0, 0.0]]
    with pytest.raises(ValueError):
        model_prediction(torch.zeros(1, 1, 3), "gaussian")


def test_bootstrap_ci():
    g = torch.Generator().manual_seed(123)
    x = torch.randn(4000, 5, generator=g, dtype=F64)
    est, lo, hi = bootstrap_ci(x[:100], n_boot=500, generator=0)
    assert est == pytest.approx(x[:100].mean().item())
    assert lo < est < hi
    # more sequences, narrower interval (width ~ 1/sqrt(B): 40x the rows, ~6x narrower)
    _, lo_big, hi_big = bootstrap_ci(x, n_boot=500, generator=0)
    assert hi_big - lo_big < 0.5 * (hi - lo)
    # reproducible for one seed (int or Generator), different for another
    assert bootstrap_ci(x[:100], n_boot=500, generator=0) == (est, lo, hi)
    assert bootstrap_ci(x[:100], n_boot=500, generator=torch.Generator().manual_seed(0)) == (est, lo, hi)
    assert bootstrap_ci(x[:100], n_boot=500, generator=1)[1:] != (lo, hi)
    # chunking changes nothing but memory
    chunked = bootstrap_ci(x[:100], n_boot=500, generator=0, max_elements=700)
    assert chunked == pytest.approx((est, lo, hi))
    # 1-D values, custom stat (abs_mean aggregation), constant values, infinite values
    assert bootstrap_ci(x[:100, 0], n_boot=50)[0] == pytest.approx(x[:100, 0].mean().item())
    e, _, _ = bootstrap_ci(x[:100], stat=lambda v: entropy_error(v, "abs_mean"), n_boot=50)
    assert e == pytest.approx(entropy_error(x[:100], "abs_mean").item())
    assert bootstrap_ci(torch.full((10, 3), 2.0), n_boot=50) == (2.0, 2.0, 2.0)
    inf = bootstrap_ci(torch.tensor([1.0, 2.0, math.inf]), n_boot=200)
    assert inf[0] == math.inf and inf[2] == math.inf and not math.isnan(inf[1])


def test_summarize_categorical_json():
    g = torch.Generator().manual_seed(0)
    bayes = torch.softmax(torch.randn(30, 4, 5, generator=g, dtype=F64), -1)
    bayes[..., 0] = 0.0  # answer 0 is ruled out
    bayes = bayes / bayes.sum(-1, keepdim=True)
    logits = torch.randn(30, 4, 5, generator=g)
    target = torch.randint(1, 5, (30, 4), generator=g)
    model = model_prediction(logits, "categorical")
    s = summarize(model, Prediction(probs=bayes), target=target, bootstrap=Bootstrap(200, seed=3))
    json.dumps(s, allow_nan=False)  # the default eps keeps KL(model||Bayes) finite
    pp = per_position(model, Prediction(probs=bayes), eps=AUTHORS_KL_EPS)
    for name, ref in [("entropy_error_mean_abs", entropy_error(pp["dh"])),
                      ("entropy_error_abs_mean", entropy_error(pp["dh"], "abs_mean")),
                      ("kl_model_bayes", pp["kl_model_bayes"].mean()),
                      ("invalid_mass", pp["invalid_mass"].mean()),
                      ("accuracy", accuracy(model.probs, target).mean())]:
        assert s[name]["value"] == pytest.approx(ref.item())
        assert s[name]["lo"] <= s[name]["value"] <= s[name]["hi"]
    assert s["kl_bayes_model"]["value"] > 0
    assert len(s["curves"]["h_model"]) == len(s["curves"]["abs_dh"]) == 4
    assert s == summarize(model, Prediction(probs=bayes), target=target, bootstrap=Bootstrap(200, seed=3))
    # exact KL: inf, still serialisable by json.dumps (as Infinity)
    exact = summarize(model, Prediction(probs=bayes), bootstrap=Bootstrap(20), eps=0.0)
    assert exact["kl_model_bayes"]["value"] == math.inf and "accuracy" not in exact
    json.dumps(exact)
    sub = summarize(model, Prediction(probs=bayes), bootstrap=Bootstrap(20), positions=[0, 2])
    assert sub["n_positions"] == 2 and len(sub["curves"]["h_bayes"]) == 2


def test_summarize_gaussian():
    g = torch.Generator().manual_seed(0)
    out = torch.randn(20, 3, 2, generator=g)
    bayes = Prediction(mean=torch.zeros(20, 3, dtype=F64), var=torch.ones(20, 3, dtype=F64))
    s = summarize(model_prediction(out, "gaussian"), bayes, target=torch.randn(20, 3, dtype=F64), bootstrap=Bootstrap(50))
    json.dumps(s, allow_nan=False)
    assert s["kind"] == "gaussian" and "invalid_mass" not in s and "accuracy" not in s
    assert s["kl_model_bayes"]["value"] > 0


def test_summarize_keywords_of_earlier_versions_warn_and_build_the_bootstrap():
    """compat.legacy_group: summarize(n_boot=, level=, seed=) is summarize(bootstrap=Bootstrap(...))."""
    g = torch.Generator().manual_seed(1)
    model = Prediction(probs=torch.softmax(torch.randn(12, 1, 3, generator=g, dtype=F64), -1))
    bayes = Prediction(probs=torch.full((12, 1, 3), 1 / 3, dtype=F64))
    with pytest.warns(DeprecationWarning, match=r"summarize\(n_boot=..., seed=...\) is deprecated"):
        old = summarize(model, bayes, n_boot=30, seed=2)
    assert old == summarize(model, bayes, bootstrap=Bootstrap(30, seed=2))
    with pytest.raises(TypeError, match="not both"):
        summarize(model, bayes, bootstrap=Bootstrap(30), level=0.9)
    with pytest.raises(TypeError, match="unexpected keyword"):
        summarize(model, bayes, resamples=30)
