"""Several runs at once on one machine (`--jobs`): each run in its own process, the same results as
one after another, failures reported, a stop signal passed on so every run keeps a checkpoint."""

import json
import signal
import subprocess
import sys
import time

import pytest
from sweep_tiny import tiny_sweep_doc

from windtunnel.config import ConfigError
from windtunnel.engine import execution as execution_module
from windtunnel.engine.execution import resolve_workers
from windtunnel.engine.jobs import Job, Outcome, run_jobs
from windtunnel.interrupt import StopFlag
from windtunnel.scorecard.score import scorecard_sweep
from windtunnel.sweep import Execution, SweepConfig, expand, read_manifest, run_sweep
from windtunnel.sweep.aggregate import read_csv
from windtunnel.train.checkpoint import latest_resumable

quiet = Execution.quiet()


def resolve_jobs(jobs, runs):
    return resolve_workers(jobs, [r.config.train.threads for r in runs])


def bijection_doc(**changes):
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None)
    doc.update(changes)
    return doc


def test_runs_at_once_give_the_results_of_runs_one_after_another(tmp_path):
    """Two at a time, each in its own process: the same run folders and the same numbers, and the
    diagnoses run in processes too."""
    doc = bijection_doc(diagnose={"models": ["transformer"], "n_sequences": 16, "analyses": ["value_manifold"]})
    serial = run_sweep(SweepConfig.build(doc), tmp_path / "serial", quiet)
    lines = []
    parallel = run_sweep(SweepConfig.build({**doc, "jobs": 2}), tmp_path / "parallel", quiet.but(log=lines.append))
    assert sorted(parallel.trained) == sorted(serial.trained) and len(parallel.trained) == 4
    assert "local backend: 2 runs at once, each in its own process" in lines
    assert any(line.startswith("started ") and "(2 running" in line for line in lines)
    ours = {r["run"]: r for r in read_csv(tmp_path / "parallel" / "results.csv")}
    for ref in read_csv(tmp_path / "serial" / "results.csv"):
        assert ours[ref["run"]]["kl_bayes_model"] == ref["kl_bayes_model"]  # bit for bit: one thread each
        assert ours[ref["run"]]["entropy_error"] == ref["entropy_error"]
    diagnosed = [r for r in parallel.runs if r.config.model == "transformer"]
    assert len(diagnosed) == 2
    for run in diagnosed:
        ours = json.loads((tmp_path / "parallel" / run.name / "diagnostics.json").read_text())
        ref = json.loads((tmp_path / "serial" / run.name / "diagnostics.json").read_text())
        assert ours["results"]["value_manifold"] == ref["results"]["value_manifold"]


def test_jobs_auto_divides_the_cores_by_the_runs_threads(monkeypatch, tiny_sweep):
    monkeypatch.setattr(execution_module, "cpu_cores", lambda: 8)
    runs = expand(tiny_sweep())  # train.threads = 1
    assert resolve_jobs("auto", runs) == 8 and resolve_jobs(3, runs) == 3 and resolve_jobs("2", runs) == 2
    assert resolve_jobs("auto", expand(tiny_sweep(), {"train.threads": 3})) == 2
    assert resolve_jobs("auto", expand(tiny_sweep(), {"train.threads": 0})) == 1  # torch's default: every core
    for bad in ("many", 0, "0", 2.5, 5000):
        with pytest.raises(ConfigError, match=r"jobs = .*allowed: an integer from 1 to 1024, or 'auto'"):
            resolve_jobs(bad, runs)


def test_jobs_is_checked_and_left_out_of_the_content_hash():
    assert SweepConfig.build(bijection_doc(jobs=4)).content_hash() == SweepConfig.build(bijection_doc()).content_hash()
    assert SweepConfig.build(bijection_doc(jobs="auto")).jobs == "auto"
    for bad in (0, "many", -1):
        with pytest.raises(ConfigError, match="jobs"):
            SweepConfig.build(bijection_doc(jobs=bad))


def test_the_quick_scorecard_has_the_budget_of_paper1_quick():
    from windtunnel.sweep import load_sweep

    quick = load_sweep("paper1-quick")
    card = scorecard_sweep("gru", "quick")
    assert card.overrides == quick.overrides == ["train.threads=1"] and card.jobs == quick.jobs == "auto"


@pytest.mark.parametrize("workers", [1, 2], ids=["in this process", "in worker processes"])
def test_a_failing_job_is_reported_and_the_others_finish(workers):
    """The same typed outcomes whether the jobs run here or in worker processes."""
    lines = []
    jobs = [Job("ok", time.sleep, (0.05,)), Job("bad", int, ("x",)), Job("ok too", abs, (-3,))]
    outcomes = run_jobs(jobs, quiet.but(workers=workers, log=lines.append), StopFlag())
    assert outcomes == {"ok": Outcome("ok", "finished", seconds=outcomes["ok"].seconds),
                        "bad": Outcome("bad", "failed", "ValueError: invalid literal for int() with base 10: 'x'",
                                       seconds=outcomes["bad"].seconds),
                        "ok too": Outcome("ok too", "finished", value=3, seconds=outcomes["ok too"].seconds)}
    if workers == 2:
        assert sum(line.startswith("started ") for line in lines) == 3
        assert sum(" finished (" in line for line in lines) == 2
    else:
        assert lines == ["[1/3] ok", "[2/3] bad", "  failed: ValueError: invalid literal for int() with base 10: 'x'",
                         "[3/3] ok too"]


@pytest.mark.parametrize("workers", [1, 2], ids=["in this process", "in worker processes"])
def test_a_chain_of_jobs_starts_each_next_one_as_its_last_ends(workers):
    """``more`` brings the jobs one's result makes due: a chain a -> b -> c runs beside a long job,
    each step started when the one before ends (in worker processes: before the long job ends),
    a failed job's outcome is asked too, and every outcome is returned."""
    lines, asked = [], []

    def more(outcome):
        asked.append((outcome.name, outcome.status))
        nxt = {"a": [Job("b", abs, (-2,))], "b": [Job("c", int, ("x",))]}
        return nxt.get(outcome.name, [])

    jobs = [Job("long", time.sleep, (1.5,), cost=2), Job("a", abs, (-1,), cost=1)]
    outcomes = run_jobs(jobs, quiet.but(workers=workers, log=lines.append), StopFlag(), more)
    assert {n: o.status for n, o in outcomes.items()} == {"long": "finished", "a": "finished", "b": "finished",
                                                         "c": "failed"}
    assert outcomes["b"].value == 2 and sorted(asked) == [("a", "finished"), ("b", "finished"), ("c", "failed"),
                                                         ("long", "finished")]
    if workers == 2:  # the chain ran on the second worker while the long job held the first
        assert [n for n, _ in asked][-1] == "long"
    else:
        assert lines[:2] == ["[1/2] long", "[2/2] a"] and "[3/3] b" in lines


def test_a_stopped_sweep_stops_every_run_at_a_checkpoint_and_resumes(tmp_path):
    """SIGTERM to the sweep while two runs train at once: each writes a resumable checkpoint and
    the sweep exits with 143; the same command finishes both with every step logged once."""
    overrides = ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1", "model_params.d_model=16",
                 "train.steps=800", "train.resume_every_s=0.05"]
    doc = bijection_doc(grid={}, jobs=2, experiments=[
        {"task": "bijection", "models": ["transformer", "lstm"], "match_capacity": None, "overrides": overrides}])
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "windtunnel", "sweep", str(path), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    runs = []
    while time.time() < deadline and proc.poll() is None:
        if (out / "sweep.json").exists():
            runs = [out / r.name for r in read_manifest(out)[1]]
            marks = [latest_resumable(r) if (r / "checkpoints").exists() else None for r in runs]
            if all(m is not None and int(m.name[5:]) > 20 for m in marks):
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "0 of 2 runs finished" in stderr and "to resume, run the same command again" in stderr, stderr
    assert "failed" not in stdout
    stopped = [int(latest_resumable(r).name[5:]) for r in runs]
    assert all(20 < s < 800 for s in stopped)

    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for run in runs:
        steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert steps == list(range(1, 801))
        assert not (run / ".lock").exists()
