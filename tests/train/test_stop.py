"""Stopping cleanly: SIGINT / SIGTERM checkpoint the current step, exit 130 / 143, and resume exactly."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from test_trainer import final_weights

from windtunnel import files
from windtunnel.config import parse_overrides
from windtunnel.interrupt import Interrupted
from windtunnel.train import loop as trainer_mod  # the step (loss_fn, check_loss) lives in the loop
from windtunnel.train.checkpoint import latest_resumable, list_checkpoints
from windtunnel.train.config import resolve_run
from windtunnel.train.trainer import train

OVERRIDES = ["task_params={\"V\":6,\"L\":5}", "model_params={\"n_layers\":1,\"d_model\":16}", "train.steps=300",
             "train.batch_size=8", "train.threads=1", "train.eval_every=10", "train.resume_every_s=1000",
             "eval.n_sequences=32", "eval.n_boot=10"]
ARGS = [sys.executable, "-m", "windtunnel", "train", "--task", "bijection", "--model", "lstm", "--quiet",
        *[a for o in OVERRIDES for a in ("--set", o)]]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The same run as the command line's, uninterrupted, in this process."""
    out = tmp_path_factory.mktemp("clean")
    train(resolve_run("bijection", "lstm", "quick", parse_overrides(OVERRIDES)), out, progress=False)
    return out


def logged_steps(run_dir):
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_checkpoints_the_current_step_and_resume_is_exact(clean, tmp_path, sig, code):
    out = tmp_path / "run"
    proc = subprocess.Popen([*ARGS, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (out / "metrics.jsonl").exists() and len(logged_steps(out)) >= 20:
            break
        time.sleep(0.02)
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == code, err
    assert f"stopped by {sig.name}: {out} stopped at step " in err
    assert "to resume, run the same command again: " in err and "Traceback" not in err
    stopped = latest_resumable(out)
    step = int(stopped.name[5:])
    assert 20 <= step < 300 and not (out / "eval.json").exists()
    assert logged_steps(out) == list(range(1, step + 1))  # the log covers exactly the checkpoint
    assert not (out / ".lock").exists()
    subprocess.run([*ARGS, "--out", str(out)], check=True, capture_output=True, timeout=300)
    (sa, wa), (sb, wb) = final_weights(clean), final_weights(out)
    assert sa == sb == 300 and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert logged_steps(out) == list(range(1, 301))


def test_a_second_signal_stops_at_once_and_leaves_no_half_checkpoint(clean, tmp_path, monkeypatch):
    """The first SIGINT arrives during step 40; the second while its checkpoint is being written."""
    cfg = resolve_run("bijection", "lstm", "quick", parse_overrides(OVERRIDES))
    real_loss, real_write = trainer_mod.loss_fn, files._write
    calls = {"loss": 0}

    def loss(*a, **k):
        calls["loss"] += 1
        if calls["loss"] == 40:
            os.kill(os.getpid(), signal.SIGINT)
        return real_loss(*a, **k)

    def write(path, f, data):
        if path.name == "optim.safetensors":
            os.kill(os.getpid(), signal.SIGINT)
        real_write(path, f, data)

    monkeypatch.setattr(trainer_mod, "loss_fn", loss)
    monkeypatch.setattr(files, "_write", write)
    with pytest.raises(Interrupted, match="stopped at once by a second SIGINT") as info:
        train(cfg, tmp_path, progress=False)
    assert info.value.exit_code == 130
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp")]
    assert max(s for s, _ in list_checkpoints(tmp_path)) < 40 and latest_resumable(tmp_path) is None
    assert signal.getsignal(signal.SIGINT) is not None  # the handler was put back
    monkeypatch.undo()
    train(cfg, tmp_path, progress=False)
    (sa, wa), (sb, wb) = final_weights(clean), final_weights(tmp_path)
    assert sa == sb == 300 and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert logged_steps(tmp_path) == list(range(1, 301))
