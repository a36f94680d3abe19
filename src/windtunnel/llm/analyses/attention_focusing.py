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
    from scipy.stats import ttest_rel, wilcoxon

    o = sess.opts
    if cap.attn_entropy is None:
        raise ConfigError("attention was not captured")
    H = cap.attn_entropy[idx].mean(2)  # (N, L): mean over query heads after the entropy
    Hn = cap.attn_entropy_norm[idx].mean(2)
    sink = cap.sink_mass[idx].mean(2)
    nb, sd = o.n_bootstrap, o.bootstrap_seed
    rng = np.random.default_rng(sd)
    n = len(idx)
    boots = rng.integers(0, n, (nb, n))

    def drop(a):
        m = a.mean(0)
        return (m[0] - m[-1]) / m[0] if m[0] > 0 else float("nan")

    def drop_ci(a):
        return ci([drop(a[b]) for b in boots])

    depth = np.arange(sess.L) / max(1, sess.L - 1)

    def slope(a):
        m = a.mean(0)
        return float(np.polyfit(depth, m, 1)[0]) if sess.L > 1 else float("nan")

    def monotone(a):
        m = a.mean(0)
        return float((np.diff(m) < 0).mean()) if sess.L > 1 else float("nan")

    reps = {name: np.array([fn(H[b]) for b in boots]) for name, fn in
            (("relative_drop", drop), ("slope_bits_per_depth", slope), ("monotone_fraction", monotone))}

    layers = []
    for i in range(sess.L):
        m, (lo, hi) = bootstrap_mean(H[:, i], nb, sd)
        mn, (lon, hin) = bootstrap_mean(Hn[:, i], nb, sd)
        ms, (los, his) = bootstrap_mean(sink[:, i], nb, sd)
        layers.append({"layer": i, "entropy_bits": float(m), "entropy_ci": [float(lo), float(hi)],
                       "normalised": float(mn), "normalised_ci": [float(lon), float(hin)],
                       "sink_mass": float(ms), "sink_mass_ci": [float(los), float(his)],
                       "per_head_bits": cap.attn_entropy[idx][:, i].mean(0).tolist()})
    diff = H[:, 0] - H[:, -1]
    tt = ttest_rel(H[:, 0], H[:, -1]) if np.ptp(diff) > 0 else None
    try:
        wx = wilcoxon(H[:, 0], H[:, -1]) if np.any(diff != 0) else None
    except ValueError:
        wx = None
    curve = H.mean(0)
    rho, _ = spearman(np.arange(sess.L), curve)
    lengths = cap.lengths[idx]
    n_att = lengths if sess.lm.adapter.sliding_window is None else np.minimum(lengths, sess.lm.adapter.sliding_window)
    return {
        "positions": o.attention_positions, "n_prompts": n, "n_query_heads": sess.lm.adapter.n_heads,
        "prompt_tokens": min_mean_max(lengths), "uniform_bits_mean": float(np.log2(n_att).mean()),
        "sliding_window": sess.lm.adapter.sliding_window,
        "bos_added_fraction": float(cap.bos_added[idx].mean()),
        "layers": layers,
        "focusing": {"relative_drop": drop(H), "ci": ci(reps["relative_drop"]),
                     "normalised_relative_drop": drop(Hn), "normalised_ci": drop_ci(Hn),
                     "slope_bits_per_depth": slope(H), "slope_ci": ci(reps["slope_bits_per_depth"]),
                     "monotone_fraction": monotone(H), "monotone_ci": ci(reps["monotone_fraction"]),
                     "n_steps": sess.L - 1,
                     "first_layer_bits": float(curve[0]), "last_layer_bits": float(curve[-1]),
                     "min_layer": int(curve.argmin()), "min_layer_relative_drop": float((curve[0] - curve.min()) / curve[0])
                     if curve[0] > 0 else float("nan"),
                     "spearman_layer_entropy": rho,
                     "paired_t_p": float(tt.pvalue) if tt is not None else float("nan"),
                     "wilcoxon_p": float(wx.pvalue) if wx is not None else float("nan"),
                     "bootstrap": {"n": nb, "seed": sd, "resamples": "prompts, with replacement",
                                   **{k: [round(float(x), 6) for x in v] for k, v in reps.items()}}},
    }


ANALYSIS = Analysis(name="attention_focusing", title="Attention focusing", run=attention_focusing,
                    markdown=report.attention_focusing, plot=plots.attention_focusing)
