"""Entropy-axis interventions: cut or shift the SULA value axis and measure the calibration."""

from __future__ import annotations

import numpy as np

from windtunnel.analysis import Analysis
from windtunnel.llm import interventions as iv
from windtunnel.llm import plots, report
from windtunnel.llm import sula as S
from windtunnel.llm.analyses.sula import label_ids, sula_capture
from windtunnel.llm.capture import Keep
from windtunnel.llm.session import Session


def interventions(sess: Session) -> dict:
    o = sess.opts
    ad = sess.lm.adapter
    sets, caps = sula_capture(sess)
    main, base = sets["main"], caps["main"]
    _, h0, _ = S.model_posterior(base.label_probs)
    axes = {i: iv.estimate_axis(base.values[i], h0, o.axis_space, o.axis_sign) for i in range(sess.L)}
    layer_sets = iv.check_layer_sets(o.intervention_layers or iv.default_layer_sets(sess.L), sess.L)
    base_cal = S.calibration(h0, main.h_bayes, main.k)
    base_corr = iv.axis_correlations(base.values, h0, axes, range(sess.L))
    out = {
        "axis": {"space": o.axis_space, "sign": o.axis_sign,
                 "definition": "PC1 of unperturbed SULA final-token values per layer"
                               + (" (centred raw values)" if o.axis_space == "raw" else
                                  " (standardized; mapped to raw space as u ~ D^-1 w, renormalised)"),
                 "sigma_per_layer": [axes[i].sigma for i in range(sess.L)],
                 "corr_v_u_h_model_per_layer": [axes[i].corr for i in range(sess.L)]},
        "random_axis": {"seed": f"seed + layer = {o.seed} + layer", "orthogonalised": o.random_axis_orthogonal},
        "applied_to": "value projection output, all token positions, before attention mixing",
        "layer_sets": layer_sets, "baseline": {"calibration": base_cal, "axis_corr": base_corr,
                                               "residual_pc1_abs_corr": iv.residual_pc1_corr(base.residual, h0)},
        "runs": [],
    }
    def run(cond: str, layers: list[int], seed: int):  # -> (capture, H_model, calibration)
        ops = iv.condition_ops(cond, layers, axes, ad.value_dim, seed, o.shift_sigma, o.random_axis_orthogonal)
        measured = list(range(min(layers), sess.L))
        cap = sess.run(main.texts, Keep(value_layers=measured, label_ids=label_ids(sess, main.labels), residual=True),
                       interventions=ops)
        _, h, _ = S.model_posterior(cap.label_probs)
        return cap, h, S.calibration(h, main.h_bayes, main.k)

    for layers in layer_sets:
        for cond in o.intervention_conditions:
            measured = list(range(min(layers), sess.L))
            cap, h, cal = run(cond, layers, o.seed)
            corr = iv.axis_correlations(cap.values, h, axes, measured)
            last_cut = max(layers)
            down = [corr[str(i)]["fixed_axis"] for i in measured if i > last_cut]
            down_re = [corr[str(i)]["reestimated_abs"] for i in measured if i > last_cut]
            down_base = [base_corr[str(i)]["fixed_axis"] for i in measured if i > last_cut]
            resid = iv.residual_pc1_corr(cap.residual, h)
            out["runs"].append({
                "layers": layers, "condition": cond,
                "calibration": {"mae": cal["mae"], "corr": cal["corr"],
                                "per_k": {k: {"mae": v["mae"], "mean_h_model": v["mean_h_model"]}
                                          for k, v in cal["per_k"].items()}},
                "delta_mae": cal["mae"] - base_cal["mae"], "delta_corr": cal["corr"] - base_cal["corr"],
                "mean_abs_change_h_model": float(np.abs(h - h0).mean()),
                "axis_corr_at_cut": corr[str(last_cut)]["fixed_axis"],
                "axis_projection_std_ratio_at_cut": corr[str(last_cut)]["projection_std_ratio"],
                "axis_corr_at_cut_note": "post-intervention values at the cut layer (the authors' measure); for a true "
                                         "cut v.u is rounding noise by construction, reported as null (NaN)",
                "axis_corr_downstream_mean": float(np.nanmean(down)) if down else float("nan"),
                "baseline_axis_corr_downstream_mean": float(np.nanmean(down_base)) if down_base else float("nan"),
                "delta_axis_corr_downstream": float(np.nanmean(down) - np.nanmean(down_base)) if down else float("nan"),
                "axis_corr_downstream_reestimated_mean": float(np.nanmean(down_re)) if down_re else float("nan"),
                "axis_corr_final_layer": corr[str(sess.L - 1)]["fixed_axis"],
                "baseline_axis_corr_final_layer": base_corr[str(sess.L - 1)]["fixed_axis"],
                "residual_pc1_abs_corr": resid,
                "delta_residual_pc1_abs_corr": resid - out["baseline"]["residual_pc1_abs_corr"],
                "axis_corr_per_layer": corr,
            })
    out["random_axis_distribution"] = _random_cuts(run, axes, base_cal, base_corr, layer_sets, sess)
    return out


def _random_cuts(run, axes, base_cal: dict, base_corr: dict, layer_sets, sess: Session) -> dict:
    """``n_random_axes`` random-axis cuts (seeds ``seed + 1000 j``) at the first layer set with
    layers after it, for a model calibrated beyond the best constant predictor (the entropy-axis
    claim is not testable otherwise, so nothing is run): the change of the downstream axis-entropy
    correlation and of the MAE of each, the distribution the true cut is read against."""
    o = sess.opts
    calibrated = S.reads_labels(*(base_cal[k] for k in ("mae", "constant_mae", "within_k_spearman", "within_k_p")))
    down_sets = [ls for ls in layer_sets if max(ls) < sess.L - 1]
    if not o.n_random_axes or not calibrated or not down_sets:
        why = ("n_random_axes = 0" if not o.n_random_axes else
               "not calibrated beyond the best constant predictor" if not calibrated else
               "every layer set ends at the last layer (nothing downstream)")
        return {"skipped": why}
    layers = down_sets[0]
    down = [i for i in range(max(layers) + 1, sess.L)]
    base = float(np.nanmean([base_corr[str(i)]["fixed_axis"] for i in down]))
    seeds = [o.seed + 1000 * (j + 1) for j in range(o.n_random_axes)]
    dgeo, dmae = [], []
    for seed in seeds:
        cap, h, cal = run("random_cut", layers, seed)
        corr = iv.axis_correlations(cap.values, h, axes, list(range(min(layers), sess.L)))
        dgeo.append(float(np.nanmean([corr[str(i)]["fixed_axis"] for i in down])) - base)
        dmae.append(cal["mae"] - base_cal["mae"])
    return {"layers": layers, "seeds": seeds, "delta_axis_corr_downstream": dgeo, "delta_mae": dmae}


ANALYSIS = Analysis(name="interventions", title="Entropy-axis interventions", run=interventions,
                    markdown=report.interventions, plot=plots.interventions)
