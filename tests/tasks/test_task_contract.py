"""A user's own task by package.module:Class: loaded by the task registry, checked against the
Task contract once, trained like a built-in one; a broken one is named with the rule it breaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.tasks import TASKS, check_task, make_task, task_class, task_names
from windtunnel.tasks.hmm import HMMTask
from windtunnel.train.config import RunConfig, load_profile, resolve_run
from windtunnel.train.trainer import train

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"


@pytest.fixture(autouse=True)
def user_modules(monkeypatch):
    """The helper module beside this file (user_tunnels.py) and examples/my_task.py importable."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.syspath_prepend(str(EXAMPLES))


def tiny(task: str, task_params: dict, steps: int = 2) -> RunConfig:
    return RunConfig.build({
        "task": task, "task_params": task_params, "model": "lstm", "model_params": {"n_layers": 1, "d_model": 16},
        "train": {"steps": steps, "batch_size": 8, "checkpoints": 1, "threads": 1},
        "eval": {"n_sequences": 16, "batch_size": 16, "n_boot": 5},
    })


def test_a_user_task_loads_by_module_and_class_and_trains(tmp_path):
    cls = task_class("user_tunnels:CoinHMM")
    assert issubclass(cls, HMMTask) and cls.name == "user_tunnels:CoinHMM"
    assert HMMTask.name == "hmm" and "user_tunnels:CoinHMM" not in task_names()  # used, not registered
    task = make_task("user_tunnels:CoinHMM", {"S": 2, "O": 2, "K": 4})
    assert task.spec.name == "user_tunnels:CoinHMM"
    result = train(tiny("user_tunnels:CoinHMM", {"S": 2, "O": 2, "K": 4}), tmp_path / "run", progress=False)
    assert result.steps == 2 and "lengths" in result.eval
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["task"] == "user_tunnels:CoinHMM"


def test_the_example_task_keeps_the_contract_and_trains(tmp_path):
    cls = task_class("my_task:CoinFlip")
    check_task(cls)
    result = train(tiny("my_task:CoinFlip", {"n_flips": 6}), tmp_path / "run", progress=False)
    assert result.steps == 2
    assert tiny("my_task:CoinFlip", {}).run_name().startswith("my_task.CoinFlip-lstm-")


def test_a_profile_serves_a_user_task_through_the_builtin_task_it_subclasses():
    cfg = resolve_run("user_tunnels:CoinHMM", "lstm", "quick")
    assert cfg.task_params == load_profile("quick", "hmm")["task_params"] and cfg.profile == "quick"
    cfg = resolve_run("my_task:CoinFlip", "lstm", "quick")  # subclasses no built-in task: the defaults
    assert cfg.profile is None and cfg.task_params == {} and cfg.train == RunConfig.build(
        {"task": "hmm", "model": "lstm"}).train


def test_the_command_line_trains_a_user_task(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, [
        "train", "--task", "my_task:CoinFlip", "--model", "lstm", "--set", "task_params.n_flips=5",
        "--set", 'model_params={"n_layers": 1, "d_model": 16}', "--set", "train.steps=2",
        "--set", "train.batch_size=8", "--set", "eval.n_sequences=16", "--set", "eval.n_boot=5",
        "--out", str(tmp_path / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "run" / "eval.json").is_file()


@pytest.mark.parametrize("name, message", [
    ("user_tunnels:NotATask", r"task 'user_tunnels:NotATask' must be a subclass of windtunnel.tasks.Task"),
    ("user_tunnels:NoSample", (r"'user_tunnels:NoSample' breaks the Task contract: it does not implement "
                               r"hypothesis_space, sample, spec")),
    ("user_tunnels:NoConfig", (r"'user_tunnels:NoConfig' breaks the Task contract: it needs a class attribute "
                               r"Config, a subclass of windtunnel.tasks.TaskConfig")),
    ("user_tunnels:Unnormalised", (r"'user_tunnels:Unnormalised' breaks the Task contract: every posterior row "
                                   r"of batch.probs must be normalised .*summing to 0.5")),
    ("user_tunnels:NatsEntropy", r"batch.entropy must be the entropy of the exact posterior in bits"),
    ("user_tunnels:ShortTarget", r"batch.target must have shape \(4, 20\) .* got \(4, 19\)"),
    ("user_tunnels:GlobalRandom", r"sample must draw from the generator it is given alone"),
    ("user_tunnels:NotABatch", r"must return a windtunnel.tasks.Batch, got dict"),
    ("user_tunnels:Missing", r"module 'user_tunnels' has no attribute 'Missing'"),
    ("nowhere_tunnels:Task", r"cannot import module 'nowhere_tunnels'"),
    ("not a name:X", r"task 'not a name:X' is not a registered name nor package.module:Class"),
    ("nope", r"unknown task 'nope'; available: bijection, .*, or a user's package.module:Class"),
])
def test_a_broken_user_task_is_named_with_the_rule_it_breaks(name, message):
    with pytest.raises(ConfigError, match=message):
        task_class(name)
    with pytest.raises(ConfigError, match=message):  # the same from a run config and the command line
        resolve_run(name, "lstm", None)


def test_a_broken_task_fails_before_any_file_is_written(tmp_path):
    res = CliRunner().invoke(app, ["train", "--task", "user_tunnels:Unnormalised", "--out", str(tmp_path / "run")])
    assert res.exit_code == 2 and "breaks the Task contract" in res.output
    assert not (tmp_path / "run").exists()


def test_a_loaded_task_is_checked_once(monkeypatch):
    calls = []
    monkeypatch.setattr(TASKS, "check", lambda cls: calls.append(cls) or check_task(cls))
    first = task_class("user_tunnels:Cached")
    assert task_class("user_tunnels:Cached") is first and calls == [first]
    assert task_class("windtunnel.tasks.hmm:HMMTask") is HMMTask and HMMTask.name == "hmm"  # a built-in one


def test_the_docs_show_the_example_whole():
    docs = (HERE.parents[1] / "docs" / "tasks.md").read_text()
    assert (EXAMPLES / "my_task.py").read_text() in docs
