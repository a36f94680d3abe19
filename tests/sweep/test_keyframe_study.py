"""The key-frame study shipped in the package (windtunnel.sweep.studies): its plan is the one
scripts/keyframe_study.py had (tests/sweep/data/keyframe_plan_before.json, written from that
script before the move), and its jobs run through the job runner into records with the keys of
the committed ones (results/keyframe/*.json)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from windtunnel.engine.execution import Execution
from windtunnel.sweep.studies import keyframe, keyframe_plan
from windtunnel.sweep.studies.keyframe import StudyOptions, run_study

ROOT = Path(__file__).resolve().parents[2]
BEFORE = json.loads((Path(__file__).parent / "data" / "keyframe_plan_before.json").read_text())
COMMITTED = json.loads((ROOT / "results" / "keyframe" / "transformer-1x-s0.json").read_text())
JOB = ("transformer", 1, 0)
TINY = {"n_sequences": 8, "seed": 0}


def test_the_shipped_plan_is_the_scripts_plan_before_the_move():
    plan = keyframe_plan.PLAN
    assert [keyframe_plan.job_name(*j) for j in plan] == [r["job"] for r in BEFORE["jobs"]]
    for job, before in zip(plan, BEFORE["jobs"]):
        cell = keyframe_plan.CELLS[job[0]]
        assert (cell.model, cell.factor, cell.what) == (before["model"], before["factor"], before["what"])
        assert json.loads(json.dumps(keyframe_plan.job_overrides(*job))) == before["overrides"], before["job"]
    assert keyframe_plan.BASE_STEPS == BEFORE["base_steps"] and keyframe_plan.PROBE == BEFORE["probe"]
    assert keyframe_plan.ANALYSES == BEFORE["analyses"]
    assert json.loads(json.dumps(keyframe_plan.REGIME_TRIALS)) == BEFORE["regime_trials"]


def test_the_selection_takes_names_and_globs():
    assert keyframe_plan.selected(["transformer-1x-s0"]) == [JOB]
    assert keyframe_plan.selected(None) == keyframe_plan.selected([]) == keyframe_plan.PLAN
    assert {c for c, _, _ in keyframe_plan.selected(["*-paired-1x-s?"])} == {"transformer-paired", "tinygpt-paired"}


def test_the_script_plans_what_the_package_plans(capsys, tmp_path):
    script = _script()
    script.main(["plan", "--only", "tinygpt-1x-*", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [["todo", f"tinygpt-1x-s{s}"] for s in (0, 1, 2)]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """One job of the plan, a few steps and a tiny probe, run through the job runner."""
    tmp = tmp_path_factory.mktemp("keyframe")
    options = StudyOptions(tmp / "results", tmp / "runs", steps=4, probe=TINY, root=ROOT)
    outcomes = run_study(["transformer-1x-s0"], options, Execution.quiet())
    return options, outcomes


def test_a_tiny_job_runs_through_run_jobs_into_a_record_with_the_committed_keys(tiny_study):
    options, outcomes = tiny_study
    assert list(outcomes) == ["transformer-1x-s0"] and outcomes["transformer-1x-s0"].status == "finished"
    doc = json.loads(options.record_path(JOB).read_text())
    assert outcomes["transformer-1x-s0"].value == doc
    assert set(doc) == set(COMMITTED) - {"rerun_of"}  # the committed record was run again: --again adds rerun_of
    assert set(doc["provenance"]) == set(COMMITTED["provenance"])
    for part in ("key_frame", "ablation", "dynamics", "train", "model_config"):
        assert set(doc[part]) == set(COMMITTED[part]), part
    assert set(doc["key_frame"]["tokens_raw"]) == set(COMMITTED["key_frame"]["tokens_raw"])
    assert doc["steps"] == 4 and doc["probe"] == TINY and doc["job"] == "transformer-1x-s0"
    assert doc["provenance"]["command"] == "python scripts/keyframe_study.py run --only transformer-1x-s0 --steps 4"
    assert len(doc["provenance"]["commit"]) == 40
    assert (options.runs / "transformer-1x-s0" / "diagnostics.json").is_file()


def test_a_job_with_its_record_is_done_unless_run_again(tiny_study):
    options, _ = tiny_study
    assert run_study(["transformer-1x-s0"], options, Execution.quiet()) == {}
    first = json.loads(options.record_path(JOB).read_text())
    again = StudyOptions(options.results, options.runs, again=True, steps=4, probe=TINY, root=ROOT)
    outcomes = run_study(["transformer-1x-s0"], again, Execution.quiet())
    doc = outcomes["transformer-1x-s0"].value
    assert doc["rerun_of"] == {"commit": first["provenance"]["commit"], "started": first["provenance"]["started"],
                               "entropy_error": first["entropy_error"]["value"]}
    assert doc["entropy_error"] == first["entropy_error"]  # the finished run resumed: diagnosed again, not retrained
    assert doc["provenance"]["command"].endswith("--only transformer-1x-s0 --again --steps 4")


def test_a_failed_job_is_an_outcome_and_the_others_run(tiny_study, tmp_path):
    options, _ = tiny_study
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "tinygpt-1x-s0").write_text("not a run folder")  # the job cannot train here
    broken = StudyOptions(tmp_path / "results", runs, steps=4, probe=TINY, root=ROOT)
    outcomes = run_study(["tinygpt-1x-s0"], broken, Execution.quiet())
    assert outcomes["tinygpt-1x-s0"].status == "failed" and outcomes["tinygpt-1x-s0"].error
    assert not broken.record_path(("tinygpt", 1, 0)).exists()


def test_collect_rebuilds_a_record_from_its_run_folder_keeping_its_provenance(tiny_study, tmp_path):
    options, _ = tiny_study
    doc = json.loads(options.record_path(JOB).read_text())
    stale = {**doc, "entropy_error": {"value": -1.0}}
    options.record_path(JOB).write_text(json.dumps(stale))
    assert keyframe.collect(["transformer-1x-s0"], options) == ["transformer-1x-s0"]
    rebuilt = json.loads(options.record_path(JOB).read_text())
    assert rebuilt["entropy_error"] == doc["entropy_error"] and rebuilt["provenance"] == doc["provenance"]
    assert rebuilt.get("rerun_of") == doc.get("rerun_of")


def _script():
    spec = importlib.util.spec_from_file_location("keyframe_study_script", ROOT / "scripts" / "keyframe_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
