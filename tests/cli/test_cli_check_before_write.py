"""Every command checks all of its arguments before it creates or writes anything: one bad
argument gives a non-zero exit, a message naming it, and no new file or folder."""

import importlib.util
import json
import os

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app

runner = CliRunner()

#: a one-experiment sweep file (written outside the folder that is watched)
SWEEP = {"name": "tiny", "profile": "quick", "overrides": ["train.steps=12", "train.batch_size=8", "train.threads=1"],
         "grid": {"train.seed": [0]},
         "experiments": [{"task": "bijection", "models": ["transformer", "lstm"],
                          "overrides": ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1"]}]}
HAS_RAY = importlib.util.find_spec("ray") is not None
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None

# (command line, what the message names); {sweep} is the sweep file. Each has exactly one bad
# argument, and --out (or the default folder under the working directory) in the watched folder.
CASES = [
    # train: the task, model and --set fields (checked by resolve_run before the run folder is made)
    (["train", "--model", "nope", "--out", "o"], "unknown model 'nope'"),
    (["train", "--task", "nope", "--out", "o"], "unknown task 'nope'"),
    (["train", "--profile", "nope", "--out", "o"], "nope"),
    (["train", "--set", "train.lr=-1", "--out", "o"], "train.lr"),
    (["train", "--set", "train.steps=-5"], "train.steps"),
    (["train", "--set", "nosuch.field=1", "--out", "o"], "nosuch"),
    (["train", "--set", "model_params.d_model=-8", "--out", "o"], "d_model"),
    (["train", "--log", "nosuch", "--out", "o"], "--log 'nosuch': unknown tracker"),
    (["train", "--log", "tensorboard,nosuch"], "--log 'nosuch': unknown tracker"),
    # eval: the run folder must exist
    (["eval", "o"], "not a run directory"),
    # run: the models and --set fields (expanded before the folder is made)
    (["run", "--models", "transformer,nope", "--out", "o"], "unknown model 'nope'"),
    (["run", "--set", "train.batch_size=0", "--out", "o"], "train.batch_size"),
    (["run", "--set", "nosuch.field=1"], "nosuch"),
    (["run", "--log", "nosuch", "--out", "o"], "--log 'nosuch': unknown tracker"),
    # sweep: jobs, --set, --grid, the backend and its cluster (jobs was checked after sweep.json was written)
    (["sweep", "{sweep}", "--jobs", "0", "--out", "o"], "jobs = '0'"),
    (["sweep", "{sweep}", "--jobs", "0", "--out", "o", "--dry-run"], "jobs = '0'"),
    (["sweep", "{sweep}", "--backend", "ray", "--jobs", "many", "--out", "o"], "jobs = 'many'"),
    (["sweep", "{sweep}", "--set", "train.lr=-1", "--out", "o"], "train.lr"),
    (["sweep", "{sweep}", "--set", "nosuch.field=1"], "nosuch"),
    (["sweep", "{sweep}", "--grid", "train.nosuch=1,2", "--out", "o"], "nosuch"),
    (["sweep", "{sweep}", "--grid", "nosuch.x=1", "--out", "o"], "grid key 'nosuch.x'"),
    (["sweep", "{sweep}", "--backend", "slurm", "--out", "o"], "backend = 'slurm'"),
    (["sweep", "nope", "--out", "o"], "unknown sweep 'nope'"),
    (["sweep", "{sweep}", "--log", "nosuch", "--out", "o"], "--log 'nosuch': unknown tracker"),
    pytest.param(["sweep", "{sweep}", "--backend", "ray", "--address", "auto", "--out", "o"], "--address auto",
                 # slow: under pytest -n another worker's local Ray could be the cluster `auto` joins
                 # (tests/sweep/test_sweep_run.py checks the same error in the fast suite)
                 marks=[pytest.mark.skipif(not HAS_RAY or os.path.exists("/tmp/ray/ray_current_cluster"),
                                           reason="needs ray, and no Ray cluster running on this machine"),
                        pytest.mark.slow],
                 id="sweep-ray-unreachable"),
    # scorecard: every argument before the tuning (which writes first) and the sweep
    (["scorecard", "gru", "--jobs", "0", "--out", "o"], "jobs = '0'"),
    (["scorecard", "gru", "--jobs", "0"], "jobs = '0'"),
    (["scorecard", "nope", "--out", "o"], "nope"),
    (["scorecard", "gru", "--primitives", "nosuch", "--out", "o"], "nosuch"),
    (["scorecard", "gru", "--profile", "nope", "--out", "o"], "nope"),
    (["scorecard", "gru", "--set", "nosuch.field=1", "--out", "o"], "nosuch"),
    (["scorecard", "gru", "--no-tune", "--set", "train.lr=-1", "--out", "o"], "train.lr"),
    (["scorecard", "gru", "--set", "train.lr=0.001", "--out", "o"], "--no-tune"),
    (["scorecard", "gru", "--set", "task_params.V=6", "--out", "o"], "V = 6"),
    (["scorecard", "gru", "--backend", "slurm", "--out", "o"], "backend = 'slurm'"),
    (["scorecard", "gru", "--log", "nosuch", "--out", "o"], "--log 'nosuch': unknown tracker"),
    # --model-set: a field of the model, a tunnel of the scorecard, a value its config allows, not the knob
    (["scorecard", "gru", "--model-set", "nosuch=1", "--out", "o"], "'nosuch' is not a field of model 'gru'"),
    (["scorecard", "gru", "--model-set", "nosuch=1"], "'nosuch' is not a field of model 'gru'"),
    (["scorecard", "gru", "--model-set", "mnist.n_layers=1", "--out", "o"], "'mnist' is not a tunnel"),
    (["scorecard", "gru", "--primitives", "sula", "--model-set", "hmm.n_layers=1", "--out", "o"], "'hmm' is not a tunnel"),
    (["scorecard", "gru", "--model-set", "n_layers=0", "--out", "o"], "n_layers = 0 is not allowed"),
    (["scorecard", "gru", "--model-set", "d_model=64", "--out", "o"], "'d_model' is the capacity knob"),
    (["scorecard", "gru", "--model-set", "n_layers", "--out", "o"], "field=value or TUNNEL.field=value"),
    (["scorecard", "transformer", "--model-set", "n_layers=1", "--out", "o"], "use --set"),
    (["scorecard", "gru", "--model-set", "n_layers=1", "--set", "model_params.n_layers=2", "--out", "o"], "choose one"),
    (["scorecard", "hybrid", "--no-rungs", "--primitives", "sula", "--model-set", "d_model=512", "--out", "o"],
     "no tunnel of the scorecard can be matched"),
    # tune: the search (rungs, eta, metric, grid), the base config, jobs
    (["tune", "bijection", "gru", "--compare-at", "0.5,0.2", "--out", "o"], "compare_at"),
    (["tune", "bijection", "gru", "--compare-at", "a,b", "--out", "o"], "--compare-at 'a,b'"),
    (["tune", "bijection", "gru", "--rungs", "a,b", "--out", "o"], "--rungs 'a,b'"),  # the deprecated spelling
    (["tune", "bijection", "gru", "--eta", "1", "--out", "o"], "eta"),
    (["tune", "bijection", "gru", "--metric", "nosuch", "--out", "o"], "metric"),
    (["tune", "bijection", "gru", "--grid", "train.lr=-1", "--out", "o"], "train.lr"),
    (["tune", "bijection", "gru", "--grid", "train.lr=-1"], "train.lr"),
    (["tune", "bijection", "gru", "--grid", "train.nosuch=1,2", "--out", "o"], "train.nosuch"),
    (["tune", "bijection", "gru", "--jobs", "0", "--out", "o"], "jobs = '0'"),
    (["tune", "bijection", "gru", "--set", "train.steps=-1", "--out", "o"], "train.steps"),
    (["tune", "bijection", "nope", "--out", "o"], "unknown model 'nope'"),
    # report: the folder must be a sweep folder or a run directory
    (["report", "o"], "neither a sweep folder"),
    (["report", "."], "neither a sweep folder"),
    # diagnose: the analyses, the threads, the run directory
    (["diagnose", "o", "--analyses", "nosuch"], "nosuch"),
    (["diagnose", ".", "--threads", "-1"], "--threads"),
    (["diagnose", "."], "not a run directory"),
    # export: the format first, then the run directory (the export is built before it is written)
    (["export", "o", "--to", "onnx", "--out", "x"], "--to 'onnx'"),
    (["export", "o", "--to", "transformerlens", "--out", "x"], "not a run directory"),
    # sample: the task's parameters (it writes nothing at all)
    (["sample", "bijection", "--V", "0"], "V"),
    # llm: the analyses, the options, the model (the folder was made before the model loaded)
    pytest.param(["llm", "gpt2", "--analyses", "nosuch", "--out", "o"], "nosuch",
                 marks=pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs the llm extra"), id="llm-analyses"),
    pytest.param(["llm", "gpt2", "--dtype", "float7", "--out", "o"], "dtype",
                 marks=pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs the llm extra"), id="llm-dtype"),
    pytest.param(["llm", "/nonexistent/model", "--out", "o"], "could not load model '/nonexistent/model'",
                 marks=pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs the llm extra"), id="llm-model"),
]


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def case_id(case):
    args = " ".join(case[0]).replace("{sweep}", "FILE").replace(" --out o", "")
    default_out = case[0][0] in ("train", "run", "sweep", "scorecard", "tune", "llm") and "--out" not in case[0]
    return args.replace("--", "").replace(" ", "-") + ("-default-folder" if default_out else "")


@pytest.mark.parametrize("args, names", CASES, ids=[c.id if hasattr(c, "id") else case_id(c) for c in CASES])
def test_one_bad_argument_writes_nothing(tmp_path, monkeypatch, args, names):
    sweep = tmp_path / "tiny.json"
    sweep.write_text(json.dumps(SWEEP))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # default folders (runs/...) land here too
    before = listing(tmp_path)
    res = runner.invoke(app, [a.replace("{sweep}", str(sweep)) for a in args])
    assert res.exit_code not in (0, None), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert names in res.output, res.output
    assert listing(tmp_path) == before, res.output


@pytest.mark.parametrize("tracker", ["tensorboard", "mlflow", "wandb"])
@pytest.mark.parametrize("command", [["train"], ["run", "--models", "transformer"], ["sweep", "{sweep}"], ["scorecard", "gru"]])
def test_a_missing_tracker_extra_writes_nothing(tmp_path, monkeypatch, command, tracker):
    """--log with a tracker whose extra is not installed (its import fails): the install hint, nothing written."""
    import sys

    sweep = tmp_path / "tiny.json"
    sweep.write_text(json.dumps(SWEEP))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setitem(sys.modules, tracker, None)  # `import tracker` raises ImportError
    before = listing(tmp_path)
    res = runner.invoke(app, [a.replace("{sweep}", str(sweep)) for a in command] + ["--log", tracker, "--out", "o"])
    assert res.exit_code == 2, res.output
    assert f"--log {tracker} needs the optional package '{tracker}'" in res.output, res.output
    assert f"make setup EXTRAS={tracker}" in res.output, res.output
    assert listing(tmp_path) == before, res.output
