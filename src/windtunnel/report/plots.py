"""Plots that compare runs: entropy error against evaluation length, accuracy, training curves.

The calibration plots of a single run (:func:`calibration_plot`, :func:`length_plot`) live in
:mod:`windtunnel.evaluate.plots` and are re-exported here.
"""

from __future__ import annotations

from pathlib import Path

from windtunnel.evaluate.plots import calibration_plot, length_plot
from windtunnel.figures import log_axes, plt, save_figure

__all__ = ["accuracy_plot", "calibration_plot", "length_comparison_plot", "length_plot", "training_curves_plot"]


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
    log_axes(ax, "evaluation length", "entropy error (bits)", title)
    return save_figure(fig, path)


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
    return save_figure(fig, path)


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
    log_axes(ax, "training step", ylabel, title, log=log)
    return save_figure(fig, path)
