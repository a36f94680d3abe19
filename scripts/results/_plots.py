"""The kinds of figure the results pages draw, each from plain lists and dicts (the data the
renderer writes beside the PNG): learning curves, a metric against the learning rate, score heat
maps, the calibration plot and the score ruler."""

from __future__ import annotations

from typing import Any

import numpy as np
from _figures import color, figure

VERDICT_COLOURS = {"✓": "#1a9850", "~": "#fdae61", "✗": "#d73027"}


def curves(data: dict[str, Any]):
    """``{"x": [...], "series": {label: [y or None]}, "xlabel", "ylabel", "log": bool, "title",
    "hline": {"y": v, "label": text}}``: one line per label (None breaks a line)."""
    fig, ax = figure()
    for label, ys in data["series"].items():
        x = data["xs"][label] if "xs" in data else data["x"]
        pts = [(a, b) for a, b in zip(x, ys) if b is not None]
        ax.plot([a for a, _ in pts], [b for _, b in pts], marker="o", label=label, color=color(label))
    for h in data.get("hlines", []):
        ax.axhline(h["y"], color="k", ls="--", lw=1)
        ax.annotate(h["label"], (ax.get_xlim()[0], h["y"]), xytext=(4, 3), textcoords="offset points", fontsize=7)
    return _finish(fig, ax, data, data["xlabel"])


def against_lr(data: dict[str, Any]):
    """``{"lr": [...], "series": {label: [value or None per lr]}, "ylabel", "log", "title"}``: a
    metric against the learning rate (log x), one line per architecture, the best point ringed."""
    fig, ax = figure()
    for label, ys in data["series"].items():
        pts = [(a, b) for a, b in zip(data["lr"], ys) if b is not None]
        if not pts:
            continue
        xs, vs = zip(*pts)
        ax.plot(xs, vs, marker="o", label=label, color=color(label))
        best = (max if data.get("higher_is_better") else min)(range(len(vs)), key=lambda i: vs[i])
        ax.plot([xs[best]], [vs[best]], "o", ms=9, mfc="none", mec=color(label))
    ax.set_xscale("log")
    return _finish(fig, ax, data, "learning rate")


def _finish(fig, ax, data: dict[str, Any], xlabel: str):
    """The y scale, labels, title and legend every line plot shares."""
    if data.get("log"):
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(data["ylabel"])
    if data.get("title"):
        ax.set_title(data["title"])
    ax.legend(ncol=2 if len(data["series"]) > 4 else 1, frameon=False)
    return fig


def heatmap(data: dict[str, Any]):
    """``{"rows": [...], "cols": [...], "scores": [[score or None]], "verdicts": [[str]], "title"}``:
    the score of every row x column, coloured from worse than the baseline (red, clipped at -1)
    through the baseline (0) to Bayes (1, green); each cell says its verdict and score."""
    rows, cols = data["rows"], data["cols"]
    s = np.array([[np.nan if v is None else v for v in r] for r in data["scores"]], dtype=float)
    fig, ax = figure(1.1 + 0.95 * len(cols), 0.9 + 0.34 * len(rows))
    ax.grid(False)
    im = ax.imshow(np.clip(s, -1, 1), cmap="RdYlGn", vmin=-1, vmax=1, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            if not np.isnan(s[i, j]):
                v = data["verdicts"][i][j] or ""
                ax.text(j, i, f"{v} {s[i, j]:.2f}".strip(), ha="center", va="center", fontsize=7.5,
                        color="white" if s[i, j] < -0.45 else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    for spine in ax.spines.values():
        spine.set_visible(False)
    cb = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, ticks=[-1, 0, 0.5, 0.9, 1])
    cb.ax.set_yticklabels(["≤ −1", "0: baseline", "0.5", "0.9", "1: Bayes"], fontsize=7)
    if data.get("title"):
        ax.set_title(data["title"])
    return fig


def calibration(data: dict[str, Any]):
    """``{"k": [...], "h_bayes": [...], "models": {label: {"h_model": [...], "abs_dh": [...]}}}``:
    the predictive entropy per position against Bayes (left) and the per-position entropy error
    (right, log scale)."""
    fig, (left, right) = figure(8.4, 3.3, ncols=2)
    left.plot(data["k"], data["h_bayes"], "k--", lw=2, label="Bayes (exact)")
    for label, c in data["models"].items():
        left.plot(data["k"], c["h_model"], marker="o", label=label, color=color(label))
        right.plot(data["k"], [max(v, 1e-5) for v in c["abs_dh"]], marker="o", label=label, color=color(label))
    left.set_xlabel("prediction index k")
    left.set_ylabel("predictive entropy (bits)")
    left.legend(frameon=False)
    right.set_yscale("log")
    right.set_xlabel("prediction index k")
    right.set_ylabel("|H_model − H_Bayes| (bits)")
    left.set_title(data.get("title", ""), loc="left")
    return fig


def ruler(data: dict[str, Any]):
    """The score as a ruler: the best baseline at 0, the exact posterior at 1, the partial (0.5) and
    realised (0.9) marks, and measured points (``{"points": [[label, score], ...]}``), labelled
    above and below the axis in turn, from left to right."""
    fig, ax = figure(8.6, 2.4)
    ax.grid(False)
    lo = min(-1.0, min((p[1] for p in data["points"]), default=0) - 0.3)
    ax.axvspan(lo, 0, color=VERDICT_COLOURS["✗"], alpha=0.15)
    ax.axvspan(0, 0.5, color=VERDICT_COLOURS["✗"], alpha=0.05)
    ax.axvspan(0.5, 0.9, color=VERDICT_COLOURS["~"], alpha=0.3)
    ax.axvspan(0.9, 1.0, color=VERDICT_COLOURS["✓"], alpha=0.35)
    ax.axhline(0, color="0.3", lw=1)
    for x in (0, 1):
        ax.axvline(x, color="k", lw=1.2)
    for x in (0.5, 0.9):
        ax.axvline(x, color="k", lw=0.6, ls=":")
    ax.text(0, 1.12, "0: the best baseline", ha="right", fontsize=8, transform=ax.get_xaxis_transform())
    ax.text(1, 1.12, "1: Bayes", ha="left", fontsize=8, transform=ax.get_xaxis_transform())
    ax.text(lo / 2, 0.04, "negative: worse than the baseline", ha="center", fontsize=8, transform=ax.get_xaxis_transform())
    ax.text(0.7, 0.04, "~", ha="center", fontsize=9, transform=ax.get_xaxis_transform())
    ax.text(0.95, 0.04, "✓", ha="center", fontsize=9, transform=ax.get_xaxis_transform())
    for i, (label, score) in enumerate(sorted(data["points"], key=lambda p: p[1])):
        up = i % 2 == 0
        ax.plot([score], [0], "o", color="k", ms=4)
        ax.annotate(f"{label} {score:+.2f}".replace("-", "−"), (score, 0), xytext=(0, 22 if up else -26),
                    textcoords="offset points", ha="center", va="bottom" if up else "top", fontsize=7.5,
                    arrowprops={"arrowstyle": "-", "lw": 0.5})
    ax.set_xlim(lo, 1.25)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    for side in ("left", "top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("score = 1 − KL(model) / KL(best baseline); for accuracy (acc − acc₀) / (1 − acc₀)")
    return fig
