"""`windtunnel diagnose` on a user's model from outside the package (examples/my_mixer.py): every
analysis that applies runs, the rest are skipped with a reason that names the missing capability."""

import json
import sys
from pathlib import Path

import pytest
from conftest import tiny_run_config
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.geometry import run_diagnostics
from windtunnel.train.trainer import train

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MIXER = {"n_layers": 2, "d_model": 16}

# a user model that declares nothing: no recurrent state, and no final norm either
PLAIN = '''
from my_mixer import EMAMixer


class Plain(EMAMixer):
    has_recurrent_state = False
    final_norm = None
'''


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "plain_mixer.py").write_text(PLAIN)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(mods))
    yield
    for name in ("my_mixer", "plain_mixer"):
        sys.modules.pop(name, None)


def test_diagnose_a_user_model_runs_what_applies_and_names_what_is_missing(tmp_path, user_modules):
    run = train(tiny_run_config(model="my_mixer:EMAMixer", model_params=MIXER, steps=6), tmp_path / "ema",
                progress=False).run_dir
    res = CliRunner().invoke(app, ["diagnose", str(run), "--n", "16", "--threads", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads((run / "diagnostics.json").read_text())
    assert doc["analyses_run"] == ["value_manifold", "logit_lens", "dynamics", "recurrent"]
    skipped = {k: v for k, v in doc["skipped"].items() if k != "filter_probe"}  # no filter mean on bijection
    assert skipped == {"key_frame": "no attention (model.has_attention is False)",
                       "attention": "no attention (model.has_attention is False)",
                       "ablation": "no head mask or block bypass (model.has_head_ablation is False)"}
    assert "no filter_mean latent" in doc["skipped"]["filter_probe"]
    r = doc["results"]
    assert [x["name"] for x in r["logit_lens"]["layers"]] == ["embed", "blocks.0.resid_post", "blocks.1.resid_post"]
    assert set(r["recurrent"]["trained"]["probe_per_layer"]) == {"blocks.0.resid_post", "blocks.1.resid_post"}
    assert r["recurrent"]["k"] == 6  # bijection: the argmax answer (Task.state_labels' default)
    assert "## Skipped" in (run / "diagnostics.md").read_text()
    with pytest.raises(ConfigError, match="does not apply.*model.has_attention is False"):
        run_diagnostics(run, analyses=["attention"], progress=False)


def test_a_user_model_without_final_norm_or_recurrent_state(tmp_path, user_modules):
    run = train(tiny_run_config(model="plain_mixer:Plain", model_params=MIXER, steps=4), tmp_path / "plain",
                progress=False).run_dir
    doc = run_diagnostics(run, n_sequences=16, progress=False)
    assert doc["analyses_run"] == ["value_manifold", "dynamics"]
    assert doc["skipped"]["logit_lens"] == "no final norm to read layers through (model.final_norm is None)"
    assert doc["skipped"]["recurrent"] == "no recurrent state (model.has_recurrent_state is False)"
