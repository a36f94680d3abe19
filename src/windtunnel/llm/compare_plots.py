"""The figures of a comparison of language models (headless matplotlib), from the per-model
curves (:func:`~windtunnel.llm.headline.curves`) and the summary's rows; one PNG per figure, drawn
only when some model has its data. Layers are drawn on relative depth, layer / (L - 1), so that
models of different depths overlay; MHA models solid, GQA/SW dashed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from windtunnel.figures import MARKERS, plt, save_figure

#: headline metrics drawn against the parameter count when a family holds several sizes
SCALING_METRICS = {"mixed_pc1_pc2": "mixed PC1+PC2", "math_pc1_pc2": "math PC1+PC2", "key_orth_mean": "key |cos| mean",
                   "focusing": "focusing (relative drop)", "monotone_fraction": "monotone steps",
                   "sula_spearman_pc1_h_bayes": "SULA Spearman(PC1, H_Bayes)", "sula_mae": "SULA MAE (bits)"}


def _a(x) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in x], dtype=float)


def _depth(layers, n_layers: int) -> np.ndarray:
    return np.asarray(layers, dtype=float) / max(1, n_layers - 1)


def _styles(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A colour and marker per model, solid for MHA and dashed for GQA/SW."""
    return {r["model"]: {"color": f"C{i % 10}", "marker": MARKERS[i % len(MARKERS)],
                         "ls": "-" if r["group"] == "MHA" else "--"} for i, r in enumerate(rows)}


def pca_by_layer(curves: dict, styles: dict, out: Path) -> Path | None:
    if not any("mixed" in c for c in curves.values()):
        return None
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for name, c in curves.items():
        for which, marker in (("mixed", "o"), ("math", "s")):
            if which not in c:
                continue
            x = _depth(c[which]["layers"], c["n_layers"])
            for a, stat in zip(ax, ("pc1", "pc1_pc2")):
                a.plot(x, _a(c[which][stat]), marker=marker, ms=3, color=styles[name]["color"],
                       ls=styles[name]["ls"] if which == "mixed" else ":", label=f"{name} ({which})")
    ax[0].set(xlabel="relative depth", ylabel="explained variance share", title="PC1")
    ax[1].set(xlabel="relative depth", title="PC1+PC2")
    ax[1].legend(fontsize=6, ncol=1, loc="best")
    fig.suptitle("value manifold by layer: mixed (solid/dashed) vs mathematics-only (dotted)")
    return save_figure(fig, out / "pca_by_layer.png")


def keys_by_layer(curves: dict, styles: dict, out: Path) -> Path | None:
    if not any("keys" in c for c in curves.values()):
        return None
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for name, c in curves.items():
        if "keys" not in c:
            continue
        k, st = c["keys"], styles[name]
        x = _depth(range(len(k["mean"])), c["n_layers"])
        ax.plot(x, _a(k["mean"]), ms=3, label=name, **st)
        ax.fill_between(x, k["null_q05"], k["null_q95"], color=st["color"], alpha=0.12)
        if k.get("init"):
            ax.plot(x, _a(k["init"]), color=st["color"], ls=":", lw=1)
    ax.set(xlabel="relative depth", ylabel="mean off-diagonal |cos| of W_K columns",
           title="key orthogonality: trained (markers), at initialisation (dotted), Gaussian null q05-q95 (band)")
    ax.legend(fontsize=7)
    return save_figure(fig, out / "key_orthogonality.png")


def attention_by_layer(curves: dict, styles: dict, out: Path) -> Path | None:
    if not any("attention" in c for c in curves.values()):
        return None
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.2))
    for name, c in curves.items():
        if "attention" not in c:
            continue
        at, st = c["attention"], styles[name]
        x = _depth(range(len(at["bits"])), c["n_layers"])
        ax[0].plot(x, _a(at["bits"]), ms=3, label=name, **st)
        ax[0].fill_between(x, _a(at["lo"]), _a(at["hi"]), color=st["color"], alpha=0.15)
        ax[1].plot(x, _a(at["normalised"]), ms=3, label=name, **st)
    ax[0].set(xlabel="relative depth", ylabel="attention entropy at the final query (bits)", title="entropy (95% CI)")
    ax[1].set(xlabel="relative depth", ylabel="entropy / log2(#attendable keys)", title="normalised")
    ax[1].legend(fontsize=7)
    fig.suptitle("attention focusing by layer (solid MHA, dashed GQA/SW)")
    return save_figure(fig, out / "attention_entropy.png")


def _forest(ax, rows, key: str, title: str, styles) -> None:
    rows = [r for r in rows if r.get(key) is not None]
    y = np.arange(len(rows))
    for i, r in enumerate(rows):
        lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
        v = r[key]
        err = None if lo is None else [[max(v - lo, 0)], [max(hi - v, 0)]]
        ax.errorbar([v], [i], xerr=err, fmt="o" if r["group"] == "MHA" else "s", color=styles[r["model"]]["color"],
                    capsize=3)
    ax.set_yticks(y, [f"{r['model']} ({r['group']})" for r in rows], fontsize=7)
    ax.axvline(0, color="k", lw=0.5)
    ax.set(title=title)


def focusing(rows: list[dict], styles: dict, out: Path) -> Path | None:
    rows = [dict(r, monotone_fraction_lo=r.get("monotone_lo"), monotone_fraction_hi=r.get("monotone_hi"))
            for r in rows if r.get("focusing") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(1, 3, figsize=(14, 1.2 + 0.45 * len(rows)), sharey=True)
    _forest(ax[0], rows, "focusing", "relative entropy drop (paper criterion 0.30)", styles)
    ax[0].axvline(0.30, color="C3", lw=0.8, ls=":")
    _forest(ax[1], rows, "monotone_fraction", "fraction of monotone steps", styles)
    _forest(ax[2], rows, "focusing_slope", "slope (bits per unit depth)", styles)
    fig.suptitle("attention focusing with 95% bootstrap intervals over prompts (circles MHA, squares GQA/SW)")
    return save_figure(fig, out / "focusing.png")


def _paired_bars(ax, rows, keys: tuple[str, str], labels: tuple[str, str], title: str, ylabel: str) -> None:
    x = np.arange(len(rows))
    for j, (k, lab) in enumerate(zip(keys, labels)):
        ax.bar(x + (j - 0.5) * 0.38, _a([r.get(k) for r in rows]), 0.38, label=lab)
    ax.set_xticks(x, [r["model"] for r in rows], rotation=30, ha="right", fontsize=7)
    ax.axhline(0, color="k", lw=0.5)
    ax.set(title=title, ylabel=ylabel)
    ax.legend(fontsize=7)


def sula(rows: list[dict], out: Path) -> Path | None:
    rows = [r for r in rows if r.get("sula_mae") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.2))
    ax[0].bar(range(len(rows)), np.abs(_a([r["sula_spearman_pc1_h_bayes"] for r in rows])), color="C0")
    ax[0].set_xticks(range(len(rows)), [r["model"] for r in rows], rotation=30, ha="right", fontsize=7)
    ax[0].set(ylabel="|Spearman(PC1, H_Bayes)|", title="SULA alignment (shared basis)", ylim=(0, 1))
    _paired_bars(ax[1], rows, ("sula_mae", "sula_constant_mae"), ("model", "best constant predictor (null)"),
                 "SULA calibration", "MAE |H_model - H_Bayes| (bits)")
    fig.suptitle("SULA: each model's alignment with the Bayesian entropy and its calibration")
    return save_figure(fig, out / "sula.png")


def interventions(rows: list[dict], out: Path) -> Path | None:
    rows = [r for r in rows if r.get("iv_true_dmae") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.2))
    _paired_bars(ax[0], rows, ("iv_true_dgeometry", "iv_random_dgeometry"), ("entropy axis cut", "random axis cut"),
                 "geometry: change of the downstream axis-entropy corr", "Δ corr(v.u, H_model)")
    _paired_bars(ax[1], rows, ("iv_true_dmae", "iv_random_dmae"), ("entropy axis cut", "random axis cut"),
                 "calibration: change of SULA MAE", "Δ MAE (bits)")
    fig.suptitle("interventions: the entropy axis cut against a random axis cut")
    return save_figure(fig, out / "interventions.png")


def scaling(rows: list[dict], families: dict[str, list[str]], out: Path) -> Path | None:
    """Each headline metric against the parameter count, a line per family with several sizes."""
    if not families:
        return None
    by_name = {r["model"]: r for r in rows}
    metrics = [k for k in SCALING_METRICS if any(by_name[m].get(k) is not None for v in families.values() for m in v)]
    if not metrics:
        return None
    cols = min(4, len(metrics))
    nrows = -(-len(metrics) // cols)
    fig, ax = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.2 * nrows), squeeze=False)
    for a, k in zip(ax.flat, metrics):
        for fam, names in families.items():
            a.plot([by_name[m]["n_parameters"] for m in names], _a([by_name[m].get(k) for m in names]), "o-", label=fam)
        a.set_xscale("log")
        a.set(xlabel="parameters", title=SCALING_METRICS[k])
    for a in list(ax.flat)[len(metrics):]:
        a.axis("off")
    ax.flat[0].legend(fontsize=7)
    fig.suptitle("scaling within a family")
    return save_figure(fig, out / "scaling.png")


def plot_comparison(curves: dict[str, dict], summary: dict[str, Any], out: Path) -> list[Path]:
    """Every figure of the comparison that has data; returns their paths."""
    rows = [r for r in summary["rows"] if r["status"] == "finished"]
    styles = _styles(rows)
    made = [pca_by_layer(curves, styles, out), keys_by_layer(curves, styles, out), attention_by_layer(curves, styles, out),
            focusing(rows, styles, out), sula(rows, out), interventions(rows, out),
            scaling(rows, summary["scaling"], out)]
    return [p for p in made if p is not None]
