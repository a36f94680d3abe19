"""`windtunnel tasks` and `windtunnel sample` as a user runs them."""

import json

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.tasks import make_task
from windtunnel.tasks.hmm import forward_filter

runner = CliRunner()


def test_tasks_lists_every_task_with_parameters():
    res = runner.invoke(app, ["tasks"])
    assert res.exit_code == 0
    for name in ("bijection", "hmm", "recall", "regression", "sula"):
        assert f"{name}:" in res.output
    assert "--V" in res.output and "hypothesis space" in res.output
    doc = json.loads(runner.invoke(app, ["tasks", "--json"]).output)
    bij = next(r for r in doc if r["name"] == "bijection")
    assert {p["name"] for p in bij["parameters"]} >= {"V", "L", "format"}
    assert bij["log10_hypotheses"] > 18


def test_sample_text_shows_posterior_and_entropy():
    res = runner.invoke(app, ["sample", "bijection", "--V", "6", "--L", "5", "--n", "2", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert "sequence 1:" in res.output and "H= 2.585 bits" in res.output


def test_sample_json_lets_anyone_recompute_the_posterior():
    res = runner.invoke(app, ["sample", "hmm", "--K", "4", "--n", "2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    import torch

    for seq in doc["sequences"]:
        lat = seq["latent"]
        T = torch.tensor(lat["transition"], dtype=torch.float64)[None]
        E = torch.tensor(lat["emission"], dtype=torch.float64)[None]
        obs = torch.tensor(lat["observations"])[None]
        torch.testing.assert_close(forward_filter(T, E, obs)[0], torch.tensor(seq["posterior"], dtype=torch.float64))
        assert [seq["inputs"][p] for p in doc["positions"]] == [o + 100 for o in lat["observations"]]
    assert len(doc["sequences"]) == 2 and doc["config"]["K"] == 4


def test_sample_json_regression_and_preset():
    doc = json.loads(runner.invoke(app, ["sample", "regression", "--preset", "small", "--n", "1", "--json"]).stdout)
    seq = doc["sequences"][0]
    assert len(seq["posterior_mean"]) == 8 and "weights" in seq["latent"]
    assert make_task("regression", preset="small").config.d == 4


def test_profile_is_a_deprecated_alias_of_preset():
    """`sample --profile` (the old name of a task preset) still works, with a one-line notice on stderr."""
    new = runner.invoke(app, ["sample", "recall", "--preset", "small", "--n", "1", "--json"])
    old = runner.invoke(app, ["sample", "recall", "--profile", "small", "--n", "1", "--json"])
    assert new.exit_code == old.exit_code == 0
    assert json.loads(old.stdout) == json.loads(new.stdout) and json.loads(old.stdout)["config"]["N"] == 8
    assert "deprecated" not in new.stderr
    notice = old.stderr.strip().splitlines()
    assert len(notice) == 1 and "--profile" in notice[0] and "deprecated" in notice[0] and "--preset" in notice[0]
    with pytest.warns(DeprecationWarning, match="preset"):
        assert make_task("recall", profile="small").config.N == 8


def test_tasks_lists_presets_under_the_new_name_and_the_old():
    records = json.loads(runner.invoke(app, ["tasks", "--json"]).stdout)
    recall = next(r for r in records if r["name"] == "recall")
    assert "small" in recall["presets"] and recall["profiles"] == recall["presets"]
    text = runner.invoke(app, ["tasks"]).stdout
    assert "  presets: paper, small" in text and "profiles:" not in text


def test_sample_takes_task_fields_as_set_and_as_short_options():
    by_set = runner.invoke(app, ["sample", "bijection", "--set", "task_params.V=6", "--set", "task_params.L=5", "--json"])
    short = runner.invoke(app, ["sample", "bijection", "--V", "6", "--L", "5", "--json"])
    assert by_set.exit_code == short.exit_code == 0
    assert json.loads(by_set.stdout) == json.loads(short.stdout)
    res = runner.invoke(app, ["sample", "bijection", "--set", "train.steps=5"])
    assert res.exit_code == 2 and "task_params.NAME=value" in res.output


def test_bad_input_gives_clear_errors():
    res = runner.invoke(app, ["sample", "bijection", "--V", "1"])
    assert res.exit_code == 2 and "field 'V'" in res.output and "2 <= value <= 512" in res.output
    res = runner.invoke(app, ["sample", "bijection", "--bogus", "1"])
    assert res.exit_code == 2 and "unknown field 'bogus'" in res.output
    res = runner.invoke(app, ["sample", "nope"])
    assert res.exit_code == 2 and "unknown task 'nope'" in res.output
    res = runner.invoke(app, ["sample", "hmm", "--profile", "huge"])
    assert res.exit_code == 2 and "unknown preset 'huge'" in res.output
