"""The headline numbers of one model's ``llm.json``, read (never recomputed) for a comparison.

:func:`headline` flattens what a comparison of models shows into one row: the model's
architecture and cost, and per analysis its headline numbers beside their nulls (the primary PCA
space of the run, its final layer). :func:`curves` reads the per-layer curves the comparison's
figures overlay. A missing analysis gives ``None`` cells, never a guess.
"""

from __future__ import annotations

import math
from typing import Any

from windtunnel.llm.architecture import architecture_of


def get(doc: Any, *path: Any) -> Any:
    """``doc[p0][p1]...`` or None where any step is missing; NaN reads as None."""
    for p in path:
        if isinstance(doc, dict):
            doc = doc.get(str(p) if not isinstance(p, str) else p)
        elif isinstance(doc, list) and isinstance(p, int) and -len(doc) <= p < len(doc):
            doc = doc[p]
        else:
            return None
        if doc is None:
            return None
    return None if isinstance(doc, float) and math.isnan(doc) else doc


def _pca(doc: dict, which: str) -> dict | None:
    """The primary-space PCA report of the final layer on the mixed or math set."""
    r = doc.get("results", {})
    vm = r.get("value_manifold") if which == "mixed" else get(r, "domain_restriction", "math")
    if vm is None and which == "mixed":
        vm = get(r, "domain_restriction", "mixed")
        vm = None if vm is None or vm.get("same_as") else vm
    if vm is None:
        return None
    return get(vm, "layers", vm["final_layer"], doc["options"].get("primary_pca", "standardized"))


def intervention_pair(doc: dict) -> dict | None:
    """The layer set whose true-axis and random-axis cuts the comparison shows: the first that has
    both and layers after it (where the geometry is read downstream), else the first that has both."""
    runs = get(doc, "results", "interventions", "runs") or []
    sets: dict[str, dict] = {}
    for r in runs:
        sets.setdefault(",".join(map(str, r["layers"])), {})[r["condition"]] = r
    pairs = [(k, v) for k, v in sets.items() if "true_cut" in v and "random_cut" in v]
    if not pairs:
        return None
    down = [(k, v) for k, v in pairs if get(v["true_cut"], "delta_axis_corr_downstream") is not None]
    k, v = (down or pairs)[0]
    return {"layers": k, "true": v["true_cut"], "random": v["random_cut"]}


def _sula_nulls(sula: Any) -> dict[str, Any]:
    """The SULA calibration's nulls: recorded by newer runs, else computed from the prompts
    (every ``llm.json`` keeps ``per_prompt``: k, H_Bayes, H_model)."""
    cal = get(sula, "calibration") or {}
    keys = ("constant_mae", "count_mae", "within_k_spearman", "within_k_p")
    if all(k in cal for k in keys):
        return {k: cal[k] for k in keys}
    pp = get(sula, "per_prompt") or {}
    if not pp.get("h_bayes"):
        return dict.fromkeys(keys)
    from windtunnel.llm.sula_prompts import constant_mae, within_k

    rho, p = within_k(pp["h_model"], pp["h_bayes"], pp["k"])
    return {"constant_mae": constant_mae(pp["h_bayes"]), "count_mae": constant_mae(pp["h_bayes"], pp["k"]),
            "within_k_spearman": rho, "within_k_p": p}


def _random_cuts(results: dict, pair: dict | None) -> list[float] | None:
    """The random-axis cuts' changes of the downstream correlation, at the layer set of ``pair``."""
    dist = get(results, "interventions", "random_axis_distribution")
    if pair is None or not dist or ",".join(map(str, dist.get("layers", []))) != pair["layers"]:
        return None
    return dist["delta_axis_corr_downstream"]


def _model_columns(m: dict, t: dict) -> dict[str, Any]:
    """The model's architecture and the run's cost (``m``: llm.json's ``model``; ``t``: its ``timing``)."""
    arch = architecture_of(m)
    return {
        "attention": arch["label"], "group": arch["group"], "n_heads": m["n_heads"], "n_kv_heads": m["n_kv_heads"],
        "kv_ratio": arch["kv_ratio"], "sliding_window": arch["sliding_window"],
        "moe_experts": (arch.get("moe") or {}).get("experts"), "n_parameters": m["n_parameters"],
        "n_layers": m["n_layers"], "d_model": m["d_model"], "dtype": m["dtype"], "device": m["device"] or m["device_map"],
        "seconds": t.get("total_s"), "load_s": t.get("load_s"), "prompts_per_s": t.get("prompts_per_s"),
        "peak_rss_mib": t.get("peak_rss_mib"), "rss_growth_mib": t.get("rss_growth_mib"),
        "peak_gpu_mib": t.get("peak_gpu_allocated_mib"),
        "memory_estimate_mib": None if get(m, "memory", "estimate", "total") is None
        else m["memory"]["estimate"]["total"] / 1024 ** 2,
    }


def _manifold_columns(doc: dict) -> dict[str, Any]:
    """The value manifold on the mixed and math sets (final layer, primary PCA space) and the gain."""
    mixed, math_ = _pca(doc, "mixed"), _pca(doc, "math")
    dr = get(doc.get("results", {}), "domain_restriction")
    gain = get(dr, "gain", dr["final_layer"], doc["options"].get("primary_pca", "standardized")) if dr else None
    return {
        "mixed_pc1": get(mixed, "pc1"), "mixed_pc1_pc2": get(mixed, "pc1_pc2"),
        "mixed_pc1_pc2_lo": get(mixed, "pc1_pc2_ci", 0), "mixed_pc1_pc2_hi": get(mixed, "pc1_pc2_ci", 1),
        "mixed_pc1_boot": get(mixed, "pc1_boot_mean"), "mixed_pc1_lo": get(mixed, "pc1_ci", 0),
        "mixed_pc1_hi": get(mixed, "pc1_ci", 1), "mixed_pc1_pc2_boot": get(mixed, "pc1_pc2_boot_mean"),
        "mixed_null_pc1_pc2": get(mixed, "null", "gaussian", "pc1_pc2_mean"),
        "mixed_perm_q95": get(mixed, "null", "column_permutation", "pc1_pc2_q95"),
        "mixed_spearman_pc1_entropy": get(mixed, "spearman_pc1_entropy"),
        "math_pc1": get(math_, "pc1"), "math_pc1_pc2": get(math_, "pc1_pc2"),
        "math_pc1_pc2_lo": get(math_, "pc1_pc2_ci", 0), "math_pc1_pc2_hi": get(math_, "pc1_pc2_ci", 1),
        "math_pc1_boot": get(math_, "pc1_boot_mean"), "math_pc1_pc2_boot": get(math_, "pc1_pc2_boot_mean"),
        "math_perm_q95": get(math_, "null", "column_permutation", "pc1_pc2_q95"),
        "dr_gain": get(gain, "pc1_pc2_gain"), "dr_gain_lo": get(gain, "ci", 0), "dr_gain_hi": get(gain, "ci", 1),
    }


def _attention_columns(r: dict) -> dict[str, Any]:
    """Key orthogonality and attention focusing (``r``: llm.json's ``results``)."""
    ko = get(r, "key_orthogonality")
    fo = get(r, "attention_focusing", "focusing")
    return {
        "key_orth_mean": get(ko, "summary", "mean"), "key_orth_early": get(ko, "summary", "early_mean"),
        "key_orth_frac_below": get(ko, "summary", "fraction_layers_below_threshold"),
        "key_orth_threshold": get(ko, "summary", "threshold"),
        "key_null_gaussian": get(ko, "null", "gaussian_empirical", "layer_mean"),
        "key_null_gaussian_q05": get(ko, "null", "gaussian_empirical", "layer_q05"),
        "key_null_init": get(ko, "null", "init_revision", "mean") or get(ko, "null", "init_from_config", "mean"),
        "focusing": get(fo, "relative_drop"), "focusing_lo": get(fo, "ci", 0), "focusing_hi": get(fo, "ci", 1),
        "focusing_slope": get(fo, "slope_bits_per_depth"), "focusing_slope_lo": get(fo, "slope_ci", 0),
        "focusing_slope_hi": get(fo, "slope_ci", 1),
        "monotone_fraction": get(fo, "monotone_fraction"), "monotone_lo": get(fo, "monotone_ci", 0),
        "monotone_hi": get(fo, "monotone_ci", 1), "focusing_paired_t_p": get(fo, "paired_t_p"),
        "first_layer_bits": get(fo, "first_layer_bits"), "last_layer_bits": get(fo, "last_layer_bits"),
    }


def _sula_columns(doc: dict) -> dict[str, Any]:
    """SULA's calibration and alignment, and one layer set's true-axis cut against a random-axis cut."""
    r = doc.get("results", {})
    su = get(r, "sula")
    iv = intervention_pair(doc)
    return {
        "sula_mae": get(su, "calibration", "mae"), "sula_uniform_mae": get(su, "calibration", "uniform_mae"),
        **{f"sula_{k}": v for k, v in _sula_nulls(su).items()},
        "sula_corr": get(su, "calibration", "corr"),
        "sula_spearman_pc1_h_bayes": get(su, "alignment", "spearman_pc1_h_bayes"),
        "sula_spearman_p": get(su, "alignment", "spearman_pc1_h_bayes_p"),
        "sula_rho_k_pc1": get(su, "trajectory", "spearman_k_pc1"),
        "iv_layers": get(iv, "layers"),
        "iv_true_dmae": get(iv, "true", "delta_mae"), "iv_random_dmae": get(iv, "random", "delta_mae"),
        "iv_true_dgeometry": get(iv, "true", "delta_axis_corr_downstream"),
        "iv_random_dgeometry": get(iv, "random", "delta_axis_corr_downstream"),
        "iv_baseline_geometry": get(iv, "true", "baseline_axis_corr_downstream_mean"),
        "iv_random_dgeometry_all": _random_cuts(r, iv),
    }


def headline(doc: dict) -> dict[str, Any]:
    """One row of a comparison from one ``llm.json``: the model and its cost, then per analysis its
    headline numbers (a missing analysis gives None cells)."""
    return {**_model_columns(doc["model"], doc.get("timing", {})), **_manifold_columns(doc),
            **_attention_columns(doc.get("results", {})), **_sula_columns(doc)}


def curves(doc: dict) -> dict[str, Any]:
    """Per-layer curves for the overlaid figures (None where the analysis did not run; PC shares
    only at the layers the run analysed, all of them with ``layers=all``)."""
    r = doc.get("results", {})
    pca = doc["options"].get("primary_pca", "standardized")
    out: dict[str, Any] = {"n_layers": doc["model"]["n_layers"]}
    for which in ("mixed", "math"):
        vm = r.get("value_manifold") if which == "mixed" else get(r, "domain_restriction", "math")
        if vm:
            layers = sorted(vm["layers"], key=int)
            out[which] = {"layers": [int(x) for x in layers],
                          "pc1": [vm["layers"][x][pca]["pc1"] for x in layers],
                          "pc1_pc2": [vm["layers"][x][pca]["pc1_pc2"] for x in layers]}
    ko = r.get("key_orthogonality")
    if ko:
        g = ko["null"]["gaussian_empirical"]
        out["keys"] = {"mean": [x["mean"] for x in ko["layers"]], "null_q05": g["layer_q05"], "null_q95": g["layer_q95"],
                       "init": get(ko, "null", "init_revision", "per_layer") or get(ko, "null", "init_from_config", "per_layer")}
    af = r.get("attention_focusing")
    if af:
        out["attention"] = {"bits": [x["entropy_bits"] for x in af["layers"]],
                            "lo": [x["entropy_ci"][0] for x in af["layers"]], "hi": [x["entropy_ci"][1] for x in af["layers"]],
                            "normalised": [x["normalised"] for x in af["layers"]]}
    return out
