"""Running sweeps: the local and Ray backends, skipping and resuming, the tables, the command."""

import json
import os
import shutil
import signal
import subprocess

import pytest
from sweep_tiny import TINY_OVERRIDES, tiny_sweep_doc, two_run_sweep, wait_for_second_run
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.engine.folders import is_finished, reuse_runs
from windtunnel.sweep import Execution, SweepConfig, SweepError, read_manifest, run_sweep
from windtunnel.sweep import run as sweep_run
from windtunnel.sweep.aggregate import read_csv
from windtunnel.train.checkpoint import list_checkpoints
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import TrainingError, Until, train

runner = CliRunner()
quiet = Execution.quiet()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The tiny sweep run once on the local backend (6 runs, about 3 s)."""
    out = tmp_path_factory.mktemp("sweep")
    outcome = run_sweep(SweepConfig.build(tiny_sweep_doc()), out, quiet)
    return out, outcome


def test_local_sweep_writes_runs_and_tables(finished):
    out, outcome = finished
    assert len(outcome.runs) == 6 and len(outcome.trained) == 6 and not outcome.skipped
    for r in outcome.runs:
        assert (out / r.name / "eval.json").is_file() and (out / r.name / "config.json").is_file()
    results = read_csv(out / "results.csv")
    assert len(results) == 4 + 2 * 2  # bijection: one length per run; HMM: K = 20 and 30
    table = read_csv(out / "table.csv")
    bij = [r for r in table if r["experiment"] == "bijection"]
    assert {r["model"] for r in bij} == {"transformer", "lstm"} and all(r["n_seeds"] == 2 for r in bij)
    for r in bij:  # the table's mean is the mean of the per-seed rows
        per_seed = [x["entropy_error"] for x in results if x["experiment"] == "bijection" and x["model"] == r["model"]]
        assert r["entropy_error"] == pytest.approx(sum(per_seed) / 2)
        assert r["entropy_error_lo"] <= r["entropy_error"] <= r["entropy_error_hi"]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["primitives"]) == {"transformer", "lstm", "mlp"}
    md = (out / "summary.md").read_text()
    assert "### bijection" in md and "## Inference primitives" in md and "v3 table" in md


def test_rerun_skips_finished_runs(finished):
    out, outcome = finished
    mtimes = {r.name: (out / r.name / "eval.json").stat().st_mtime_ns for r in outcome.runs}
    again = run_sweep(SweepConfig.build(tiny_sweep_doc()), out, quiet)
    assert again.trained == [] and len(again.skipped) == 6
    assert {r.name: (out / r.name / "eval.json").stat().st_mtime_ns for r in outcome.runs} == mtimes


def test_manifest_records_the_runs(finished):
    out, outcome = finished
    sweep, runs = read_manifest(out)
    assert sweep.name == "tiny" and [r.name for r in runs] == [r.name for r in outcome.runs]
    assert runs[0].config == outcome.runs[0].config


def test_another_sweep_in_the_same_folder_is_refused(finished):
    out, _ = finished
    before = (out / "sweep.json").read_text()
    other = tiny_sweep_doc(overrides=[*TINY_OVERRIDES, "train.lr=0.01"])
    with pytest.raises(ConfigError, match="holds a different sweep"):
        run_sweep(SweepConfig.build(other), out, quiet)
    assert (out / "sweep.json").read_text() == before


def test_reuse_copies_the_finished_runs_of_another_folder(finished, tmp_path):
    out, outcome = finished
    names = [r.name for r in outcome.runs]
    kept = tmp_path / names[0]  # a run the new folder already has (unfinished) is left as it is
    kept.mkdir(parents=True)
    (kept / "note.txt").write_text("mine")
    doc = tiny_sweep_doc(grid={"train.seed": [0, 1, 2]})  # seed 2: runs no folder has
    again = run_sweep(SweepConfig.build(doc), tmp_path, quiet.but(reuse=[out]))
    assert set(again.skipped) == set(names[1:]) and names[0] in again.trained
    assert (kept / "note.txt").read_text() == "mine" and (kept / "eval.json").is_file()
    assert len(again.trained) == 1 + 2  # the kept one and seed 2's two (the HMM experiment has seed 0 alone)
    for name in names[1:]:
        assert (tmp_path / name / "eval.json").read_bytes() == (out / name / "eval.json").read_bytes()
        assert not (tmp_path / name / ".lock").exists()
    assert not list(tmp_path.glob(".*reusing"))


def test_reuse_takes_paused_runs_and_leaves_locked_or_different_ones(finished, tmp_path):
    out, outcome = finished
    src = tmp_path / "src"
    src.mkdir()
    first, second, third = [r.config for r in outcome.runs[:3]]
    train(first, src / first.run_name(), progress=False, until=Until(step=5))  # paused: resumes in the new folder
    train(second, src / second.run_name(), progress=False)
    (src / second.run_name() / ".lock").write_text("{}")  # someone writes it: not copied
    shutil.copytree(out / third.run_name(), src / third.run_name())
    doc = json.loads((src / third.run_name() / "config.json").read_text())
    doc["train"]["lr"] = 0.5  # a hand-edited folder: not the same config under the same name
    (src / third.run_name() / "config.json").write_text(json.dumps(doc))
    (src / first.run_name() / "diagnostics.json").write_text("{}")
    dest = tmp_path / "dest"
    dest.mkdir()
    assert reuse_runs([first, second, third], dest, [src], log=lambda _: None) == [first.run_name()]
    assert not (dest / first.run_name() / "diagnostics.json").exists()
    assert max(r["step"] for r in RunDir(dest / first.run_name()).metrics()) == 5
    assert train(first, dest / first.run_name(), progress=False).steps == first.train.steps


def test_reuse_prefers_a_finished_copy_to_a_paused_one_in_an_earlier_folder(finished, tmp_path):
    out, outcome = finished
    config = outcome.runs[0].config
    paused = tmp_path / "paused"
    train(config, paused / config.run_name(), progress=False, until=Until(step=5))
    dest = tmp_path / "dest"
    dest.mkdir()
    assert reuse_runs([config], dest, [paused, out], log=lambda _: None) == [config.run_name()]
    assert (dest / config.run_name() / "eval.json").read_bytes() == (out / config.run_name() / "eval.json").read_bytes()
    # with no finished copy anywhere the paused one is still taken
    again = tmp_path / "again"
    again.mkdir()
    assert reuse_runs([config], again, [paused], log=lambda _: None) == [config.run_name()]
    assert not (again / config.run_name() / "eval.json").exists()


def test_reuse_of_a_missing_folder_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="--reuse .*nope: not a folder"):
        run_sweep(SweepConfig.build(tiny_sweep_doc()), tmp_path / "o", quiet.but(reuse=[tmp_path / "nope"]))
    assert not (tmp_path / "o").exists()
    with pytest.raises(ConfigError, match="the output folder itself"):
        run_sweep(SweepConfig.build(tiny_sweep_doc()), tmp_path, quiet.but(reuse=[tmp_path]))


def test_a_superset_extends_the_sweep(tmp_path):
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None, grid={"train.seed": [0]})
    first = run_sweep(SweepConfig.build(doc), tmp_path, quiet)
    more = run_sweep(SweepConfig.build(doc), tmp_path, quiet, grid={"train.seed": [0, 1]})
    assert len(first.runs) == 2 and len(more.runs) == 4
    assert set(more.skipped) == {r.name for r in first.runs} and len(more.trained) == 2


@pytest.mark.parametrize("error", [TrainingError("non-finite loss (nan) at step 3"), RuntimeError("CUDA out of memory")])
def test_failed_run_does_not_stop_the_others(tmp_path, monkeypatch, error):
    real = sweep_run.train_one

    def flaky(config, run_dir, *args):
        if config["model"] == "lstm":
            raise error
        return real(config, run_dir, *args)

    monkeypatch.setattr(sweep_run, "train_one", flaky)
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None)
    with pytest.raises(SweepError, match="2 of 4 runs failed"):
        run_sweep(SweepConfig.build(doc), tmp_path, quiet)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["finished"] == 2 and len(summary["failed"]) == 2
    assert all(type(error).__name__ in msg for msg in summary["failed"].values())
    assert {r["model"] for r in read_csv(tmp_path / "table.csv")} == {"transformer"}
    monkeypatch.setattr(sweep_run, "train_one", real)
    again = run_sweep(SweepConfig.build(doc), tmp_path, quiet)  # a second pass retries only the failed ones
    assert len(again.trained) == 2 and len(again.skipped) == 2


def test_shared_run_is_trained_once_and_reported_under_both(tmp_path):
    exp = tiny_sweep_doc()["experiments"][0]
    doc = tiny_sweep_doc(experiments=[exp, {**exp, "name": "again", "models": ["transformer"]}], primitives=None,
                         grid={"train.seed": [0]})
    outcome = run_sweep(SweepConfig.build(doc), tmp_path, quiet)
    assert len(outcome.trained) == 2 and len(outcome.runs) == 3
    table = read_csv(tmp_path / "table.csv")
    assert {(r["experiment"], r["model"]) for r in table} == {
        ("bijection", "transformer"), ("bijection", "lstm"), ("again", "transformer")}


def test_a_partly_trained_run_is_not_finished(tmp_path):
    """`windtunnel eval` on an interrupted run writes eval.json; the sweep still trains it to the end."""
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None, grid={"train.seed": [0]})
    sweep = SweepConfig.build(doc)
    first = run_sweep(sweep, tmp_path, quiet)
    run = first.runs[0]
    ev = json.loads((tmp_path / run.name / "eval.json").read_text())
    (tmp_path / run.name / "eval.json").write_text(json.dumps({**ev, "steps": 5}))
    assert not is_finished(tmp_path / run.name, run.config)
    again = run_sweep(sweep, tmp_path, quiet)
    assert again.trained == [run.name]


def test_default_folder_is_extended_by_more_seeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None, grid={"train.seed": [0]})
    first = run_sweep(SweepConfig.build(doc), None, quiet)
    more = run_sweep(SweepConfig.build(doc), None, quiet, grid={"train.seed": [0, 1]})
    assert more.out == first.out and len(more.trained) == 2 and len(more.skipped) == 2
    other = run_sweep(SweepConfig.build(doc), None, quiet, overrides={"train.lr": 0.01})
    assert other.out != first.out  # other overrides: another folder


def test_killed_sweep_resumes_without_redoing_finished_runs(tmp_path):
    """SIGKILL a real `windtunnel sweep` during its second run; the rerun skips the first and resumes the second."""
    args, out = two_run_sweep(tmp_path)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first, second = wait_for_second_run(proc, out)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (second / "eval.json").exists(), "the sweep finished before it was killed"
    mtime = (first / "eval.json").stat().st_mtime_ns
    resumed_from = max(s for s, p in list_checkpoints(second) if (p / "optim.safetensors").exists())
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    assert "1 finished (skipped), 1 to run" in done.stdout
    assert (first / "eval.json").stat().st_mtime_ns == mtime
    steps = [json.loads(line)["step"] for line in (second / "metrics.jsonl").read_text().splitlines()]
    assert resumed_from > 50 and steps == list(range(1, 601))  # resumed, nothing lost or repeated
    assert len(read_csv(out / "results.csv")) == 2


def test_ray_backend_matches_the_local_backend(tmp_path, finished):
    """Two runs on a local Ray instance give the local backend's numbers."""
    pytest.importorskip("ray")
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None, grid={"train.seed": [0]})
    outcome = run_sweep(SweepConfig.build(doc), tmp_path, quiet.but(backend="ray"))
    assert len(outcome.trained) == 2
    local_out, _ = finished
    local = {(r["model"], r["seed"]): r for r in read_csv(local_out / "results.csv") if r["experiment"] == "bijection"}
    for r in read_csv(tmp_path / "results.csv"):
        ref = local[(r["model"], r["seed"])]
        assert r["run"] == ref["run"]  # same config, same content hash
        assert r["entropy_error"] == pytest.approx(ref["entropy_error"], abs=1e-6)
        assert r["kl_bayes_model"] == pytest.approx(ref["kl_bayes_model"], abs=1e-6)


def test_sweep_command(tmp_path, tiny_sweep_file, assert_printed_as_in):
    res = runner.invoke(app, ["sweep"])
    assert res.exit_code == 0 and "paper1-quick" in res.output
    path = tiny_sweep_file()
    res = runner.invoke(app, ["sweep", str(path), "--dry-run", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "6 runs" in res.output and res.output.count("[to run]") == 6 and not (tmp_path / "o").exists()
    res = runner.invoke(app, ["sweep", str(path), "--dry-run", "--json", "--grid", "train.seed=5"])
    runs = json.loads(res.output)
    assert len(runs) == 4 and {r["config"]["train"]["seed"] for r in runs} == {5}
    res = runner.invoke(app, ["sweep", str(path), "--backend", "slurm", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "allowed: local, ray" in res.output
    res = runner.invoke(app, ["sweep", str(path), "--set", "train.stepz=3", "--dry-run"])
    assert res.exit_code == 2 and "stepz" in res.output
    res = runner.invoke(app, ["sweep", "nope"])
    assert res.exit_code == 2 and "unknown sweep 'nope'" in res.output
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "o"), "--quiet", "--grid", "train.seed=0"])
    assert res.exit_code == 0, res.output
    assert "trained 4, skipped 0" in res.output
    assert_printed_as_in(res.output, (tmp_path / "o" / "summary.md").read_text(), "transformer")
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "p"), "--quiet", "--grid", "train.seed=0",
                              "--reuse", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "reused 4 run(s)" in res.output and "trained 0, skipped 4" in res.output


def test_unreachable_ray_cluster_is_a_clear_error(tmp_path):
    pytest.importorskip("ray")
    if os.path.exists("/tmp/ray/ray_current_cluster"):
        pytest.skip("a Ray cluster is running on this machine")
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None, grid={"train.seed": [0]})
    with pytest.raises(ConfigError, match="--address auto: cannot start or join a Ray cluster"):
        run_sweep(SweepConfig.build(doc), tmp_path, quiet.but(backend="ray", address="auto"))


def test_sweep_diagnoses_the_chosen_architectures(tmp_path):
    """`diagnose` in a sweep config diagnoses the finished runs of the named models once."""
    doc = tiny_sweep_doc()
    doc["diagnose"] = {"models": ["transformer"], "analyses": ["key_frame"], "n_sequences": 16}
    fresh = tmp_path / "fresh"
    again = run_sweep(SweepConfig.build(doc), fresh, quiet)
    diagnosed = sorted(r.name for r in again.runs if (fresh / r.name / "diagnostics.json").is_file())
    assert diagnosed == sorted({r.name for r in again.runs if r.config.model == "transformer"}) and diagnosed
    doc_json = json.loads((fresh / diagnosed[0] / "diagnostics.json").read_text())
    assert doc_json["analyses_run"] == ["key_frame"]
    mtime = (fresh / diagnosed[0] / "diagnostics.json").stat().st_mtime_ns
    run_sweep(SweepConfig.build(doc), fresh, quiet)  # nothing to train, nothing to diagnose again
    assert (fresh / diagnosed[0] / "diagnostics.json").stat().st_mtime_ns == mtime


def test_sweep_diagnose_config_errors():
    doc = tiny_sweep_doc()
    doc["diagnose"] = {"analyses": ["no_such"]}
    with pytest.raises(ConfigError, match="no_such"):
        SweepConfig.build(doc)
