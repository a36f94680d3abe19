"""Experiment trackers (--log): each installed one read back with its own reader and compared with
metrics.jsonl and the config; a tracker that fails mid-run neither stops nor loses the run."""

import glob
import importlib.util
import json
import math
import struct
import sys
import warnings

import pytest

from windtunnel.config import ConfigError
from windtunnel.train import tracking as tracking_mod
from windtunnel.train.tracking import eval_metrics, flatten, parse_trackers
from windtunnel.train.trainer import Until, train


def rows_of(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def numeric(row):
    return {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}


def small(tiny_config, **train_kw):
    return tiny_config(steps=12, eval_every=4, checkpoints=1, **train_kw)


def test_parse_trackers_names(monkeypatch):
    assert parse_trackers(None) == () and parse_trackers([]) == ()
    with pytest.raises(ConfigError, match="unknown tracker; allowed: tensorboard, mlflow, wandb"):
        parse_trackers(["nosuch"])
    monkeypatch.setattr(tracking_mod, "require", lambda *a: None)
    assert parse_trackers(["mlflow,wandb", " MLflow ", "tensorboard"]) == ("mlflow", "wandb", "tensorboard")


def test_a_missing_extra_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # the extra not installed
    with pytest.raises(ConfigError, match=r"--log wandb needs the optional package 'wandb' of the 'wandb' extra.*"
                                          r"make setup EXTRAS=wandb"):
        parse_trackers("wandb")


def test_missing_extra_writes_nothing(tiny_config, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ConfigError, match="EXTRAS=mlflow"):
        train(small(tiny_config), tmp_path / "run", progress=False, trackers=["mlflow"])
    assert list(tmp_path.iterdir()) == []


def test_eval_metrics_flattens_the_numbers():
    ev = {"lengths": {"5": {"entropy_error_mean_abs": {"value": 0.1, "lo": 0.05, "hi": 0.2}, "n_examples": 64,
                            "curves": {"h_model": [1.0]}, "step": [1]}},
          "baselines": {"5": {"uniform": {"entropy_error_mean_abs": 1.5}}}, "main_length": 5, "length_field": "L",
          "n_params": 100, "steps": 12, "train_seconds": 0.5}
    assert eval_metrics(ev) == {
        "eval/5/entropy_error_mean_abs": 0.1, "eval/5/entropy_error_mean_abs/lo": 0.05,
        "eval/5/entropy_error_mean_abs/hi": 0.2, "eval/5/n_examples": 64.0,
        "eval/5/baseline/uniform/entropy_error_mean_abs": 1.5, "eval/n_params": 100.0, "eval/steps": 12.0,
        "eval/train_seconds": 0.5,
    }


def test_tensorboard(tiny_config, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    cfg = small(tiny_config)
    res = train(cfg, tmp_path / "run", progress=False, trackers="tensorboard")
    rows = rows_of(res.run_dir)
    acc = EventAccumulator(str(res.run_dir / "tensorboard"), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    for key in ("loss", "lr", "grad_norm", "probe_entropy_error", "probe_kl_bayes_model", "probe_accuracy"):
        want = [(r["step"], r[key]) for r in rows if key in r]
        got = [(e.step, e.value) for e in acc.Scalars(key)]
        assert [s for s, _ in got] == [s for s, _ in want], key
        assert all(math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-7) for (_, g), (_, w) in zip(got, want)), key
    assert len(acc.Scalars("probe_accuracy")) == 3  # steps 4, 8, 12
    main = res.eval["lengths"]["5"]["entropy_error_mean_abs"]["value"]
    assert acc.Scalars("eval/5/entropy_error_mean_abs")[0].value == pytest.approx(main)
    assert acc.Scalars("eval/5/entropy_error_mean_abs")[0].step == 12
    assert {"plots/calibration"} <= set(acc.Tags()["images"])
    content = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    params = {k: (v.number_value if v.HasField("number_value") else v.bool_value if v.HasField("bool_value")
                  else v.string_value) for k, v in start.hparams.items()}
    want = flatten(cfg.model_dump(mode="json"))
    assert params.keys() == want.keys()
    assert all(params[k] == (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
               for k, v in want.items())
    assert params["train.lr"] == pytest.approx(3e-3) and params["task_params.V"] == 6


def test_a_resumed_run_logs_each_step_once(tiny_config, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = small(tiny_config)
    train(cfg, tmp_path / "run", progress=False, trackers=["tensorboard"], until=Until(step=6))
    state = json.loads((tmp_path / "run" / "tracking.json").read_text())
    assert state["tensorboard"]["step"] == 6 and not state["tensorboard"].get("final")
    res = train(cfg, tmp_path / "run", progress=False, trackers=["tensorboard"])
    acc = EventAccumulator(str(res.run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.step for e in acc.Scalars("loss")] == list(range(1, 13))
    assert [e.value for e in acc.Scalars("loss")] == pytest.approx([r["loss"] for r in rows_of(res.run_dir)])


def test_mlflow(tiny_config, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    cfg = small(tiny_config)
    res = train(cfg, tmp_path / "run", progress=False, trackers=["mlflow"])
    state = json.loads((res.run_dir / "tracking.json").read_text())["mlflow"]
    assert state["tracking_uri"] == f"sqlite:///{(res.run_dir / 'mlflow.db').resolve()}"
    client = MlflowClient(state["tracking_uri"])
    run = client.get_run(state["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    rows = rows_of(res.run_dir)
    for key in ("loss", "lr", "seconds", "probe_entropy_error", "probe_kl_bayes_model", "probe_accuracy"):
        got = sorted((m.step, m.value) for m in client.get_metric_history(state["run_id"], key))
        want = [(r["step"], r[key]) for r in rows if key in r]
        assert got == [(s, pytest.approx(v)) for s, v in want], key
    assert run.data.params == {k: str(v) for k, v in flatten(cfg.model_dump(mode="json")).items()}
    assert run.data.metrics["eval/5/entropy_error_mean_abs"] == pytest.approx(
        res.eval["lengths"]["5"]["entropy_error_mean_abs"]["value"])
    arts = {a.path for a in client.list_artifacts(state["run_id"])} | {
        a.path for a in client.list_artifacts(state["run_id"], "plots")}
    assert {"eval.json", "plots/calibration.png"} <= arts


def wandb_records(path):
    """The records of an offline W&B run file (a LevelDB-style log of protobuf ``Record``s)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = open(path, "rb").read()
    assert data[:4] == b":W&B"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # the rest of a block is padding
            pos += left
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and n == 0:
            pos += left
            continue
        buf += data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):  # a full record, or the last piece of one
            rec = pb.Record()
            rec.ParseFromString(buf)
            out.append(rec)
            buf = b""
    return out


def test_wandb_offline(tiny_config, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    cfg = small(tiny_config)
    res = train(cfg, tmp_path / "run", progress=False, trackers=["wandb"])
    files = glob.glob(str(res.run_dir / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(files) == 1  # offline by default: nothing leaves the machine
    history: dict[int, dict] = {}
    config = {}
    for rec in wandb_records(files[0]):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
            history.setdefault(rec.history.step.num, {}).update(items)
        elif kind == "run":
            config.update({i.key: json.loads(i.value_json) for i in rec.run.config.update})
        elif kind == "config":
            config.update({i.key: json.loads(i.value_json) for i in rec.config.update})
    rows = rows_of(res.run_dir)
    assert sorted(history) == [r["step"] for r in rows]
    for r in rows:
        got = {k: v for k, v in history[r["step"]].items() if not k.startswith(("_", "eval/"))}
        assert got == pytest.approx(numeric(r))
    assert history[12]["eval/5/entropy_error_mean_abs"] == pytest.approx(
        res.eval["lengths"]["5"]["entropy_error_mean_abs"]["value"])
    config.pop("_wandb", None)
    assert config == flatten(cfg.model_dump(mode="json"))
    saved = res.run_dir / "wandb" / files[0].split("/")[-2] / "files"
    assert (saved / "eval.json").exists() and (saved / "plots" / "calibration.png").exists()


class Flaky:
    """A tracker whose log_metrics raises from its second call on."""

    name = "tensorboard"

    def __init__(self, run_dir, group, state):
        self.state, self.calls, self.closed = state, 0, False

    def log_params(self, params):
        pass

    def log_metrics(self, step, metrics):
        self.calls += 1
        if self.calls > 1:
            raise OSError("the tracker's disk is gone")

    def log_artifact(self, path):
        pass

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_a_failing_tracker_warns_once_and_the_run_goes_on(tiny_config, tmp_path, monkeypatch):
    made = []
    monkeypatch.setitem(tracking_mod.ADAPTERS, "tensorboard", lambda *a: made.append(Flaky(*a)) or made[-1])
    monkeypatch.setattr(tracking_mod, "require", lambda *a: None)  # no need for the real package here
    cfg = small(tiny_config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = train(cfg, tmp_path / "run", progress=False, trackers=["tensorboard"])
    ours = [w for w in caught if "--log tensorboard" in str(w.message)]
    assert len(ours) == 1 and "OSError: the tracker's disk is gone" in str(ours[0].message)
    assert made[0].calls == 2 and made[0].closed
    assert [r["step"] for r in rows_of(res.run_dir)] == list(range(1, 13))
    assert res.steps == 12 and res.eval["steps"] == 12 and (res.run_dir / "eval.json").exists()


def test_a_tracker_that_cannot_start_does_not_stop_the_run(tiny_config, tmp_path, monkeypatch):
    def broken(*a):
        raise ConnectionError("no server")

    monkeypatch.setitem(tracking_mod.ADAPTERS, "mlflow", broken)
    monkeypatch.setattr(tracking_mod, "require", lambda *a: None)
    with pytest.warns(RuntimeWarning, match="--log mlflow: could not start"):
        res = train(small(tiny_config), tmp_path / "run", progress=False, trackers="mlflow")
    assert res.eval["steps"] == 12


@pytest.mark.slow  # a minute on 2 busy cores: two processes, each importing the trackers
def test_a_sweep_logs_every_run_in_its_processes(tmp_path, monkeypatch):
    """`sweep --log`: the runs (two at once, each in its own process) get the names, not objects;
    MLflow holds them in one store and experiment of the sweep folder."""
    pytest.importorskip("tensorboard")
    from windtunnel.engine.execution import Execution
    from windtunnel.sweep import SweepConfig, run_sweep

    names = ["tensorboard"]
    if importlib.util.find_spec("mlflow") is not None:
        names.append("mlflow")
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    doc = {"name": "tiny", "profile": "quick", "jobs": 2,
           "overrides": ["train.steps=6", "train.batch_size=8", "train.checkpoints=1", "train.threads=1",
                         "train.eval_probe_size=8", "eval.n_sequences=16", "eval.batch_size=16", "eval.n_boot=10"],
           "experiments": [{"task": "bijection", "models": ["transformer", "lstm"], "match_capacity": None,
                            "overrides": ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1",
                                          "model_params.d_model=16"]}]}
    out = tmp_path / "sweep"
    outcome = run_sweep(SweepConfig.build(doc), out, Execution.quiet(trackers=names))
    assert len(outcome.trained) == 2
    for run in outcome.runs:
        state = json.loads((out / run.name / "tracking.json").read_text())
        assert all(state[n]["final"] and state[n]["step"] == 6 for n in names)
        assert glob.glob(str(out / run.name / "tensorboard" / "events.out.tfevents.*"))
    if "mlflow" in names:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
        found = client.search_runs([client.get_experiment_by_name("sweep").experiment_id])
        assert sorted(r.info.run_name for r in found) == sorted(r.name for r in outcome.runs)
        assert all(r.info.status == "FINISHED" and len(client.get_metric_history(r.info.run_id, "loss")) == 6
                   for r in found)
