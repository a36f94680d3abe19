"""One writer per run folder: a second `windtunnel train` is refused, a dead holder's lock is taken over."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from windtunnel.lock import FolderLocked, acquire, folder_lock, release
from windtunnel.train.trainer import train

TRAIN = [sys.executable, "-m", "windtunnel", "train", "--task", "bijection", "--model", "lstm", "--quiet",
         "--set", "task_params={\"V\":6,\"L\":5}", "--set", "model_params={\"n_layers\":1,\"d_model\":16}",
         "--set", "train.batch_size=8", "--set", "train.threads=1", "--set", "eval.n_sequences=32",
         "--set", "eval.n_boot=10"]


def write_lock(folder, **holder):
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": "windtunnel train",
           **holder}
    (folder / ".lock").write_text(json.dumps(doc))


def test_second_train_process_is_refused_and_a_dead_holders_lock_is_taken_over(tmp_path, capsys):
    """Two real `windtunnel train` processes on one folder; then the first is killed with SIGKILL."""
    out = tmp_path / "run"
    first = subprocess.Popen([*TRAIN, "--set", "train.steps=1000000", "--out", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (out / "metrics.jsonl").exists() and time.time() < deadline:
            time.sleep(0.05)
        second = subprocess.run([*TRAIN, "--set", "train.steps=1000000", "--out", str(out)],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        assert f"pid {first.pid} on host {socket.gethostname()}, started " in second.stderr
        assert "train.steps=1000000" in second.stderr and "Traceback" not in second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert json.loads((out / ".lock").read_text())["pid"] == first.pid  # left behind by SIGKILL
    with folder_lock(out):
        assert f"taking over the lock of {out} left by pid {first.pid}" in capsys.readouterr().err
    assert not (out / ".lock").exists()


def test_a_second_writer_in_the_same_process_is_refused(tmp_path):
    lock = acquire(tmp_path)
    with pytest.raises(FolderLocked, match=f"pid {os.getpid()} on host"):
        acquire(tmp_path)
    release(lock)
    release(acquire(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_lock_from_another_host_is_never_guessed_stale(tmp_path):
    write_lock(tmp_path, host="elsewhere.example", pid=1)
    with pytest.raises(FolderLocked, match=r"pid 1 on host elsewhere.example.*delete .*\.lock"):
        acquire(tmp_path)


def test_a_reused_pid_does_not_hold_the_lock(tmp_path, capsys):
    write_lock(tmp_path, started=1.0)  # this process's PID, but the lock predates this process
    release(acquire(tmp_path))
    assert "taking over" in capsys.readouterr().err


def test_an_unreadable_lock_is_refused_with_its_path(tmp_path):
    (tmp_path / ".lock").write_text("{")
    with pytest.raises(FolderLocked, match="unreadable"):
        acquire(tmp_path)


def test_train_releases_its_lock_and_refuses_a_held_folder(tiny_config, tmp_path):
    cfg = tiny_config(steps=3, threads=1)
    write_lock(tmp_path / "run", pid=os.getppid())  # a live process on this host
    with pytest.raises(FolderLocked):
        train(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "config.json").exists()  # refused before writing anything
    (tmp_path / "run" / ".lock").unlink()
    train(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / ".lock").exists()
