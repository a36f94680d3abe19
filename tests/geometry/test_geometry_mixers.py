"""`windtunnel diagnose` on every built-in mixer beyond the paper: each analysis either runs or is
skipped with the capability it lacks, as the model's capabilities say."""

import pytest
from conftest import tiny_run_config

from windtunnel.geometry import run_diagnostics
from windtunnel.geometry.diagnose import REGISTRY
from windtunnel.models import make_model
from windtunnel.tasks import make_task
from windtunnel.train.trainer import train

MIXERS = {"gru": {}, "linear_attention": {"n_heads": 2}, "deltanet": {"n_heads": 2}, "swa_transformer": {"n_heads": 2},
          "hybrid": {"n_heads": 2}}


@pytest.mark.parametrize("name", list(MIXERS))
def test_diagnose_runs_what_the_mixer_can_do(tmp_path, name):
    params = {"n_layers": 2, "d_model": 16, **MIXERS[name]}
    run = train(tiny_run_config(model=name, model_params=params, steps=4), tmp_path / name, progress=False).run_dir
    doc = run_diagnostics(run, n_sequences=16, progress=False)
    assert sorted(doc["analyses_run"] + list(doc["skipped"])) == sorted(REGISTRY.names())
    assert all(doc["skipped"].values())  # every skip says why
    model = make_model(name, make_task("bijection").spec, params)
    attention = {"key_frame", "attention"} <= set(doc["analyses_run"])
    assert attention == model.has_attention, doc["skipped"]
    assert ("recurrent" in doc["analyses_run"]) == model.has_recurrent_state, doc["skipped"]
    assert {"value_manifold", "dynamics"} <= set(doc["analyses_run"])
