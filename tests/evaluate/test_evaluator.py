"""The periodic probe logged during training agrees with the full evaluation on the same sequences."""

import pytest
import torch

from windtunnel.evaluate.evaluator import EvalSettings, evaluate, probe_metrics, sample_eval
from windtunnel.models import make_model
from windtunnel.tasks import make_task


@pytest.mark.parametrize("task_name,params", [("bijection", {"V": 4, "L": 3}), ("hmm", {"S": 3, "O": 3, "K": 5})])
def test_probe_metrics_match_the_evaluation(task_name, params):
    task = make_task(task_name, params)
    torch.manual_seed(0)
    model = make_model("transformer", task.spec, {"n_layers": 1, "n_heads": 2, "d_model": 16})
    probe = probe_metrics(model, task, sample_eval(task, 40, seed=3))
    main = evaluate(model, task, EvalSettings(n_sequences=40, seed=3, n_boot=2))
    s = main["lengths"][str(main["main_length"])]
    assert probe["probe_entropy_error"] == pytest.approx(s["entropy_error_mean_abs"]["value"], rel=1e-9)
    assert probe["probe_kl_bayes_model"] == pytest.approx(s["kl_bayes_model"]["value"], rel=1e-9)
    assert probe["probe_accuracy"] == pytest.approx(s["accuracy"]["value"], rel=1e-9)
    assert 0 <= probe["probe_accuracy"] <= 1


def test_probe_metrics_have_no_accuracy_for_gaussian_answers():
    task = make_task("regression", {"d": 2, "n_points": 4})
    torch.manual_seed(0)
    model = make_model("transformer", task.spec, {"n_layers": 1, "n_heads": 2, "d_model": 16})
    probe = probe_metrics(model, task, sample_eval(task, 8, seed=0))
    assert set(probe) == {"probe_entropy_error", "probe_kl_bayes_model"}


def test_evaluate_keywords_of_earlier_versions_warn_and_build_the_settings():
    """compat.legacy_group: evaluate(n_sequences=, seed=, ...) is evaluate(settings=EvalSettings(...))."""
    task = make_task("bijection", {"V": 4, "L": 3})
    torch.manual_seed(0)
    model = make_model("transformer", task.spec, {"n_layers": 1, "n_heads": 2, "d_model": 16})
    with pytest.warns(DeprecationWarning, match=r"evaluate\(n_sequences=..., seed=..., n_boot=...\) is deprecated"):
        old = evaluate(model, task, n_sequences=20, seed=1, n_boot=2)
    assert old == evaluate(model, task, EvalSettings(n_sequences=20, seed=1, n_boot=2))
    with pytest.raises(TypeError, match="not both"):
        evaluate(model, task, EvalSettings(), n_boot=2)
