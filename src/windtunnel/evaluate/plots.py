"""Calibration plots of one run's ``eval.json``: model entropy against the exact posterior entropy,
per position, and the error per position at every evaluation length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from windtunnel.figures import log_axes, plt, save_figure


def calibration_plot(curves: dict[str, dict[str, Any]], path: Path | str, title: str = "") -> Path:
    """Per-position H_model and H_Bayes (top) and |H_model - H_Bayes| (bottom, log scale).

    ``curves`` maps a label (an architecture, a run) to a summary's ``curves`` dict plus
    ``step`` (the prediction index k of each position), as written in ``eval.json``.
    """
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    bayes_drawn = False
    for label, c in curves.items():
        k = c["step"]
        if not bayes_drawn:
            top.plot(k, c["h_bayes"], "k--", lw=2, label="Bayes (exact)")
            bayes_drawn = True
        top.plot(k, c["h_model"], marker="o", ms=3, lw=1.2, label=label)
        bottom.plot(k, [max(v, 1e-6) for v in c["abs_dh"]], marker="o", ms=3, lw=1.2, label=label)
    top.set_ylabel("predictive entropy (bits)")
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    if title:
        top.set_title(title)
    bottom.set_yscale("log")
    bottom.set_xlabel("prediction index k")
    bottom.set_ylabel("|H_model - H_Bayes| (bits)")
    bottom.grid(alpha=0.3, which="both")
    return save_figure(fig, path)


def length_plot(per_length: dict[str, dict[str, Any]], path: Path | str, title: str = "") -> Path:
    """|H_model - H_Bayes| per position for each evaluation length (length generalisation)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for L, s in sorted(per_length.items(), key=lambda kv: int(kv[0])):
        c = s["curves"]
        err = s["entropy_error_mean_abs"]["value"]
        ax.plot(s["step"], [max(v, 1e-6) for v in c["abs_dh"]], marker="o", ms=2, label=f"length {L}: {err:.4f} bits")
    log_axes(ax, "prediction index k", "|H_model - H_Bayes| (bits)", title)
    return save_figure(fig, path)
