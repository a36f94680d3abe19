"""Training runs: run directory, checkpoints, exact resume, evaluation, bad input."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from windtunnel.config import ConfigError
from windtunnel.train import loop as trainer_mod  # the step (loss_fn, check_loss) lives in the loop
from windtunnel.train.checkpoint import CheckpointError, list_checkpoints, load_weights, log_spaced_steps
from windtunnel.train.config import RunConfig, resolve_run
from windtunnel.train.trainer import TrainingError, build, lr_at, train


def final_weights(run_dir):
    step, path = list_checkpoints(run_dir)[-1]
    return step, load_file(str(path / "model.safetensors"))


def test_run_directory_contents(tiny_config, tmp_path):
    cfg = tiny_config()
    res = train(cfg, tmp_path / "run", progress=False)
    d = res.run_dir
    assert json.loads((d / "config.json").read_text()) == cfg.model_dump(mode="json")
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 31))
    assert all(math.isfinite(r["loss"]) for r in rows) and "probe_entropy_error" in rows[-1]
    assert {"probe_kl_bayes_model", "probe_accuracy"} <= set(rows[-1])  # bijection: categorical, integer answers
    steps = [s for s, _ in list_checkpoints(d)]
    assert steps[0] == 0 and steps[-1] == 30 and len(steps) >= 4
    ev = json.loads((d / "eval.json").read_text())
    main = ev["lengths"]["5"]
    assert main["n_examples"] == 64 and 0 <= main["entropy_error_mean_abs"]["value"] < 2
    assert res.n_params == ev["n_params"] and ev["steps"] == 30
    assert ev["baselines"]["5"]["uniform"]["entropy_error_mean_abs"] > 0


def test_training_reduces_loss_and_error(tiny_config, tmp_path):
    res = train(tiny_config(steps=150), tmp_path / "run", progress=False)
    rows = [json.loads(x) for x in (res.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["loss"] for r in rows[-10:]) < sum(r["loss"] for r in rows[:10])
    err = res.eval["lengths"]["5"]["entropy_error_mean_abs"]["value"]
    assert err < res.eval["baselines"]["5"]["uniform"]["entropy_error_mean_abs"]


def test_resume_gives_the_same_weights(tiny_config, tmp_path, monkeypatch):
    cfg = tiny_config(resume_every_s=1e-6)  # every step is resumable
    train(cfg, tmp_path / "a", progress=False)

    calls = {"n": 0}
    real = trainer_mod.loss_fn

    def dying(*a, **k):
        calls["n"] += 1
        if calls["n"] == 17:
            raise KeyboardInterrupt  # killed during step 17
        return real(*a, **k)

    monkeypatch.setattr(trainer_mod, "loss_fn", dying)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "b", progress=False)
    monkeypatch.setattr(trainer_mod, "loss_fn", real)
    assert max(s for s, _ in list_checkpoints(tmp_path / "b")) == 16
    res = train(cfg, tmp_path / "b", progress=False)
    assert res.steps == 30
    (sa, wa), (sb, wb) = final_weights(tmp_path / "a"), final_weights(tmp_path / "b")
    assert sa == sb == 30 and all(torch.equal(wa[k], wb[k]) for k in wa)
    rows = [json.loads(x)["step"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert rows == list(range(1, 31))  # no duplicated or lost log lines


def test_killed_process_resumes_to_the_same_weights(tmp_path):
    """SIGKILL a real `windtunnel train` process mid-run, resume it, compare with a clean run."""
    args = [
        sys.executable, "-m", "windtunnel", "train", "--task", "bijection", "--model", "lstm", "--quiet",
        "--set", "task_params={\"V\":6,\"L\":5}", "--set", "model_params={\"n_layers\":1,\"d_model\":16}",
        "--set", "train.steps=400", "--set", "train.batch_size=8", "--set", "train.resume_every_s=0.05",
        "--set", "eval.n_sequences=32", "--set", "eval.n_boot=10",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    subprocess.run([*args, "--out", str(tmp_path / "clean")], check=True, env=env, capture_output=True)
    proc = subprocess.Popen([*args, "--out", str(tmp_path / "killed")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        cks = list_checkpoints(tmp_path / "killed")
        if any((p / "optim.safetensors").exists() and s > 50 for s, p in cks):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "eval.json").exists(), "the run finished before it was killed"
    subprocess.run([*args, "--out", str(tmp_path / "killed")], check=True, env=env, capture_output=True)
    (sa, wa), (sb, wb) = final_weights(tmp_path / "clean"), final_weights(tmp_path / "killed")
    assert sa == sb == 400 and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_finished_run_is_not_retrained(tiny_config, tmp_path):
    cfg = tiny_config()
    train(cfg, tmp_path / "run", progress=False)
    mtime = (tmp_path / "run" / "eval.json").stat().st_mtime_ns
    res = train(cfg, tmp_path / "run", progress=False)
    assert res.steps == 30 and (tmp_path / "run" / "eval.json").stat().st_mtime_ns == mtime


def test_other_config_in_same_directory_is_refused(tiny_config, tmp_path):
    train(tiny_config(), tmp_path / "run", progress=False)
    before = (tmp_path / "run" / "config.json").read_text()
    with pytest.raises(ConfigError, match="different config"):
        train(tiny_config(lr=1e-2), tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "config.json").read_text() == before


def test_non_finite_loss_stops_with_a_clear_error(tiny_config, tmp_path, monkeypatch):
    real = trainer_mod.loss_fn
    monkeypatch.setattr(trainer_mod, "loss_fn", lambda *a: real(*a) * float("nan"))
    with pytest.raises(TrainingError, match="non-finite loss"):
        train(tiny_config(), tmp_path / "run", progress=False)
    assert list_checkpoints(tmp_path / "run")[0][0] == 0  # the initial checkpoint is kept


def test_corrupt_and_missing_checkpoints(tiny_config, tmp_path):
    cfg = tiny_config()
    train(cfg, tmp_path / "run", progress=False)
    _, model = build(cfg)
    step, path = list_checkpoints(tmp_path / "run")[-1]
    (path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_weights(model, path)
    with pytest.raises(CheckpointError, match="missing"):
        load_weights(model, tmp_path / "nowhere")


def test_stray_temporary_checkpoint_is_ignored(tiny_config, tmp_path):
    cfg = tiny_config(resume_every_s=1e-6, steps=10)
    train(cfg, tmp_path / "run", progress=False, evaluate_at_end=False)
    stray = tmp_path / "run" / "checkpoints" / ".tmp_step_0000011_x"
    stray.mkdir()
    (stray / "model.safetensors").write_bytes(b"half")
    assert max(s for s, _ in list_checkpoints(tmp_path / "run")) == 10


def test_schedules():
    cfg = RunConfig.build(
        {"task": "bijection", "model": "lstm", "train": {"steps": 100, "warmup": 10, "schedule": "cosine"}}).train
    assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(55, cfg) == pytest.approx(0.5) and lr_at(100, cfg) == pytest.approx(0.0, abs=1e-12)
    assert log_spaced_steps(1000, 3)[0] == 0 and log_spaced_steps(1000, 3)[-1] == 1000


def test_bad_inputs_are_named():
    with pytest.raises(ConfigError, match="unknown task"):
        resolve_run("nope", "transformer")
    with pytest.raises(ConfigError, match="unknown"):
        build(RunConfig.build({"task": "bijection", "model": "nope"}))
    with pytest.raises(ConfigError, match="position table"):
        build(RunConfig.build({"task": "bijection", "model": "transformer", "model_params": {"max_len": 5}}))
    with pytest.raises(ConfigError, match="train.steps"):
        resolve_run("bijection", "transformer", overrides={"train.steps": -1})
    with pytest.raises(ConfigError, match="loss"):
        trainer_mod.check_loss("gaussian_nll", build(RunConfig.build({"task": "bijection", "model": "lstm"}))[0])


def test_hmm_length_generalisation_sizes_the_position_table(tmp_path):
    cfg = RunConfig.build(
        {
            "task": "hmm", "task_params": {"K": 4}, "model": "transformer",
            "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
            "train": {"steps": 3, "batch_size": 4}, "eval": {"n_sequences": 16, "lengths": [6, 8], "n_boot": 5},
        }
    )
    res = train(cfg, tmp_path / "run", progress=False)
    assert set(res.eval["lengths"]) == {"4", "6", "8"}
    assert res.eval["lengths"]["8"]["n_positions"] == 8


@pytest.mark.parametrize("path", ["torch", "cpp"])
def test_mamba_resume_gives_the_same_weights(tmp_path, monkeypatch, path):
    """Bit-identical resume holds for mamba on each CPU path (the C++ kernels' sums do not depend
    on thread timing)."""
    from windtunnel.models.ops import scan_ext

    if path == "cpp" and not scan_ext.cpp_available()[0]:
        pytest.skip(f"the C++ kernels do not build here ({scan_ext.cpp_available()[1]})")
    monkeypatch.setattr(scan_ext, "use_cpp", lambda: path == "cpp")
    cfg = RunConfig.build({
        "task": "bijection", "task_params": {"V": 6, "L": 5}, "model": "mamba",
        "model_params": {"n_layers": 2, "d_model": 12},
        "train": {"steps": 12, "batch_size": 8, "lr": 3e-3, "checkpoints": 2, "resume_every_s": 1e-6},
        "eval": {"n_sequences": 16, "batch_size": 16, "n_boot": 5},
    })
    train(cfg, tmp_path / "a", progress=False, evaluate_at_end=False)
    calls = {"n": 0}
    real = trainer_mod.loss_fn

    def dying(*a, **k):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(trainer_mod, "loss_fn", dying)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "b", progress=False, evaluate_at_end=False)
    monkeypatch.setattr(trainer_mod, "loss_fn", real)
    train(cfg, tmp_path / "b", progress=False, evaluate_at_end=False)
    (sa, wa), (sb, wb) = final_weights(tmp_path / "a"), final_weights(tmp_path / "b")
    assert sa == sb == 12 and all(torch.equal(wa[k], wb[k]) for k in wa)
