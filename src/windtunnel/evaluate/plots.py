"""Calibration plots of one run's ``eval.json``: model entropy against the exact posterior entropy,
per position, and the error per position at every evaluation length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from windtunnel.evaluate.record import METRICS
from windtunnel.figures import line_styles, log_axes, plt, save_figure


def calibration_plot(curves: dict[str, dict[str, Any]], path: Path | str, title: str = "") -> Path:
    """Per-position H_model and H_Bayes (top) and |H_model - H_Bayes| (bottom, log scale).

    ``curves`` maps a label (an architecture, a run) to a summary's ``curves`` dict plus
    ``step`` (the prediction index k of each position), as written in ``eval.json``.
    """
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    bayes_drawn = False
    look = line_styles(list(curves))
    for label, c in curves.items():
        k = c["step"]
        if not bayes_drawn:
            top.plot(k, c["h_bayes"], "k--", lw=2, label="Bayes (exact)")
            bayes_drawn = True
        top.plot(k, c["h_model"], ms=3, lw=1.2, label=label, **look[label])
        bottom.plot(k, [max(v, 1e-6) for v in c["abs_dh"]], ms=3, lw=1.2, label=label, **look[label])
    top.set_ylabel("predictive entropy (bits)")
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    top.set_title(title or "Predictive entropy per position against the exact posterior")
    bottom.set_yscale("log")
    bottom.set_xlabel("prediction index k")
    bottom.set_ylabel("|H_model - H_Bayes| (bits)")
    bottom.grid(alpha=0.3, which="both")
    return save_figure(fig, path)


def length_plot(per_length: dict[str, dict[str, Any]], path: Path | str, title: str = "") -> Path:
    """|H_model - H_Bayes| per position for each evaluation length (length generalisation)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    ordered = sorted(per_length.items(), key=lambda kv: int(kv[0]))
    e = METRICS["entropy_error"]
    labels = [f"length {L}: {s[e.eval_key]['value']:.{e.digits}f} {e.unit}" for L, s in ordered]
    look = line_styles(labels)
    for label, (_, s) in zip(labels, ordered):
        ax.plot(s["step"], [max(v, 1e-6) for v in s["curves"]["abs_dh"]], ms=3, label=label, **look[label])
    log_axes(ax, "prediction index k", "|H_model - H_Bayes| (bits)",
             title or "Entropy error per position at each evaluation length")
    return save_figure(fig, path)
