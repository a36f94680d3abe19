"""Calibration plots: model entropy against the exact posterior entropy, per position."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from windtunnel.files import atomic_write_bytes  # noqa: E402


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
    return _save(fig, path)


def length_plot(per_length: dict[str, dict[str, Any]], path: Path | str, title: str = "") -> Path:
    """|H_model - H_Bayes| per position for each evaluation length (length generalisation)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for L, s in sorted(per_length.items(), key=lambda kv: int(kv[0])):
        c = s["curves"]
        err = s["entropy_error_mean_abs"]["value"]
        ax.plot(s["step"], [max(v, 1e-6) for v in c["abs_dh"]], marker="o", ms=2, label=f"length {L}: {err:.4f} bits")
    _log_axes(ax, "prediction index k", "|H_model - H_Bayes| (bits)", title)
    return _save(fig, path)


def _log_axes(ax, xlabel: str, ylabel: str, title: str = "", log: bool = True) -> None:
    """Log (or linear) y axis, labels, grid, legend and title: the style every line plot here shares."""
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)


def _save(fig, path: Path | str, tight: bool = True) -> Path:
    """Save ``fig`` atomically (a full disk leaves the previous image, never half of one)."""
    if tight:  # not with a colorbar spanning several axes
        fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def length_comparison_plot(per_model: dict[str, list[tuple[int, float, float, float]]], path: Path | str,
                           train_length: int | None = None, title: str = "") -> Path:
    """Entropy error against evaluation length, one line per model (``(length, value, lo, hi)``)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, pts in per_model.items():
        pts = sorted(pts)
        x = [p[0] for p in pts]
        y = [max(p[1], 1e-6) for p in pts]
        err = [[max(p[1] - p[2], 0) for p in pts], [max(p[3] - p[1], 0) for p in pts]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
    if train_length is not None:
        ax.axvline(train_length, color="grey", ls=":", label=f"training length {train_length}")
    _log_axes(ax, "evaluation length", "entropy error (bits)", title)
    return _save(fig, path)


def accuracy_plot(acc: dict[str, tuple[float, float, float]], path: Path | str, chance: float | None = None,
                  chance_label: str = "best baseline", title: str = "") -> Path:
    """Accuracy per model (value, lo, hi) as bars with the best baseline as a line."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    names = list(acc)
    vals = [acc[n][0] for n in names]
    err = [[max(acc[n][0] - acc[n][1], 0) for n in names], [max(acc[n][2] - acc[n][0], 0) for n in names]]
    ax.bar(names, vals, yerr=err, capsize=4, color="tab:blue", alpha=0.8)
    for i, v in enumerate(vals):
        ax.text(i, min(v + 0.03, 1.02), f"{v:.3f}", ha="center", fontsize=8)
    if chance is not None:
        ax.axhline(chance, color="tab:red", ls="--", label=f"{chance_label} {chance:.3f}")
        ax.legend(fontsize=8)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("accuracy")
    ax.grid(alpha=0.3, axis="y")
    if title:
        ax.set_title(title)
    return _save(fig, path)


def training_curves_plot(curves: dict[str, tuple[list[int], list[float]]], path: Path | str, title: str = "",
                         metric: str = "entropy_error") -> Path:
    """A held-out probe metric during training (``probe_<metric>`` in ``metrics.jsonl``), one line
    per run: errors in bits on a log axis, accuracy on a linear one."""
    fig, ax = plt.subplots(figsize=(7, 4))
    log = metric != "accuracy"
    for label, (steps, vals) in curves.items():
        ax.plot(steps, [max(v, 1e-6) for v in vals] if log else vals, marker="o", ms=3, label=label)
    ylabel = {"entropy_error": "probe entropy error (bits)", "kl_bayes_model": "probe KL(Bayes || model) (bits)",
              "accuracy": "probe accuracy"}.get(metric, f"probe {metric}")
    _log_axes(ax, "training step", ylabel, title, log=log)
    return _save(fig, path)
