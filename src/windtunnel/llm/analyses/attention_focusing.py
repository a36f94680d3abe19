"""Attention focusing: attention entropy at the final query per layer, first to last.

Three summaries of the per-layer curve, each with a bootstrap interval over prompts (the same
resamples for all three): the relative drop first to last layer (Paper III's criterion), the
least-squares slope of entropy on depth (bits per unit of depth, depth = layer / (L - 1), so that
models of different depths compare), and the fraction of layer-to-layer steps in which entropy
falls (1 = monotone focusing; the paper calls GQA and sliding-window focusing "non-monotone").
The bootstrap replicates of the three are kept in ``llm.json`` (``focusing.bootstrap``): a
comparison of models reads them rather than recomputing anything."""

from __future__ import annotations

import numpy as np

from windtunnel.analysis import Analysis
from windtunnel.config import ConfigError
from windtunnel.llm import plots, report
from windtunnel.llm.capture import PromptCapture
from windtunnel.llm.session import Session, min_mean_max
from windtunnel.llm.stats import bootstrap_mean, ci, single_threaded_blas
from windtunnel.stats import spearman


def attention_focusing(sess: Session) -> dict:
    """Per-head entropy at the final query, averaged over query heads after the entropy, per
    layer; focusing = (H_first - H_last) / H_first; normalised by log2(#attendable keys); sink mass."""
    pool, cap = sess.pool("mixed")  # forward passes with the model's own threads
    idx = sess.selection("mixed")["indices"]
    with single_threaded_blas():
        return _attention_stats(sess, cap, idx)


def _attention_stats(sess: Session, cap: PromptCapture, idx) -> dict:
    o, ad = sess.opts, sess.lm.adapter
    if cap.attn_entropy is None:
        raise ConfigError("attention was not captured")
    H = cap.attn_entropy[idx].mean(2)  # (N, L): mean over query heads after the entropy
    Hn = cap.attn_entropy_norm[idx].mean(2)
    sink = cap.sink_mass[idx].mean(2)
    lengths = cap.lengths[idx]
    n_att = lengths if ad.sliding_window is None else np.minimum(lengths, ad.sliding_window)
    return {
        "positions": o.attention_positions, "n_prompts": len(idx), "n_query_heads": ad.n_heads,
        "prompt_tokens": min_mean_max(lengths), "uniform_bits_mean": float(np.log2(n_att).mean()),
        "sliding_window": ad.sliding_window,
        "bos_added_fraction": float(cap.bos_added[idx].mean()),
        "layers": _layers(H, Hn, sink, cap.attn_entropy[idx], o),
        "focusing": _focusing(H, Hn, o),
    }


def _drop(a: np.ndarray) -> float:
    """Relative entropy drop, first to last layer, of the mean over prompts of ``a`` (N, L)."""
    m = a.mean(0)
    return (m[0] - m[-1]) / m[0] if m[0] > 0 else float("nan")


def _slope(a: np.ndarray) -> float:
    """Least-squares slope of the mean entropy on depth (layer / (L - 1))."""
    m = a.mean(0)
    n_layers = m.size
    return float(np.polyfit(np.arange(n_layers) / max(1, n_layers - 1), m, 1)[0]) if n_layers > 1 else float("nan")


def _monotone(a: np.ndarray) -> float:
    """The fraction of layer-to-layer steps in which the mean entropy falls."""
    m = a.mean(0)
    return float((np.diff(m) < 0).mean()) if m.size > 1 else float("nan")


def _layers(H: np.ndarray, Hn: np.ndarray, sink: np.ndarray, per_head: np.ndarray, o) -> list[dict]:
    """Per layer: the entropy, the normalised entropy and the sink mass with their bootstrap
    intervals over prompts, and the entropy of each query head (``per_head``: N, L, H)."""
    nb, sd = o.n_bootstrap, o.bootstrap_seed
    layers = []
    for i in range(H.shape[1]):
        m, (lo, hi) = bootstrap_mean(H[:, i], nb, sd)
        mn, (lon, hin) = bootstrap_mean(Hn[:, i], nb, sd)
        ms, (los, his) = bootstrap_mean(sink[:, i], nb, sd)
        layers.append({"layer": i, "entropy_bits": float(m), "entropy_ci": [float(lo), float(hi)],
                       "normalised": float(mn), "normalised_ci": [float(lon), float(hin)],
                       "sink_mass": float(ms), "sink_mass_ci": [float(los), float(his)],
                       "per_head_bits": per_head[:, i].mean(0).tolist()})
    return layers


def _paired_tests(H: np.ndarray) -> dict:
    """Spearman of the mean curve on the layer, and paired t and Wilcoxon tests first to last layer."""
    from scipy.stats import ttest_rel, wilcoxon

    diff = H[:, 0] - H[:, -1]
    tt = ttest_rel(H[:, 0], H[:, -1]) if np.ptp(diff) > 0 else None
    try:
        wx = wilcoxon(H[:, 0], H[:, -1]) if np.any(diff != 0) else None
    except ValueError:
        wx = None
    rho, _ = spearman(np.arange(H.shape[1]), H.mean(0))
    return {"spearman_layer_entropy": rho,
            "paired_t_p": float(tt.pvalue) if tt is not None else float("nan"),
            "wilcoxon_p": float(wx.pvalue) if wx is not None else float("nan")}


def _focusing(H: np.ndarray, Hn: np.ndarray, o) -> dict:
    """The three summaries of the curve with intervals from the same resamples of the prompts
    (their replicates kept), the curve's ends and minimum, and the paired tests."""
    nb, sd = o.n_bootstrap, o.bootstrap_seed
    n = H.shape[0]
    boots = np.random.default_rng(sd).integers(0, n, (nb, n))
    reps = {name: np.array([fn(H[b]) for b in boots]) for name, fn in
            (("relative_drop", _drop), ("slope_bits_per_depth", _slope), ("monotone_fraction", _monotone))}
    curve = H.mean(0)
    return {"relative_drop": _drop(H), "ci": ci(reps["relative_drop"]),
            "normalised_relative_drop": _drop(Hn), "normalised_ci": ci([_drop(Hn[b]) for b in boots]),
            "slope_bits_per_depth": _slope(H), "slope_ci": ci(reps["slope_bits_per_depth"]),
            "monotone_fraction": _monotone(H), "monotone_ci": ci(reps["monotone_fraction"]),
            "n_steps": H.shape[1] - 1,
            "first_layer_bits": float(curve[0]), "last_layer_bits": float(curve[-1]),
            "min_layer": int(curve.argmin()), "min_layer_relative_drop": float((curve[0] - curve.min()) / curve[0])
            if curve[0] > 0 else float("nan"),
            **_paired_tests(H),
            "bootstrap": {"n": nb, "seed": sd, "resamples": "prompts, with replacement",
                          **{k: [round(float(x), 6) for x in v] for k, v in reps.items()}}}


ANALYSIS = Analysis(name="attention_focusing", title="Attention focusing", run=attention_focusing,
                    markdown=report.attention_focusing, plot=plots.attention_focusing)
