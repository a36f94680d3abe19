"""Plots that compare runs: entropy error against evaluation length, accuracy, training curves.

The calibration plots of a single run (:func:`calibration_plot`, :func:`length_plot`) live in
:mod:`windtunnel.evaluate.plots` and are re-exported here.
"""

from __future__ import annotations

from pathlib import Path

from windtunnel.evaluate.plots import calibration_plot, length_plot
from windtunnel.evaluate.record import METRICS
from windtunnel.figures import line_styles, log_axes, plt, save_figure

__all__ = ["accuracy_plot", "calibration_plot", "length_comparison_plot", "length_plot", "training_curves_plot"]


def length_comparison_plot(per_model: dict[str, list[tuple[int, float, float, float]]], path: Path | str,
                           train_length: int | None = None, title: str = "") -> Path:
    """Entropy error against evaluation length, one line per model (``(length, value, lo, hi)``)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    look = line_styles(list(per_model))
    for label, pts in per_model.items():
        pts = sorted(pts)
        x = [p[0] for p in pts]
        y = [max(p[1], 1e-6) for p in pts]
        err = [[max(p[1] - p[2], 0) for p in pts], [max(p[3] - p[1], 0) for p in pts]]
        ax.errorbar(x, y, yerr=err, capsize=3, label=label, **look[label])
    if train_length is not None:
        ax.axvline(train_length, color="grey", ls=":", label=f"training length {train_length}")
    log_axes(ax, "evaluation length (positions)", METRICS["entropy_error"].heading,
             title or "Entropy error against the evaluation length")
    return save_figure(fig, path)


def accuracy_plot(acc: dict[str, tuple[float, float, float]], path: Path | str, chance: float | None = None,
                  chance_label: str = "best baseline", title: str = "") -> Path:
    """Accuracy per model (value, lo, hi) as bars with the best baseline as a line."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    names = list(acc)
    vals = [acc[n][0] for n in names]
    err = [[max(acc[n][0] - acc[n][1], 0) for n in names], [max(acc[n][2] - acc[n][0], 0) for n in names]]
    spec = METRICS["accuracy"]
    ax.bar(names, vals, yerr=err, capsize=4, color="tab:blue", alpha=0.8)
    for i, v in enumerate(vals):
        ax.text(i, min(v + 0.03, 1.02), f"{v:.{spec.digits}f}", ha="center", fontsize=8)
    if chance is not None:
        ax.axhline(chance, color="tab:red", ls="--", label=f"{chance_label} {chance:.{spec.digits}f}")
        ax.legend(fontsize=8)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel(spec.heading)
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(title or "Accuracy at the query positions")
    return save_figure(fig, path)


def _probe_axis(metric: str, unknown: str) -> tuple[bool, str]:
    """(log scale, axis label) of a held-out probe metric (:data:`~windtunnel.evaluate.record.METRICS`):
    a log axis for the errors (lower is better), a linear one for accuracy; ``unknown`` labels a
    metric METRICS does not know (on a log axis)."""
    spec = METRICS.get(metric)
    return (True, unknown) if spec is None else (spec.lower_is_better, f"probe {spec.heading}")


def training_curves_plot(curves: dict[str, tuple[list[int], list[float]]], path: Path | str, title: str = "",
                         metric: str = "entropy_error") -> Path:
    """A held-out probe metric during training (``probe_<metric>`` in ``metrics.jsonl``), one line
    per run: errors in bits on a log axis, accuracy on a linear one."""
    fig, ax = plt.subplots(figsize=(7, 4))
    log, ylabel = _probe_axis(metric, f"probe {metric}")
    look = line_styles(list(curves))
    for label, (steps, vals) in curves.items():
        ax.plot(steps, [max(v, 1e-6) for v in vals] if log else vals, ms=3, label=label, **look[label])
    log_axes(ax, "training step", ylabel, title or f"{ylabel} during training", log=log)
    return save_figure(fig, path)


def ladder_heatmap(scores: dict[str, dict[str, float | None]], path: Path | str, title: str = "",
                   realised: float = 0.9, unneeded: dict[str, set[str]] | None = None) -> Path:
    """Primitive scores as a heat map: a row per architecture, a column per rung (``None``: not
    run; a cell of ``unneeded``, a rung the ladder search did not need, reads "not needed");
    cells at or above ``realised`` are outlined."""
    import numpy as np

    rows = list(scores)
    cols = list(dict.fromkeys(c for r in rows for c in scores[r]))
    grid = np.array([[np.nan if scores[r].get(c) is None else scores[r][c] for c in cols] for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(max(4.8, 1.0 + 1.1 * len(cols)), max(2.4, 0.9 + 0.45 * len(rows))))
    im = ax.imshow(np.clip(grid, -1, 1), cmap="RdYlGn", vmin=-1, vmax=1, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = grid[i, j]
            skipped = np.isnan(v) and cols[j] in (unneeded or {}).get(rows[i], set())
            ax.text(j, i, "not\nneeded" if skipped else "-" if np.isnan(v) else f"{v:.2f}", ha="center", va="center",
                    fontsize=6 if skipped else 8, color="grey" if skipped else "black")
            if not np.isnan(v) and v >= realised:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2, ec="black"))
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    bar = fig.colorbar(im, ax=ax, shrink=0.8)
    bar.set_label("score\n(0: best baseline, 1: Bayes)", fontsize=7)
    bar.ax.tick_params(labelsize=7)
    ax.set_xlabel("rung", fontsize=8)
    ax.set_ylabel("architecture", fontsize=8)
    ax.set_title(title or "Primitive score per rung (outlined: realised)", fontsize=9)
    return save_figure(fig, path)


def tune_plot(per_model: dict[str, dict[int, list[tuple[float, float]]]], path: Path | str, metric: str,
              title: str = "") -> Path:
    """A tuning search: the probe ``metric`` against the learning rate, a colour per architecture
    and a line per rung (``{model: {step: [(lr, value), ...]}}``; the last rung solid, earlier ones
    dotted and dashed, so the candidates each rung dropped stay visible)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    log, ylabel = _probe_axis(metric, metric)
    styles = [":", "--", "-."]
    look = line_styles(list(per_model))
    for label, rungs in per_model.items():
        colour, marker = look[label]["color"], look[label]["marker"]
        steps = sorted(rungs)
        for j, step in enumerate(steps):
            pts = sorted(rungs[step])
            style = "-" if step == steps[-1] else styles[j % len(styles)]
            ax.plot([p[0] for p in pts], [max(p[1], 1e-6) if log else p[1] for p in pts], style, marker=marker, ms=4,
                    color=colour, label=f"{label} @ step {step}")
    ax.set_xscale("log")
    log_axes(ax, "learning rate", ylabel, title or "The learning-rate search", log=log)
    return save_figure(fig, path)


def realise_plot(curves: dict[str, tuple[list[int], list[float]]], marks: dict[str, int | None], path: Path | str,
                 threshold: float = 0.9, budget: int | None = None, title: str = "") -> Path:
    """How fast each architecture learns a primitive: its probe score (the fraction of the best
    baseline's gap to Bayes closed on the held-out probe) over training, the realised threshold
    dashed, and the step each realised it (``marks``: a dot; None: not realised)."""
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    look = line_styles(list(curves))
    for label, (steps, vals) in curves.items():
        (line,) = ax.plot(steps, [max(v, -1.0) for v in vals], ms=3, label=label, **look[label])
        step = marks.get(label)
        if step is not None and step in steps:
            ax.plot([step], [max(vals[steps.index(step)], -1.0)], "o", ms=9, mfc="none", color=line.get_color())
    ax.axhline(threshold, ls="--", lw=1, color="grey")
    if budget:
        ax.set_xlim(0, budget * 1.02)
    ax.set_ylim(min(-0.1, ax.get_ylim()[0]), 1.05)
    ax.set_xlabel("training step")
    ax.set_ylabel("probe score\n(0: best baseline, 1: Bayes)")
    ax.set_title(title or "Probe score over training", fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, path)
