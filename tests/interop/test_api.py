"""The public Python API: ``windtunnel.load_run`` and ``windtunnel.results`` on a tiny run and a tiny sweep."""

import json
import shutil
import sys

import pytest
import torch

import windtunnel
from windtunnel.config import ConfigError
from windtunnel.interop import api
from windtunnel.sweep import Execution, SweepConfig, run_sweep
from windtunnel.sweep.aggregate import read_csv
from windtunnel.tasks.base import make_generator
from windtunnel.train.checkpoint import CheckpointError
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import train

pd = pytest.importorskip("pandas")

TINY_RUN = {
    "task": "bijection", "task_params": {"V": 8, "L": 5}, "model": "transformer",
    "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
    "train": {"steps": 12, "batch_size": 8, "lr": 3e-3, "checkpoints": 2, "threads": 1},
    "eval": {"n_sequences": 48, "batch_size": 48, "n_boot": 20, "lengths": [7]},
}
TINY = ["train.steps=12", "train.batch_size=8", "train.checkpoints=1", "train.threads=1",
        "eval.n_sequences=48", "eval.batch_size=48", "eval.n_boot=20"]
TINY_SWEEP = {
    "name": "tiny-api", "profile": "quick", "overrides": TINY, "grid": {"train.seed": [0, 1]}, "paper": "paper1",
    "experiments": [
        {"task": "bijection", "models": ["transformer", "lstm"],
         "overrides": ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1", "model_params.d_model=32"]},
        {"task": "hmm", "models": ["transformer"], "grid": {"train.seed": [0]},
         "overrides": ["model_params.n_layers=1", "model_params.d_model=32", "eval.lengths=[30]"]},
    ],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api") / "run"
    train(RunConfig.build(TINY_RUN), folder, progress=False)
    return folder


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api") / "sweep"
    run_sweep(SweepConfig.build(TINY_SWEEP), folder, Execution.quiet())
    return folder


def test_the_root_exports_the_api_lazily():
    assert windtunnel.load_run is api.load_run and windtunnel.results is api.results
    assert windtunnel.LoadedRun is api.LoadedRun
    assert {"load_run", "results"} <= set(dir(windtunnel))
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        windtunnel.nosuch  # noqa: B018


def test_load_run_gives_the_model_task_config_and_evaluation(run_dir):
    run = windtunnel.load_run(run_dir)
    rd = RunDir(run_dir)
    assert isinstance(run, windtunnel.LoadedRun)
    assert run.path == run_dir and run.config == rd.config and run.step == 12
    assert run.task.name == "bijection" and not run.model.training
    assert run.evaluation == json.loads((run_dir / "eval.json").read_text())
    _, model = rd.load_model()
    model.eval()
    batch = run.task.sample(4, make_generator(3, "eval"))
    with torch.no_grad():
        ours, theirs = run.model(batch.inputs, positions=batch.positions), model(batch.inputs, positions=batch.positions)
    assert torch.equal(ours, theirs)
    first = windtunnel.load_run(run_dir, step=0)
    assert first.step == 0
    assert any(not torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), run.model.state_dict().values()))
    with dataclass_frozen():
        run.step = 3


class dataclass_frozen:
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        from dataclasses import FrozenInstanceError

        assert kind is FrozenInstanceError, kind
        return True


def test_load_run_refuses_a_corrupt_or_unfinished_folder(run_dir, tmp_path):
    with pytest.raises(ConfigError, match="is not a run directory"):
        windtunnel.load_run(tmp_path)
    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    newest = RunDir(bad).checkpoint()[1]
    (newest / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="corrupt checkpoint weights"):
        windtunnel.load_run(bad)
    shutil.rmtree(bad / "checkpoints")
    with pytest.raises(CheckpointError, match="has no checkpoint to load"):
        windtunnel.load_run(bad)
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read run config"):
        windtunnel.load_run(bad)
    unevaluated = tmp_path / "uneval"
    shutil.copytree(run_dir, unevaluated)
    (unevaluated / "eval.json").unlink()
    assert windtunnel.load_run(unevaluated).evaluation is None
    with pytest.raises(ConfigError, match="has not been evaluated"):
        windtunnel.results(unevaluated)
    (unevaluated / "eval.json").write_text('{"lengths": ')
    with pytest.raises(ConfigError, match="cannot read the evaluation"):
        windtunnel.load_run(unevaluated)
    with pytest.raises(ConfigError, match="neither a run folder"):
        windtunnel.results(tmp_path)


def test_results_of_a_run(run_dir):
    df = windtunnel.results(run_dir)
    ev = json.loads((run_dir / "eval.json").read_text())
    metrics = {"entropy_error": "entropy_error_mean_abs", "kl_bayes_model": "kl_bayes_model",
               "kl_model_bayes": "kl_model_bayes", "accuracy": "accuracy"}
    assert len(df) == 2 * 4 and set(df["length"]) == {5, 7} and set(df["metric"]) == set(metrics)
    assert not df.duplicated(["run", "length", "metric"]).any()
    assert list(df.columns[: len(api.COLUMNS)]) == list(api.COLUMNS)
    for r in df.itertuples():
        s = ev["lengths"][str(r.length)][metrics[r.metric]]
        assert (r.value, r.lo, r.hi) == (s["value"], s["lo"], s["hi"])
        assert (r.mean, r.mean_lo, r.mean_hi, r.n_seeds) == (r.value, r.lo, r.hi, 1)
    assert df["is_main"].tolist() == [L == 5 for L in df["length"]]
    assert (df["run"] == "run").all() and df["experiment"].isna().all()
    cfg = RunDir(run_dir).config
    assert (df["task"] == "bijection").all() and (df["model"] == "transformer").all()
    assert (df["task_params.V"] == 8).all() and (df["train.lr"] == cfg.train.lr).all()
    assert (df["model_params.d_model"] == 16).all() and (df["eval.lengths"] == "[7]").all()
    assert (df["train.seed"] == cfg.train.seed).all() and "task_params" not in df.columns
    assert df["paper"].isna().all()  # the paper reports V = 20, not V = 8


def test_results_of_a_sweep_equal_its_tables(sweep_dir):
    df = windtunnel.results(sweep_dir)
    csv = read_csv(sweep_dir / "results.csv")
    table = read_csv(sweep_dir / "table.csv")
    metrics = list(api.METRICS)
    assert len(df) == sum(1 for r in csv for m in metrics if r.get(m) is not None)
    assert not df.duplicated(["experiment", "run", "length", "metric"]).any()
    assert df.attrs["missing"] == []
    by_run = {(r["experiment"], r["run"], r["length"]): r for r in csv}
    groups = {(g["experiment"], name, g["length"]): g for g in table for name in g["runs"].split()}
    for r in df.itertuples():
        row, g = by_run[(r.experiment, r.run, r.length)], groups[(r.experiment, r.run, r.length)]
        assert (r.value, r.lo, r.hi) == (row[r.metric], row[f"{r.metric}_lo"], row[f"{r.metric}_hi"])
        assert (r.mean, r.mean_lo, r.mean_hi, r.sd) == tuple(g[f"{r.metric}{s}"] for s in ("", "_lo", "_hi", "_sd"))
        assert (r.n_seeds, r.ci) == (g["n_seeds"], g["ci"])
        assert same(r.paper, g.get(f"paper_{r.metric}")) and same(r.paper_source, g.get(f"paper_{r.metric}_source"))
        assert same(r.baseline, row.get(f"baseline_{r.metric}"))
    bij = df[df["experiment"] == "bijection"]
    assert set(bij["train.seed"]) == {0, 1} and (bij["n_seeds"] == 2).all() and (bij["ci"] == "t over 2 seeds").all()
    assert (bij["mean_lo"] <= bij["mean"]).all() and (bij["mean"] <= bij["mean_hi"]).all()
    assert (bij["task_params.V"] == 6).all() and set(bij["model"]) == {"transformer", "lstm"}
    hmm = df[(df["experiment"] == "hmm") & (df["metric"] == "entropy_error")].set_index("length")
    assert hmm.loc[20, "paper"] == 0.049 and hmm.loc[30, "paper"] == 0.012  # paper1: K = 20, and length 30
    assert hmm.loc[30, "paper_source"] == "v1 model, authors' REPRODUCE file"
    assert (df[df["experiment"] == "hmm"]["task_params.K"] == 20).all()


def same(cell, value) -> bool:
    """A DataFrame cell equals a CSV value (an empty cell: NaN or None)."""
    return pd.isna(cell) if value is None else cell == value


def test_results_lists_unfinished_runs_and_goes_to_parquet(sweep_dir, tmp_path):
    pytest.importorskip("pyarrow")
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir, copy)
    doc = json.loads((copy / "sweep.json").read_text())
    gone = doc["runs"][0]["name"]
    (copy / gone / "eval.json").unlink()
    df = windtunnel.results(copy)
    assert df.attrs["missing"] == [gone] and gone not in set(df["run"])
    df.to_parquet(tmp_path / "results.parquet")
    back = pd.read_parquet(tmp_path / "results.parquet")
    assert back[["run", "metric", "value", "lo", "hi"]].equals(df[["run", "metric", "value", "lo", "hi"]])


def test_results_without_pandas_gives_the_install_hint(run_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError, match=r"windtunnel.results needs the optional package 'pandas' of the 'data' "
                                          r"extra.*make setup EXTRAS=data"):
        windtunnel.results(run_dir)
