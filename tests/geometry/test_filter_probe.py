"""The filter probe: the exact Kalman filter mean read linearly from each layer, against step 0;
run by `diagnose` on kalman runs, skipped with a reason elsewhere."""

import json

import numpy as np
import pytest

from windtunnel.config import ConfigError
from windtunnel.geometry import ANALYSES, run_diagnostics
from windtunnel.geometry.filter_probe import ridge_r2

KALMAN = {"task": "kalman", "task_params": {"n": 2, "K": 6}, "steps": 12}


def test_ridge_r2_reads_a_linear_code_and_not_shuffled_labels():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((600, 3))
    x = np.c_[y @ rng.standard_normal((3, 8)), rng.standard_normal((600, 4))] + 1e-3 * rng.standard_normal((600, 12))
    groups = np.repeat(np.arange(100), 6)
    r2, per = ridge_r2(x, y, seed=0, groups=groups)
    assert r2 > 0.99 and len(per) == 3 and min(per) > 0.99
    assert ridge_r2(x, y, seed=0, groups=groups, shuffle=True)[0] < 0.05
    assert ridge_r2(rng.standard_normal((600, 12)), y, seed=0, groups=groups)[0] < 0.05


def test_kalman_run_gets_the_probe_per_layer_against_step_0(trained):
    run = trained("kalman", **KALMAN)
    doc = run_diagnostics(run, n_sequences=24, progress=False)
    assert "filter_probe" in doc["analyses_run"] and "filter_probe" not in doc["skipped"]
    r = doc["results"]["filter_probe"]
    assert r["n"] == 2 and r["n_points"] == 24 * 5 and r["headline"] == "final"
    assert [x["name"] for x in r["layers"]] == ["embed", "blocks.0.resid_post", "blocks.1.resid_post", "final"]
    for x in r["layers"]:
        for key in ("r2", "init_r2", "r2_shuffled", "r2_predictive_mean", "init_r2_predictive_mean"):
            assert x[key] is not None and x[key] <= 1
        assert len(x["r2_per_dim"]) == 2 and len(x["init_r2_per_dim"]) == 2
    assert r["best"]["name"] in {x["name"] for x in r["layers"]}
    assert json.loads((run / "diagnostics.json").read_text())["results"]["filter_probe"] == r
    md = (run / "diagnostics.md").read_text()
    assert "## Filter probe" in md and "| final |" in md
    assert "plots/geometry/filter_probe.png" in doc["plots"]
    assert (run / "plots/geometry/filter_probe.png").stat().st_size > 1000


def test_probe_labels_are_the_filter_means_of_the_positions_that_read_them(trained):
    """Run on its own, the probe sees the same points: position j >= 1 with filter_mean[:, j - 1]."""
    from windtunnel.geometry.context import Context
    from windtunnel.geometry.filter_probe import run as probe_run

    ctx = Context(trained("kalman", **KALMAN), n_sequences=16)
    b = ctx.batch
    # the scored position j >= 1 is the token y_j, and filter_mean[:, j - 1] has read y_1..y_j
    n = ctx.task.config.n
    assert (b.inputs[:, b.positions[1:], n] == b.latent["y"][:, :-1].float()).all()
    res = probe_run(ctx)
    assert res["n_points"] == 16 * 5 and res["n_sequences"] == 16


def test_skipped_elsewhere_with_a_reason(trained):
    run = trained("bij")
    doc = run_diagnostics(run, analyses=None, n_sequences=8, progress=False)
    assert "filter_probe" in ANALYSES and "filter_probe" not in doc["analyses_run"]
    assert "no filter_mean latent" in doc["skipped"]["filter_probe"]
    with pytest.raises(ConfigError, match="filter_probe.*does not apply.*no filter_mean latent"):
        run_diagnostics(run, analyses=["filter_probe"], progress=False)
