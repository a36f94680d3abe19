"""Entropy-axis interventions: cut or shift the SULA value axis and measure the calibration."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from windtunnel.analysis import Analysis
from windtunnel.llm import axis_operators as iv
from windtunnel.llm import plots, report
from windtunnel.llm import sula_prompts as S
from windtunnel.llm.analyses.sula import label_ids, sula_capture
from windtunnel.llm.capture import Keep, PromptCapture
from windtunnel.llm.session import Session


@dataclass(frozen=True)
class _Baseline:
    """The unperturbed SULA pass every intervention is read against."""

    h_model: np.ndarray
    calibration: dict
    axis_corr: dict[str, dict]  # per layer, from iv.axis_correlations
    residual_corr: float  # |corr(PC1 of the final residual stream, H_model)|


@dataclass(frozen=True)
class _Pass:
    """One pass with an intervention: its capture, the model's entropy and calibration, and the
    axis-entropy correlations at every layer from the first one intervened on."""

    cap: PromptCapture
    h_model: np.ndarray
    calibration: dict
    axis_corr: dict[str, dict]


def interventions(sess: Session) -> dict:
    o = sess.opts
    sets, caps = sula_capture(sess)
    main, base = sets["main"], caps["main"]
    _, h0, _ = S.model_posterior(base.label_probs)
    axes = iv.Axes({i: iv.estimate_axis(base.values[i], h0, o.axis_space, o.axis_sign) for i in range(sess.L)},
                   sess.lm.adapter.value_dim, o.shift_sigma, o.random_axis_orthogonal)
    layer_sets = iv.check_layer_sets(o.intervention_layers or iv.default_layer_sets(sess.L), sess.L)
    baseline = _Baseline(h0, S.calibration(h0, main.h_bayes, main.k),
                         iv.axis_correlations(base.values, h0, axes.per_layer, range(sess.L)),
                         iv.residual_pc1_corr(base.residual, h0))
    out = _setup(o, axes, layer_sets, baseline)
    run = functools.partial(_run, sess, main, axes)
    for layers in layer_sets:
        for cond in o.intervention_conditions:
            out["runs"].append(_record(cond, layers, run(cond, layers, o.seed), baseline, sess.L))
    out["random_axis_distribution"] = _random_cuts(run, baseline, layer_sets, sess)
    return out


def _setup(o, axes: iv.Axes, layer_sets: list[list[int]], baseline: _Baseline) -> dict:
    """The record before any run: the axes, the random axes' seeding, the layer sets, the baseline."""
    return {
        "axis": {"space": o.axis_space, "sign": o.axis_sign,
                 "definition": "PC1 of unperturbed SULA final-token values per layer"
                               + (" (centred raw values)" if o.axis_space == "raw" else
                                  " (standardized; mapped to raw space as u ~ D^-1 w, renormalised)"),
                 "sigma_per_layer": [a.sigma for a in axes.per_layer.values()],
                 "corr_v_u_h_model_per_layer": [a.corr for a in axes.per_layer.values()]},
        "random_axis": {"seed": f"seed + layer = {o.seed} + layer", "orthogonalised": o.random_axis_orthogonal},
        "applied_to": "value projection output, all token positions, before attention mixing",
        "layer_sets": layer_sets, "baseline": {"calibration": baseline.calibration, "axis_corr": baseline.axis_corr,
                                               "residual_pc1_abs_corr": baseline.residual_corr},
        "runs": [],
    }


def _run(sess: Session, main: S.SULASet, axes: iv.Axes, cond: str, layers: list[int], seed: int) -> _Pass:
    """The main SULA prompts with condition ``cond`` applied at ``layers`` (random axes from ``seed``)."""
    ops = iv.condition_ops(cond, layers, axes, seed)
    measured = list(range(min(layers), sess.L))
    cap = sess.run(main.texts, Keep(value_layers=measured, label_ids=label_ids(sess, main.labels), residual=True),
                   interventions=ops)
    _, h, _ = S.model_posterior(cap.label_probs)
    return _Pass(cap, h, S.calibration(h, main.h_bayes, main.k), iv.axis_correlations(cap.values, h, axes.per_layer,
                                                                                         measured))


def _nanmean(x: list[float]) -> float:
    return float(np.nanmean(x)) if x else float("nan")


def _record(cond: str, layers: list[int], run: _Pass, base: _Baseline, n_layers: int) -> dict:
    """What one run changed against the baseline: calibration, the axis-entropy correlation at the
    (last) cut layer, downstream of it and at the final layer, and the residual stream's PC1."""
    corr, cal, base_cal = run.axis_corr, run.calibration, base.calibration
    last_cut = max(layers)
    after = [i for i in range(min(layers), n_layers) if i > last_cut]
    down = [corr[str(i)]["fixed_axis"] for i in after]
    down_base = [base.axis_corr[str(i)]["fixed_axis"] for i in after]
    resid = iv.residual_pc1_corr(run.cap.residual, run.h_model)
    return {
        "layers": layers, "condition": cond,
        "calibration": {"mae": cal["mae"], "corr": cal["corr"],
                        "per_k": {k: {"mae": v["mae"], "mean_h_model": v["mean_h_model"]}
                                  for k, v in cal["per_k"].items()}},
        "delta_mae": cal["mae"] - base_cal["mae"], "delta_corr": cal["corr"] - base_cal["corr"],
        "mean_abs_change_h_model": float(np.abs(run.h_model - base.h_model).mean()),
        "axis_corr_at_cut": corr[str(last_cut)]["fixed_axis"],
        "axis_projection_std_ratio_at_cut": corr[str(last_cut)]["projection_std_ratio"],
        "axis_corr_at_cut_note": "post-intervention values at the cut layer (the authors' measure); for a true "
                                 "cut v.u is rounding noise by construction, reported as null (NaN)",
        "axis_corr_downstream_mean": _nanmean(down),
        "baseline_axis_corr_downstream_mean": _nanmean(down_base),
        "delta_axis_corr_downstream": float(np.nanmean(down) - np.nanmean(down_base)) if down else float("nan"),
        "axis_corr_downstream_reestimated_mean": _nanmean([corr[str(i)]["reestimated_abs"] for i in after]),
        "axis_corr_final_layer": corr[str(n_layers - 1)]["fixed_axis"],
        "baseline_axis_corr_final_layer": base.axis_corr[str(n_layers - 1)]["fixed_axis"],
        "residual_pc1_abs_corr": resid,
        "delta_residual_pc1_abs_corr": resid - base.residual_corr,
        "axis_corr_per_layer": corr,
    }


def _random_cuts(run, base: _Baseline, layer_sets, sess: Session) -> dict:
    """``n_random_axes`` random-axis cuts (seeds ``seed + 1000 j``) at the first layer set with
    layers after it, for a model calibrated beyond the best constant predictor (the entropy-axis
    claim is not testable otherwise, so nothing is run): the change of the downstream axis-entropy
    correlation and of the MAE of each, the distribution the true cut is read against."""
    o = sess.opts
    base_cal = base.calibration
    calibrated = S.reads_labels(*(base_cal[k] for k in ("mae", "constant_mae", "within_k_spearman", "within_k_p")))
    down_sets = [ls for ls in layer_sets if max(ls) < sess.L - 1]
    if not o.n_random_axes or not calibrated or not down_sets:
        why = ("n_random_axes = 0" if not o.n_random_axes else
               "not calibrated beyond the best constant predictor" if not calibrated else
               "every layer set ends at the last layer (nothing downstream)")
        return {"skipped": why}
    layers = down_sets[0]
    down = [i for i in range(max(layers) + 1, sess.L)]
    mean_base = float(np.nanmean([base.axis_corr[str(i)]["fixed_axis"] for i in down]))
    seeds = [o.seed + 1000 * (j + 1) for j in range(o.n_random_axes)]
    dgeo, dmae = [], []
    for seed in seeds:
        cut = run("random_cut", layers, seed)
        dgeo.append(float(np.nanmean([cut.axis_corr[str(i)]["fixed_axis"] for i in down])) - mean_base)
        dmae.append(cut.calibration["mae"] - base_cal["mae"])
    return {"layers": layers, "seeds": seeds, "delta_axis_corr_downstream": dgeo, "delta_mae": dmae}


ANALYSIS = Analysis(name="interventions", title="Entropy-axis interventions", run=interventions,
                    markdown=report.interventions, plot=plots.interventions)
