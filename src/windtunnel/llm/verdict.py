"""The verdict: Paper III's three criteria (and the derived domain-restriction one) judged on the
results, with the named :class:`~windtunnel.llm.config.Thresholds`."""

from __future__ import annotations

from windtunnel.llm.config import LLMOptions


def criteria(results: dict, opts: LLMOptions) -> dict:
    t = opts.thresholds
    out: dict = {"thresholds": t.model_dump()}
    pca = opts.primary_pca
    vm = None
    if t.manifold_set == "mixed" and "value_manifold" in results:
        vm = results["value_manifold"]
    elif "domain_restriction" in results:
        vm = results["domain_restriction"][t.manifold_set]
    if vm is not None:
        r = vm["layers"][str(vm["final_layer"])][pca]
        out["value_manifold"] = {"pass": bool(r["pc1"] > t.manifold_pc or r["pc1_pc2"] > t.manifold_pc),
                                 "pc1": r["pc1"], "pc1_pc2": r["pc1_pc2"], "set": t.manifold_set, "pca": pca,
                                 "gaussian_null_pc1_pc2": r["null"]["gaussian"]["pc1_pc2_mean"]}
    if "key_orthogonality" in results:
        s = results["key_orthogonality"]["summary"]
        out["key_orthogonality"] = {"pass": bool(s["fraction_layers_below_threshold"] >= t.key_orth_layer_frac),
                                    "fraction_layers_below": s["fraction_layers_below_threshold"]}
    if "attention_focusing" in results:
        f = results["attention_focusing"]["focusing"]
        out["attention_focusing"] = {"pass": bool(f["relative_drop"] > t.focusing_min),
                                     "relative_drop": f["relative_drop"]}
    if "domain_restriction" in results:
        dr = results["domain_restriction"]
        g = dr["gain"][str(dr["final_layer"])][pca]
        out["domain_restriction"] = {"pass": bool(g["pc1_pc2_gain"] > t.dr_gain_min), "gain": g["pc1_pc2_gain"],
                                     "note": "derived criterion, not one of the paper's three"}
    three = [k for k in ("value_manifold", "key_orthogonality", "attention_focusing") if k in out]
    passed = sum(out[k]["pass"] for k in three)
    if len(three) < 3:
        verdict = f"incomplete ({len(three)} of the 3 paper criteria evaluated, {passed} passed)"
    elif passed == 3:
        verdict = "all three criteria met: Bayesian geometric signatures (paper §4.4)"
    elif passed == 2:
        verdict = "partial validation (2/3 criteria): preserved qualitative structure (paper §4.4)"
    else:
        verdict = f"{passed}/3 criteria met"
    out["paper_criteria_passed"] = passed
    out["verdict"] = verdict
    return out
