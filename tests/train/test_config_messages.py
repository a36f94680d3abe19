"""Errors in nested config fields name the full dotted field and what that section allows."""

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError, install_hint, parse_override, require
from windtunnel.llm.config import build_options
from windtunnel.train.config import resolve_run


@pytest.mark.parametrize("override, expected", [
    ("train.nosuch=1", "unknown field 'train.nosuch'; allowed fields of 'train': steps, batch_size, lr"),
    ("eval.nosuch=1", "unknown field 'eval.nosuch'; allowed fields of 'eval': n_sequences, batch_size, lengths"),
    ("task_params.nosuch=1", "unknown field 'task_params.nosuch'; allowed fields of 'task_params': V, L, format"),
    ("model_params.nosuch=1", "unknown field 'model_params.nosuch'; allowed fields of 'model_params': tie_head"),
    ("nosuch=1", "unknown field 'nosuch'; allowed fields: task, task_params, model"),
    ("train.steps=-1", "field 'train.steps' = -1: Input should be greater than or equal to 0; allowed: 0 <= value"),
    ("task_params.V=1", "field 'task_params.V' = 1: Input should be greater than or equal to 2; allowed: 2 <= value"),
    ("model_params.norm=x", "field 'model_params.norm' = 'x'"),
])
def test_nested_field_errors_name_the_section(override, expected):
    with pytest.raises(ConfigError) as info:
        resolve_run("bijection", "transformer", "quick", [parse_override(override)])
    assert expected in str(info.value)


def test_cross_field_check_of_a_section_names_it():
    with pytest.raises(ConfigError, match=r"train: betas must lie in \[0, 1\)"):
        resolve_run("bijection", "transformer", "quick", {"train.betas": [0.9, 1.5]})


def test_cli_names_the_nested_field():
    res = CliRunner().invoke(app, ["train", "--set", "train.nosuch=1"])
    assert res.exit_code == 2 and "allowed fields of 'train': steps" in res.output
    assert "allowed fields: task," not in res.output


def test_llm_threshold_errors_name_the_section():
    with pytest.raises(ConfigError, match="unknown field 'thresholds.nosuch'; allowed fields of 'thresholds': manifold_pc"):
        build_options({"thresholds.nosuch": 1})


def test_missing_optional_package_names_the_extra_and_the_command():
    with pytest.raises(ConfigError) as info:
        require("windtunnel_no_such_module", "llm", "windtunnel llm")
    msg = str(info.value)
    assert "windtunnel llm needs the optional package 'windtunnel_no_such_module' of the 'llm' extra" in msg
    assert install_hint("llm") in msg and "make setup EXTRAS=llm" in msg and ".venv/bin/pip install -e '.[llm]'" in msg


def test_forced_overrides_apply_last(monkeypatch):
    monkeypatch.setenv("WINDTUNNEL_FORCE_SET", "train.steps=3 llm.n_null=10")
    cfg = resolve_run("bijection", "transformer", "quick", {"train.steps": 500})
    assert cfg.train.steps == 3
    assert build_options({"n_null": 50}).n_null == 10
