"""A sweep on the Ray backend (a local Ray instance) stopped mid-run: the runs in flight finish
their step and leave resumable checkpoints, as the local backend's do, and the same command
resumes them from there."""

import json
import signal
import subprocess
import sys
import time

import pytest
from sweep_tiny import tiny_sweep_doc

from windtunnel.sweep import read_manifest
from windtunnel.train.checkpoint import latest_resumable

#: no periodic resumable checkpoint in the first hour: a resumable one can only come from the stop
LONG = ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1", "model_params.d_model=16",
        "train.steps=1000", "train.resume_every_s=3600"]


def metric_steps(run) -> list[int]:
    path = run / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.exists() else []


def wait_until_both_train(proc, out, timeout=600):  # a guard against a hang: Ray starts slowly on loaded cores
    """The two run folders, once each has logged a step past 10 (both are in flight)."""
    deadline = time.time() + timeout
    runs: list = []
    while time.time() < deadline and proc.poll() is None:
        if not runs and (out / "sweep.json").exists():
            runs = [out / r.name for r in read_manifest(out)[1]]
        if runs and all(max(metric_steps(r), default=0) > 10 for r in runs):
            return runs
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"the two runs did not start in {timeout} s: {proc.communicate()[1][-2000:]}")


# SIGTERM (what a scheduler or `kill` sends) runs by default: ray.init installs a SIGTERM handler of
# its own, which the sweep's must replace. SIGINT (Ctrl-C) takes the same path once the driver's
# handler has run, so it runs with the slow tests. Each case starts Ray twice and trains 2 x 1000
# tiny steps (65-80 s measured on a loaded 2-core machine).
@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],
                         ids=["SIGTERM", "SIGINT"])
def test_stopped_ray_sweep_leaves_resumable_runs_and_resumes_them(tmp_path, signum):
    pytest.importorskip("ray")
    doc = tiny_sweep_doc(grid={"train.seed": [0, 1]}, primitives=None, experiments=[
        {"task": "bijection", "models": ["lstm"], "match_capacity": None, "overrides": LONG}])
    path, out = tmp_path / "sweep.json", tmp_path / "out"
    path.write_text(json.dumps(doc))
    args = [sys.executable, "-m", "windtunnel", "sweep", str(path), "--out", str(out), "--quiet", "--backend", "ray"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    runs = wait_until_both_train(proc, out)
    proc.send_signal(signum)
    err = proc.communicate(timeout=300)[1]  # timeouts here guard against a hang (loaded cores are slow)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err
    assert f"stopped by {name}: sweep tiny: 0 of 2 runs finished" in err, err
    assert "2 to run (" in err and "each resuming from its newest checkpoint" in err
    assert "to resume, run the same command again: " in err and "Traceback" not in err
    assert not (out / ".lock").exists()
    before = {}
    for run in runs:  # each run in flight wrote a resumable checkpoint where it stopped, and let go of its folder
        assert not (run / "eval.json").exists(), f"{run.name} finished before the stop"
        resume = latest_resumable(run)
        assert resume is not None, f"{run.name} left no resumable checkpoint"
        stopped_at = int(resume.name[5:])
        assert 10 < stopped_at < 1000 and metric_steps(run) == list(range(1, stopped_at + 1))
        assert not (run / ".lock").exists()
        before[run] = (stopped_at, (run / "metrics.jsonl").read_text().splitlines())

    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    assert "0 finished (skipped), 2 to run" in done.stdout
    for run, (stopped_at, lines) in before.items():
        # resumed from the checkpoint: the log up to it is kept as it was (a run restarted from
        # step 0 would rewrite it, with other timings), and the run went on to its end
        assert (run / "metrics.jsonl").read_text().splitlines()[:stopped_at] == lines
        assert metric_steps(run) == list(range(1, 1001))
        assert json.loads((run / "eval.json").read_text())["steps"] == 1000
    assert json.loads((out / "summary.json").read_text())["missing"] == []
