"""Options, optional transformers import, shipped prompt pools, stratified selection, statistics."""

import json
import subprocess
import sys

import numpy as np
import pytest

from windtunnel.config import ConfigError
from windtunnel.llm import LLM_ANALYSES, build_options
from windtunnel.llm.prompts import load_pool, stratified_select
from windtunnel.llm.run import resolve_analyses
from windtunnel.llm.stats import Resampling, pca_null, pca_ratios, pca_report


def test_analyses_list():
    assert LLM_ANALYSES == ["value_manifold", "key_orthogonality", "attention_focusing", "domain_restriction",
                            "sula", "interventions"]
    assert resolve_analyses(None) == LLM_ANALYSES
    assert resolve_analyses("sula,value_manifold") == ["value_manifold", "sula"]
    with pytest.raises(ConfigError, match="unknown analysis 'pca'; allowed: value_manifold"):
        resolve_analyses(["pca"])


def test_options_defaults_and_parsing():
    o = build_options()
    assert (o.trust_remote_code, o.dtype, o.device, o.layers, o.sula_ks, o.n_per_quintile) == \
        (False, "auto", "auto", "last", [0, 1, 2, 4, 8], 15)
    o = build_options({"sula-ks": "0,2,1", "layers": "0,3", "trust_remote_code": "true", "batch_size": "8",
                       "thresholds.key_orth_max": "0.25", "thresholds_focusing_min": 0.4})
    assert o.sula_ks == [0, 1, 2] and o.layers == [0, 3] and o.trust_remote_code is True and o.batch_size == 8
    assert o.thresholds.key_orth_max == 0.25 and o.thresholds.focusing_min == 0.4
    assert build_options({"layers": "all"}).layers == "all"


@pytest.mark.parametrize("bad, field", [
    ({"batch_size": 0}, "batch_size"), ({"dtype": "int8"}, "dtype"), ({"device": "gpu"}, "device"),
    ({"layers": "-1"}, "layers"), ({"thresholds.key_orth_max": 2}, "key_orth_max"), ({"nonsense": 1}, "nonsense"),
    ({"sula_labels": "dax"}, "sula_labels"), ({"sula_controls": "bogus"}, "sula_controls"),
])
def test_bad_options_name_the_field(bad, field):
    with pytest.raises(ConfigError, match=field):
        build_options(bad)


def test_device_and_device_map_exclusive():
    with pytest.raises(ConfigError, match="device_map"):
        build_options({"device": "cpu", "device_map": "auto"})


def test_package_imports_without_transformers(tmp_path):
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "import windtunnel, windtunnel.llm, windtunnel.tasks\n"
        "from windtunnel.llm import run_llm, LLM_ANALYSES\n"
        "from windtunnel.config import ConfigError\n"
        "try:\n"
        "    run_llm('x/y', None, __import__('pathlib').Path(sys.argv[1]))\n"
        "except ConfigError as e:\n"
        "    print('ERR', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "install it with: from a clone: make setup EXTRAS=llm (or .venv/bin/pip install -e '.[llm]')" in r.stdout


def test_shipped_pools():
    mixed, math = load_pool("mixed"), load_pool("math")
    assert len(mixed["prompts"]) >= 200 and len(math["prompts"]) >= 100
    doms = {p["domain"] for p in mixed["prompts"]}
    assert {"prose", "news", "fiction", "code", "qa", "math"} <= doms
    assert {p["domain"] for p in math["prompts"]} == {"math"}
    for pool in (mixed, math):
        ids = [p["id"] for p in pool["prompts"]]
        assert len(ids) == len(set(ids))
        assert all(p["text"].strip() for p in pool["prompts"])
    math_ids = {p["id"]: p["text"] for p in math["prompts"]}
    assert all(math_ids[p["id"]] == p["text"] for p in mixed["prompts"] if p["domain"] == "math")


def test_custom_pool_and_errors(tmp_path):
    f = tmp_path / "pool.json"
    f.write_text(json.dumps({"prompts": [{"text": "a b"}, {"text": "c d", "domain": "x"}]}))
    pool = load_pool("mixed", str(f))
    assert [p["domain"] for p in pool["prompts"]] == ["mixed", "x"]
    f.write_text(json.dumps({"items": []}))
    with pytest.raises(ConfigError, match="'prompts' list"):
        load_pool("mixed", str(f))
    with pytest.raises(ConfigError, match="no such file"):
        load_pool("math", str(tmp_path / "nope.json"))


def test_stratified_selection():
    h = np.random.default_rng(0).uniform(0, 5, 300)
    sel = stratified_select(h, 5, 15, seed=42)
    idx = np.array(sel["indices"])
    assert len(idx) == 75 and len(set(idx)) == 75 and sel["shortfall"] == [0] * 5
    strata = np.array(sel["strata"])
    edges = [-np.inf] + sel["edges"] + [np.inf]
    for s in range(5):
        assert np.all((h[idx[strata == s]] >= edges[s]) & (h[idx[strata == s]] <= edges[s + 1]))
    assert stratified_select(h, 5, 15, seed=42) == sel
    small = stratified_select(h[:20], 5, 15, seed=0)
    assert len(small["indices"]) == 20 and small["shortfall"] == [11] * 5


def test_pca_helpers_match_numpy():
    x = np.random.default_rng(1).normal(size=(30, 80)) * np.linspace(1, 3, 80)
    r = pca_ratios(x, standardize=False)
    ev = np.linalg.eigvalsh(np.cov(x.T))[::-1]
    assert np.allclose(r[:5], (ev / ev.sum())[:5])
    z = (x - x.mean(0)) / x.std(0)
    ev = np.linalg.eigvalsh(np.cov(z.T))[::-1]
    assert np.allclose(pca_ratios(x, standardize=True)[:5], (ev / ev.sum())[:5])


def test_pca_report_and_nulls():
    rng = np.random.default_rng(0)
    h = rng.uniform(0, 4, 75)
    x = h[:, None] * rng.normal(size=200) + 0.3 * rng.normal(size=(75, 200))  # a 1-D manifold ordered by h
    rep = pca_report(x, h, True, Resampling(n_boot=100, n_null=30, seed=0))
    assert rep["pc1"] > 0.7 and abs(rep["spearman_pc1_entropy"]) > 0.95
    assert rep["pc1_ci"][0] <= rep["pc1_boot_mean"] <= rep["pc1_ci"][1]
    g = rep["null"]["gaussian"]
    assert g["pc1_mean"] < 0.1 and rep["pc1_over_gaussian_null"] > 5 and rep["pc1_pc2_above_null_q95"]
    # the matched Gaussian null is ~1/(n-1) per component for d >> n, far above 1/d
    null = pca_null(75, 1024, True, 20, 0)
    assert 1 / 74 < null["gaussian"]["pc1_mean"] < 0.04
