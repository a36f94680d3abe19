"""The signatures grouped in issue 55 (``Stage`` of run_sweep, ``Comparison`` of compare): the calls
of earlier versions still work, with a DeprecationWarning (compat.legacy_group, compat.legacy_call)."""

from __future__ import annotations

import json
import warnings

import pytest
from sweep_tiny import tiny_sweep_doc

from windtunnel.sweep import Execution, Stage, SweepConfig, expand, run_sweep
from windtunnel.sweep import compare as compare_mod
from windtunnel.sweep.compare import Comparison, compare


def test_run_sweep_runs_plan_and_retired_build_a_stage(tmp_path):
    sweep = SweepConfig.build(tiny_sweep_doc())
    plan = expand(sweep)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = run_sweep(sweep, tmp_path / "new", Execution.quiet(), stage=Stage([], plan, {"x": "replaced"}))
    with pytest.warns(DeprecationWarning, match=r"run_sweep\(runs=..., plan=..., retired=...\) is deprecated; "
                                                r"use run_sweep\(..., Stage\(...\)\)"):
        old = run_sweep(sweep, tmp_path / "old", Execution.quiet(), runs=[], plan=plan, retired={"x": "replaced"})
    assert old.runs == new.runs == [] and not old.trained
    manifest = lambda out: {k: v for k, v in json.loads((out / "sweep.json").read_text()).items() if k != "out"}
    assert manifest(tmp_path / "old") == manifest(tmp_path / "new")
    with pytest.warns(DeprecationWarning, match=r"run_sweep\(runs=...\)"), \
            pytest.warns(DeprecationWarning, match=r"run_sweep\(progress=...\)"):  # both shims at once
        run_sweep(sweep, tmp_path / "both", runs=[], progress=False)
    with pytest.raises(TypeError, match="not both"):
        run_sweep(sweep, tmp_path / "x", Execution.quiet(), stage=Stage([]), runs=[])


class Stop(Exception):
    pass


@pytest.fixture
def seen(monkeypatch):
    """What compare passes to run_sweep (which then stops it)."""
    calls = []

    def fake(sweep, out, execution, stage):
        calls.append((sweep, out, execution, stage))
        raise Stop

    monkeypatch.setattr(compare_mod, "run_sweep", lambda sweep, out, execution, *, stage: fake(sweep, out, execution, stage))
    return calls


def test_compare_in_its_old_form_warns_and_means_the_same(seen, tmp_path):
    quiet = Execution.quiet()
    with warnings.catch_warnings(), pytest.raises(Stop):
        warnings.simplefilter("error")
        compare(Comparison("hmm", ("lstm", "mlp"), "quick", reference="lstm"), overrides={"train.steps": 5}, out=tmp_path,
                execution=quiet)
    with pytest.warns(DeprecationWarning, match=r"compare\(task, models, profile, overrides, out, execution, reference\) "
                                                r"is deprecated; use compare\(Comparison"), pytest.raises(Stop):
        compare("hmm", ["lstm", "mlp"], "quick", {"train.steps": 5}, tmp_path, quiet, reference="lstm")
    with pytest.warns(DeprecationWarning), pytest.raises(Stop):
        compare(task="hmm", models=("lstm", "mlp"), overrides={"train.steps": 5}, out=tmp_path, execution=quiet,
                reference="lstm")
    (new_sweep, *new), *olds = seen
    for sweep, *rest in olds:
        assert sweep == new_sweep and rest[:2] == new[:2] and rest[2].runs == new[2].runs
    assert [r.config.model_params for r in new[2].runs][0] != [r.config.model_params for r in new[2].runs][1]
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="unexpected keyword"):
        compare("hmm", model="lstm")
