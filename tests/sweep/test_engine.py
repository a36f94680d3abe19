"""The engine: one validated Execution, one job runner with typed outcomes, the scorecard and the
search callable from Python, the keywords of earlier versions still working (deprecated)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest
from sweep_tiny import tiny_sweep_doc

from windtunnel.config import ConfigError
from windtunnel.engine.jobs import Job, run_jobs
from windtunnel.files import DiskFullError
from windtunnel.interrupt import StopFlag
from windtunnel.scorecard.score import ScorecardRequest, run_scorecard, scorecard_lines
from windtunnel.sweep import Execution, SweepConfig, run_sweep
from windtunnel.sweep.compare import compare
from windtunnel.train.tracking import Trackers
from windtunnel.tune.search import Candidate, TuneRequest, run_tune

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TINY = ["train.steps=3", "train.batch_size=8", "train.checkpoints=2", "train.threads=1", "eval.n_sequences=32",
        "eval.batch_size=32", "eval.n_boot=10", "task_params.V=5", "task_params.L=4"]


@pytest.mark.parametrize("fields, names", [
    ({"backend": "slurm"}, "backend = 'slurm'; allowed: local, ray"),
    ({"workers": 0}, "jobs = 0; allowed: an integer from 1 to 1024, or 'auto'"),
    ({"workers": "many"}, "jobs = 'many'"),
    ({"trackers": "nosuch"}, "--log 'nosuch': unknown tracker"),
    ({"reuse": ["/no/such/folder"]}, "--reuse /no/such/folder: not a folder"),
])
def test_an_execution_is_checked_when_it_is_built(fields, names):
    with pytest.raises(ConfigError) as exc:
        Execution(**fields)
    assert names in str(exc.value)


def test_an_execution_parses_its_trackers_once_and_resolves_its_workers(monkeypatch):
    from windtunnel.engine import execution as execution_module

    how = Execution(workers="auto", trackers=[])
    assert how.trackers == Trackers() and not how.trackers
    monkeypatch.setattr(execution_module, "cpu_cores", lambda: 8)
    assert how.resolved(1, [1, 2]).workers == 4  # the cores over the most threads a job asks for
    assert Execution().resolved("auto", [1]).workers == 8  # none given: the sweep's own jobs
    assert Execution(workers=3).resolved("auto", [1]).workers == 3
    assert Execution(backend="ray").resolved(4, [1]).workers == 1  # the cluster schedules
    assert Execution(backend="ray").local() == Execution(backend="local", address=None, workers=1)
    assert Execution(workers=2).in_this_process(1) and not Execution(workers=2).in_this_process(2)
    assert Trackers.parse(Trackers(("x",))) == Trackers(("x",))  # parsed already: not checked again


def raise_disk_full(path: str) -> None:
    raise DiskFullError(path)


def wait_for_file(path: str, timeout: float) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_full_disk_stops_new_jobs_and_is_raised(tmp_path, workers):
    lines = []
    reported = tmp_path / "reported"

    def log(line: str) -> None:
        lines.append(line)
        if "full failed" in line:
            reported.touch()

    # with two workers "full" and "later" start together; "later" outlasts the report of the full disk
    jobs = [Job("full", raise_disk_full, (str(tmp_path / "x"),), cost=3),
            Job("later", wait_for_file, (str(reported), 120 * (workers - 1)), cost=1), Job("last", abs, (-2,), cost=0)]
    with pytest.raises(DiskFullError):
        run_jobs(jobs, Execution.quiet(workers=workers, log=log), StopFlag())
    assert not any("last" in line for line in lines)  # never started


def test_auto_workers_run_several_jobs_in_one_process_per_core(monkeypatch):
    """``Execution(workers="auto")`` (the jobs name no threads: one at a time per core) runs a
    list of jobs; it raised ValueError (``int("auto")``) for two or more."""
    from windtunnel.engine import execution as execution_module

    monkeypatch.setattr(execution_module, "cpu_cores", lambda: 2)
    outcomes = run_jobs([Job("a", abs, (-1,)), Job("b", abs, (-2,))], Execution.quiet(workers="auto"), StopFlag())
    assert {n: (o.status, o.value) for n, o in outcomes.items()} == {"a": ("finished", 1), "b": ("finished", 2)}
    assert all(o.seconds > 0 for o in outcomes.values())


def test_the_ray_path_times_its_jobs_and_raises_a_full_disk(tmp_path, monkeypatch):
    """On Ray as on the other paths: each outcome has its seconds, and a full disk fails its job
    and is raised once the others have ended."""
    pytest.importorskip("ray")
    import os
    import time

    here = str(Path(__file__).parent)  # Ray's workers import this module (raise_disk_full) by name
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))

    how = Execution.quiet(backend="ray")
    with how.session():
        outcomes = run_jobs([Job("nap", time.sleep, (0.2,), resources={"num_cpus": 0.1})], how, StopFlag())
        assert outcomes["nap"].status == "finished" and outcomes["nap"].seconds >= 0.2
        lines = []
        with pytest.raises(DiskFullError):
            run_jobs([Job("full", raise_disk_full, (str(tmp_path / "x"),), resources={"num_cpus": 0.1})],
                     how.but(log=lines.append), StopFlag())
    assert any("full failed: no space left on the device" in line for line in lines), lines


def test_a_search_candidate_records_itself_as_its_file_does():
    from windtunnel.train.config import resolve_run

    c = Candidate({"train.lr": 1e-3}, resolve_run("bijection", "gru"), {150: 0.5, 450: None}, "stopped at step 450", 0.4)
    assert list(c.to_json()) == ["point", "run", "scores", "status", "kl"]
    c.status, c.error, c.eval = "failed", "TrainingError: nan", {"kl_bayes_model": 1.0}
    assert list(c.to_json()) == ["point", "run", "scores", "status", "error", "kl", "eval"]
    assert c.run == resolve_run("bijection", "gru").run_name()


def test_the_search_runs_from_python_and_the_request_takes_the_tasks_metric(tmp_path):
    request = TuneRequest.build({"task": "recall", "models": ["gru"], "overrides": TINY[:-2],
                                 "spec": {"grid": {"train.lr": [1e-3, 1e-2]}, "compare_at": [0.4]}})
    assert request.spec.metric == "accuracy" and TuneRequest(task="hmm", models=["gru"]).spec.metric == "kl_bayes_model"
    (result,) = run_tune(request, tmp_path, Execution.quiet(workers=1))
    assert result.task == "recall" and result.metric == "accuracy" and result.best["train.lr"] in (1e-3, 1e-2)
    doc = json.loads(result.files["json"].read_text())
    assert doc["spec"]["rungs"] == [0.4] and [c["status"] for c in doc["candidates"]].count("winner") == 1
    with pytest.raises(ConfigError, match="each architecture once"):
        TuneRequest.build({"task": "hmm", "models": ["gru", "gru"]})
    assert request.default_out() == Path("runs/tune-recall-gru")


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("my_mixer", None)


def test_the_scorecard_runs_from_python(tmp_path, examples_on_path):
    request = ScorecardRequest(model="gru", primitives=["accumulation"], rungs=False, tune=False, overrides=TINY[:-2],
                               reference="train")
    result = run_scorecard(request, tmp_path / "card", Execution.quiet(workers=1))
    assert result.out == tmp_path / "card" and (result.out / "scorecard.json").is_file()
    assert json.loads((result.out / "scorecard.json").read_text()) == result.doc
    assert set(result.doc["primitives"]) == {"accumulation"} and result.sweep.trained
    (line,) = scorecard_lines(result.doc)
    assert line.startswith("accumulation  (bijection, kl_bayes_model): model: ")
    with pytest.raises(ConfigError, match="--no-tune"):
        ScorecardRequest.build({"model": "gru", "overrides": ["train.lr=1e-3"]})
    with pytest.raises(ConfigError, match="primitives"):
        ScorecardRequest.build({"model": "gru", "primitives": ["telepathy"]})


def test_the_keywords_of_earlier_versions_still_work_and_warn(tmp_path):
    doc = tiny_sweep_doc(experiments=tiny_sweep_doc()["experiments"][:1], primitives=None, grid={})
    with pytest.warns(DeprecationWarning, match=r"run_sweep\(progress=..., log=...\) is deprecated"):
        old = run_sweep(SweepConfig.build(doc), tmp_path / "old", progress=False, log=lambda _: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = run_sweep(SweepConfig.build(doc), tmp_path / "new", Execution.quiet())
    assert old.trained == new.trained
    with pytest.raises(TypeError, match="not both"):
        run_sweep(SweepConfig.build(doc), tmp_path / "x", Execution.quiet(), progress=False)
    with pytest.raises(TypeError, match="unexpected keyword"):
        run_sweep(SweepConfig.build(doc), tmp_path / "x", workers=2)
    with pytest.warns(DeprecationWarning, match=r"compare\(progress=...\)"):
        folder, _ = compare("bijection", ("lstm",), "quick", [("train.steps", 2), ("eval.n_sequences", 16),
                                                               ("eval.n_boot", 5), ("task_params.V", 5),
                                                               ("task_params.L", 4)], tmp_path / "cmp", progress=False)
    assert (folder / "calibration.png").is_file()


@pytest.mark.parametrize("old", sorted(__import__("windtunnel.compat").compat.MOVED_MODULES))
def test_a_moved_module_still_imports_from_its_old_path_and_warns(old, monkeypatch):
    """compat.MOVED_MODULES: the old path gives the names of the new module(s), the same objects."""
    import importlib

    from windtunnel.compat import MOVED_MODULES

    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"the module {old} is deprecated"):
        module = importlib.import_module(old)
    for new in MOVED_MODULES[old]:
        target = importlib.import_module(new)
        for name in [n for n in vars(target) if not n.startswith("_")]:
            assert getattr(module, name) is getattr(target, name), (old, new, name)


def test_the_keyword_shims_live_in_compat_and_warn():
    """compat.legacy_execution and compat.tracking_group: each old keyword warns; an unknown one is a TypeError."""
    from windtunnel import compat

    with pytest.warns(DeprecationWarning, match=r"train\(tracking_group=...\) is deprecated"):
        assert compat.tracking_group({"tracking_group": "g"}) == "g"
    assert compat.tracking_group({}) is None
    with pytest.raises(TypeError, match="nosuch"):
        compat.tracking_group({"nosuch": 1})
    with pytest.warns(DeprecationWarning, match=r"run_sweep\(jobs=...\) is deprecated"):
        assert compat.legacy_execution("run_sweep", None, {"jobs": 2}, Execution).workers == 2
    with pytest.raises(TypeError, match="backend"):
        compat.legacy_execution("tune", None, {"backend": "ray"}, Execution)
