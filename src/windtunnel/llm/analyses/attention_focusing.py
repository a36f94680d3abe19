"""Attention focusing: attention entropy at the final query per layer, first to last."""

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
        "focusing": {"relative_drop": drop(H), "ci": drop_ci(H),
                     "normalised_relative_drop": drop(Hn), "normalised_ci": drop_ci(Hn),
                     "first_layer_bits": float(curve[0]), "last_layer_bits": float(curve[-1]),
                     "min_layer": int(curve.argmin()), "min_layer_relative_drop": float((curve[0] - curve.min()) / curve[0])
                     if curve[0] > 0 else float("nan"),
                     "spearman_layer_entropy": rho,
                     "paired_t_p": float(tt.pvalue) if tt is not None else float("nan"),
                     "wilcoxon_p": float(wx.pvalue) if wx is not None else float("nan")},
    }


ANALYSIS = Analysis(name="attention_focusing", title="Attention focusing", run=attention_focusing,
                    markdown=report.attention_focusing, plot=plots.attention_focusing)
