"""A sweep stopped by SIGINT / SIGTERM says which runs are done, and a rerun resumes where it stopped;
a second sweep on the same folder is refused."""

import json
import os
import signal
import socket
import subprocess
import time

import pytest
from sweep_tiny import tiny_sweep_doc, two_run_sweep, wait_for_second_run

from windtunnel.lock import FolderLocked
from windtunnel.sweep import Execution, SweepConfig, run_sweep
from windtunnel.train.checkpoint import latest_resumable


def test_stopped_sweep_says_what_is_done_and_resumes_where_it_stopped(tmp_path):
    args, out = two_run_sweep(tmp_path)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first, second = wait_for_second_run(proc, out)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, err
    assert f"stopped by SIGINT: sweep tiny: 1 of 2 runs finished ({first.name})" in err
    assert f"1 to run ({second.name}), each resuming from its newest checkpoint" in err
    assert "to resume, run the same command again: " in err and "Traceback" not in err
    assert json.loads((out / "summary.json").read_text())["missing"] == [second.name]
    stopped_at = int(latest_resumable(second).name[5:])
    steps = [json.loads(line)["step"] for line in (second / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, stopped_at + 1)) and stopped_at < 600

    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 finished (skipped), 1 to run" in done.stdout
    steps = [json.loads(line)["step"] for line in (second / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 601))
    assert not (out / ".lock").exists() and not (second / ".lock").exists()


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path):
    holder = {"pid": os.getppid(), "host": socket.gethostname(), "started": time.time(), "command": "windtunnel sweep x"}
    (tmp_path / ".lock").write_text(json.dumps(holder))
    with pytest.raises(FolderLocked, match=f"pid {os.getppid()} on host .*command: windtunnel sweep x"):
        run_sweep(SweepConfig.build(tiny_sweep_doc()), tmp_path, Execution.quiet())
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]  # nothing written
