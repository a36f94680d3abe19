"""Plots of the geometric diagnostics (``windtunnel.geometry``), one function per analysis,
named by the analysis' record (:class:`~windtunnel.analysis.Analysis`).

Each takes the analysis' result dict (as written in ``diagnostics.json``), the whole document and
an output folder, and returns the paths it wrote (the :class:`~windtunnel.analysis.Plot` protocol;
these read only their result). Matplotlib runs headless (Agg).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from windtunnel.figures import save_figure  # noqa: E402
from windtunnel.tables import f as _fmt  # noqa: E402


def _arr(x) -> np.ndarray:
    """A float array from a list that may hold None (JSON's NaN)."""
    return np.array([np.nan if v is None else v for v in x], dtype=float)


def key_frame(res: dict, doc: dict, out: Path) -> list[Path]:
    paths = []
    v = res["variants"][res["headline"]]["layers"]
    layers = [r["layer"] for r in v]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    w = 0.27
    x = np.arange(len(layers))
    ax.bar(x - w, [r["mean"] for r in v], w, label="trained")
    ax.bar(x, [r["init_mean"] for r in v], w, label="step 0")
    ax.bar(x + w, [r["random_mean"] for r in v], w, label="random N(0, 0.02)")
    for i, r in enumerate(v):
        ax.scatter([i - w] * len(r["per_head"]), r["per_head"], s=8, c="k", zorder=3)
    ax.set_xticks(x, [f"L{i}" for i in layers])
    ax.set_ylabel("mean |off-diagonal cosine|")
    ax.set_title(f"Key frame ({res['headline']}, {res['tokens']}); dots: heads")
    ax.legend(fontsize=8)
    paths.append(save_figure(fig, out / "key_frame.png"))
    if "layer0_cosines" in res:
        mats = res["layer0_cosines"] + res["layer0_cosines_init"][:1]
        titles = [f"L0H{h}" for h in range(len(res["layer0_cosines"]))] + ["L0H0 at step 0"]
        fig, axes = plt.subplots(1, len(mats), figsize=(2.6 * len(mats), 2.8), squeeze=False)
        for ax, m, t in zip(axes[0], mats, titles):
            im = ax.imshow(np.array(m), vmin=-1, vmax=1, cmap="RdBu_r")
            ax.set_title(t, fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="cosine")
        fig.suptitle("Layer-0 key cosines of the hypothesis tokens", fontsize=10)
        paths.append(save_figure(fig, out / "key_cosines_layer0.png", tight=False))
    return paths


def attention(res: dict, doc: dict, out: Path) -> list[Path]:
    paths = []
    layers = res["layers"]
    x = [r["layer"] for r in layers]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    a1.plot(x, [r["scored"]["bits"] for r in layers], "o-", label="trained")
    a1.plot(x, [r["init_scored"]["bits"] for r in layers], "s--", label="step 0")
    a1.axhline(res["uniform_bits_scored"], color="k", ls=":", label="uniform")
    for r in layers:
        a1.scatter([r["layer"]] * len(r["scored"]["bits_per_head"]), _arr(r["scored"]["bits_per_head"]), s=8, c="k")
    a1.set_xlabel("layer")
    a1.set_ylabel("attention entropy at scored rows (bits)")
    a1.legend(fontsize=8)
    a2.plot(x, _arr([r["scored"]["normalised"] for r in layers]), "o-", label="trained")
    a2.plot(x, _arr([r["init_scored"]["normalised"] for r in layers]), "s--", label="step 0")
    a2.axhline(1.0, color="k", ls=":", label="uniform")
    a2.set_xlabel("layer")
    a2.set_ylabel("entropy / log2(t + 1)")
    a2.set_ylim(0, 1.05)
    a2.legend(fontsize=8)
    a1.set_title("attention entropy per layer (dots: heads)", fontsize=9)
    a2.set_title("normalised by uniform attention's", fontsize=9)
    fig.suptitle("Attention focusing: trained against step 0 and uniform attention", fontsize=10)
    paths.append(save_figure(fig, out / "attention_entropy.png"))

    n = len(layers)
    fig, axes = plt.subplots(1, n, figsize=(2.8 * n, 2.9), squeeze=False)
    for ax, r in zip(axes[0], layers):
        im = ax.imshow(np.array([_arr(row) for row in r["qk_alignment"]]), cmap="viridis", aspect="auto")
        mean = r["qk_alignment_mean"]
        ax.set_title(f"L{r['layer']}: mean {mean:.2f}" if mean is not None else f"L{r['layer']}", fontsize=9)
        ax.set_xlabel("earlier scored position j")
    axes[0][0].set_ylabel("query position i")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="cos(q_i, k_j)")
    paths.append(save_figure(fig, out / "qk_alignment.png", tight=False))

    if "bijection_mass" in res:
        bm = res["bijection_mass"]
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        for r in bm["layers"]:
            curve = np.mean(np.array(r["values_curve_per_head"]), axis=0)
            ax.plot(bm["k"], curve, marker="o", ms=3, label=f"L{r['layer']}")
        ax.plot(bm["k"], bm["uniform"]["values_curve"], "k:", label="uniform")
        ax.set_xlabel("prediction index k")
        ax.set_ylabel("attention mass on earlier value tokens")
        ax.set_title("Mass on used values (eliminated hypotheses), mean over heads")
        ax.legend(fontsize=8)
        paths.append(save_figure(fig, out / "attention_mass_values.png"))
    return paths


def value_manifold(res: dict, doc: dict, out: Path) -> list[Path]:
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, which in zip(axes, ("trained", "init")):
        s = res["scatter"][which]
        sc = ax.scatter(s["pc1"], s["pc2"], c=s["h_bayes"], s=5, cmap="viridis", alpha=0.7)
        h = res["representations"][res["headline"]][which]["standardized"]
        rho = _fmt(h["spearman_pc1"], ".2f")
        ax.set_title(f"{which}: PC1 {_fmt(h['pc1'], '.1%')}, |rho(PC1, H)| {rho}", fontsize=9)
        ax.set_xlabel("PC1")
        ax.set_ylabel("PC2")
    fig.colorbar(sc, ax=axes.tolist(), label="H_Bayes (bits)")
    fig.suptitle(f"Value manifold: PCA of '{res['headline']}' (standardised)", fontsize=10)
    paths.append(save_figure(fig, out / "value_manifold_pca.png", tight=False))

    names = list(res["representations"])
    reps = res["representations"]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(6, 0.7 * len(names)), 5.5), sharex=True)
    x = np.arange(len(names))
    a1.plot(x, _arr([reps[n]["trained"]["standardized"]["pc1"] for n in names]), "o-", label="PC1 trained")
    a1.plot(x, _arr([reps[n]["init"]["standardized"]["pc1"] for n in names]), "s--", label="PC1 step 0")
    a1.plot(x, _arr([reps[n]["gaussian"]["standardized"]["pc1"] for n in names]), "k:", label="PC1 Gaussian")
    a1.set_ylabel("explained variance")
    a1.legend(fontsize=8)
    a2.plot(x, _arr([reps[n]["trained"]["probe"]["r2"] for n in names]), "o-", label="probe R² trained")
    a2.plot(x, _arr([reps[n]["init"]["probe"]["r2"] for n in names]), "s--", label="probe R² step 0")
    a2.plot(x, _arr([reps[n]["trained"]["probe"]["r2_shuffled"] for n in names]), "k:", label="shuffled labels")
    a2.set_ylabel("held-out R² for H_Bayes")
    a2.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
    a2.set_xlabel("representation")
    a2.legend(fontsize=8)
    fig.suptitle("Value manifold per representation: PC1 and the entropy probe", fontsize=10)
    paths.append(save_figure(fig, out / "value_manifold_layers.png"))
    return paths


def ablation(res: dict, doc: dict, out: Path) -> list[Path]:
    rows = sorted(res["heads"] + res["blocks"], key=lambda r: -r["delta_entropy_error"])
    fig, ax = plt.subplots(figsize=(max(6, 0.32 * len(rows)), 4))
    x = np.arange(len(rows))
    d = _arr([r["delta_entropy_error"] for r in rows])
    err = np.abs(np.array([d - _arr([r["delta_lo"] for r in rows]), _arr([r["delta_hi"] for r in rows]) - d]))
    colors = ["C0" if "H" in r["name"].split(".")[0][1:] else "C1" for r in rows]
    ax.bar(x, d, yerr=err, color=colors, capsize=2)
    ax.set_xticks(x, [r["name"] for r in rows], rotation=90, fontsize=7)
    ax.set_xlabel("head or block removed")
    ax.set_ylabel("Δ entropy error (bits)")
    ax.set_title(f"Ablations (baseline {res['baseline']['entropy_error']:.4f} bits; blue: heads, orange: blocks)")
    ax.axhline(0, color="k", lw=0.8)
    return [save_figure(fig, out / "ablation.png")]


def logit_lens(res: dict, doc: dict, out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for key, label, style in (("layers", "trained", "o-"), ("init_layers", "step 0", "s--")):
        rows = res[key]
        ax.plot(range(len(rows)), np.fmax(_arr([r["kl_bayes_model"] for r in rows]), 1e-6), style,
                label=f"KL(Bayes||lens) {label}")
        ax.plot(range(len(rows)), np.fmax(_arr([r["kl_model_bayes"] for r in rows]), 1e-6), style, alpha=0.5,
                label=f"KL(lens||Bayes) {label}")
    for name, b in res["baselines"].items():
        if b["kl_bayes_model"] is not None:
            ax.axhline(max(b["kl_bayes_model"], 1e-6), color="k", ls=":", label=f"{name} KL(Bayes||.)")
    ax.set_xticks(range(len(res["layers"])), [r["name"].replace(".resid_post", "")
                                              for r in res["layers"]], rotation=30, fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("layer read through the final norm and head")
    ax.set_ylabel("KL (bits)")
    ax.set_title("Logit lens: each layer through the final norm and head")
    ax.legend(fontsize=7)
    return [save_figure(fig, out / "logit_lens.png")]


def dynamics(res: dict, doc: dict, out: Path) -> list[Path]:
    s = {k: _arr(v) for k, v in res["series"].items()}
    steps = np.array(res["steps"])
    frame = [k for k in ("attention_js", "key_frame_layer0") if k in s]
    fig, axes = plt.subplots(3 if frame else 2, 1, figsize=(7, 8 if frame else 5.5), sharex=True)
    a2, a3 = axes[-2:]
    if frame:
        a1 = axes[0]
        if "attention_js" in s:
            a1.plot(steps, s["attention_js"], "o-", label="attention JS to final (bits)")
        if "key_frame_layer0" in s:
            a1.plot(steps, s["key_frame_layer0"], "s-", label="layer-0 key |cos|")
        a1.legend(fontsize=8)
        a1.set_ylabel("frame")
    a2.plot(steps, s["pc1"], "o-", label="PC1 (final state)")
    a2.plot(steps, s["spearman_pc1"], "s-", label="|Spearman(PC1, H)|")
    a2.plot(steps, s["probe_r2"], "^-", label="probe R²")
    a2.set_ylabel("manifold")
    a2.legend(fontsize=8)
    a3.plot(steps, np.maximum(s["entropy_error"], 1e-6), "o-", label="entropy error (bits)")
    a3.plot(steps, np.maximum(s["kl_bayes_model"], 1e-6), "s-", label="KL(Bayes||model) (bits)")
    a3.set_yscale("log")
    a3.set_ylabel("calibration")
    a3.legend(fontsize=8)
    for k, st in res["settle_step"].items():
        if st is not None and k in ("attention_js", "entropy_error"):
            for ax in axes:
                ax.axvline(st, color="C0" if k == "attention_js" else "C3", ls=":", lw=1)
    a3.set_xscale("symlog", linthresh=1)
    a3.set_xlim(left=0)
    a3.set_xlabel("training step (dotted: attention settles, error settles)")
    fig.suptitle("Frame-precision dissociation", fontsize=10)
    return [save_figure(fig, out / "dynamics.png")]


def recurrent(res: dict, doc: dict, out: Path) -> list[Path]:
    s = res["scatter"]
    n = 2 if "state" in s else 1
    fig, axes = plt.subplots(1, n, figsize=(5 * n, 4), squeeze=False)
    sc = axes[0][0].scatter(s["pc1"], s["pc2"], c=s["h_bayes"], s=5, cmap="viridis", alpha=0.7)
    fig.colorbar(sc, ax=axes[0][0], label="H_Bayes (bits)")
    t = res["trained"]
    axes[0][0].set_title(f"PC1 {_fmt(t['pca']['pc1'], '.1%')}, probe R² {_fmt(t['probe']['r2'], '.2f')}", fontsize=9)
    if n == 2:
        sc2 = axes[0][1].scatter(s["pc1"], s["pc2"], c=s["state"], s=5, cmap="tab10", alpha=0.7)
        fig.colorbar(sc2, ax=axes[0][1], label="most likely state")
        c = t.get("clusters", {})
        axes[0][1].set_title(f"k-means k={res['k']}: silhouette {_fmt(c.get('silhouette'), '.2f')}, "
                             f"purity {_fmt(c.get('purity'), '.2f')}", fontsize=9)
    for ax in axes[0]:
        ax.set_xlabel("PC1")
        ax.set_ylabel("PC2")
    fig.suptitle("Final-layer states (raw PCA)", fontsize=10)
    return [save_figure(fig, out / "recurrent_pca.png", tight=False)]

