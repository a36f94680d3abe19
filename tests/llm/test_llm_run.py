"""run_llm end to end on a tiny model: every analysis, llm.json, llm.md and plots."""

import json

import pytest

from windtunnel.config import ConfigError
from windtunnel.llm import LLM_ANALYSES, run_llm


@pytest.fixture(scope="module")
def doc(tiny_run):
    return tiny_run


def test_files_and_document(doc):
    out, d = doc
    on_disk = json.loads((out / "llm.json").read_text())
    assert on_disk["analyses"] == LLM_ANALYSES and set(on_disk["results"]) == set(LLM_ANALYSES)
    assert on_disk["options"]["trust_remote_code"] is False and on_disk["model"]["adapter"] == "gpt_neox"
    md = (out / "llm.md").read_text()
    for title in ("Value manifold", "Key orthogonality", "Attention focusing", "Domain restriction", "SULA",
                  "Entropy-axis interventions", "Paper III criteria"):
        assert title in md
    for name in LLM_ANALYSES:
        assert (out / f"{name}.png").is_file()
    assert d["timing"]["prompts_per_s"] > 0


def test_analysis_outputs(doc):
    _, d = doc
    r = d["results"]
    vm = r["value_manifold"]["layers"]["2"]
    for space in ("standardized", "raw"):
        x = vm[space]
        assert 0 < x["pc1"] <= x["pc1_pc2"] <= 1 and len(x["pc1_pc2_ci"]) == 2 and x["participation_ratio"] >= 1
        assert x["null"]["gaussian"]["pc1_mean"] > 0 and "column_permutation" in x["null"]
    assert r["value_manifold"]["selection"]["n_selected"] == 15
    ko = r["key_orthogonality"]
    assert len(ko["layers"]) == 3 and {"mean", "median", "p10", "p90"} <= set(ko["layers"][0])
    assert ko["null"]["init_from_config"]["mean"] > 0 and ko["null"]["gaussian_analytic"] > 0
    assert len(ko["activation_variant"]["per_layer"]) == 3
    af = r["attention_focusing"]
    assert len(af["layers"]) == 3 and af["focusing"]["ci"][0] is not None
    dr = r["domain_restriction"]
    assert dr["mixed"] == {"same_as": "value_manifold"} and "pc1_pc2_gain" in dr["gain"]["2"]["standardized"]
    s = r["sula"]
    assert s["n_prompts"] == 12 and set(s["calibration"]["per_k"]) == {"0", "1", "4"}
    assert set(s["controls"]) == {"main", "lexical_remap", "shuffled", "ablation_labels", "ablation_carriers"}
    iv = r["interventions"]
    assert iv["layer_sets"] == [[1], [0, 2]] and len(iv["runs"]) == 6
    run = next(x for x in iv["runs"] if x["layers"] == [1] and x["condition"] == "true_cut")
    # nothing is left on the axis after a true cut: the authors' at-cut correlation is noise, reported as null
    assert run["axis_projection_std_ratio_at_cut"] < 1e-3 and run["axis_corr_at_cut"] is None
    assert run["axis_corr_downstream_mean"] is not None  # measured at layer 2, downstream of the cut
    assert run["mean_abs_change_h_model"] > 0  # the hook changed the model's answers
    c = d["criteria"]
    assert {"value_manifold", "key_orthogonality", "attention_focusing", "domain_restriction"} <= set(c)
    assert c["thresholds"]["key_orth_max"] == 0.2 and "verdict" in c


def test_thresholds_override_and_subset(tiny_models, pools, tmp_path):
    d = run_llm(str(tiny_models["llama"]), ["key_orthogonality"], tmp_path, plots=False,
                **{"thresholds.key_orth_max": 0.01, "n_null": 10})
    assert d["analyses"] == ["key_orthogonality"] and d["criteria"]["key_orthogonality"]["pass"] is False
    assert d["results"]["key_orthogonality"]["n_kv_heads"] == 2
    assert "incomplete" in d["criteria"]["verdict"]


def test_bad_layers_rejected(tiny_models, tmp_path):
    with pytest.raises(ConfigError, match="0 <= layer <= 2"):
        run_llm(str(tiny_models["phi"]), ["interventions"], tmp_path, intervention_layers="3", sula_n_per_k=2)
    with pytest.raises(ConfigError, match="layers"):
        run_llm(str(tiny_models["phi"]), ["value_manifold"], tmp_path, layers="5")
