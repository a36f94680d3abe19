"""Plots of ``llm.json`` (headless matplotlib), one PNG per analysis, named by the analysis'
record in :mod:`windtunnel.llm.analyses`: each ``(result, doc, out) -> [path]`` (the
:class:`~windtunnel.analysis.Plot` protocol; ``doc`` for the model's name and, for domain
restriction, the value manifold's result)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from windtunnel.figures import save_figure  # noqa: E402


def _a(x) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in x], dtype=float)


def _title(doc) -> str:
    return doc["model"]["name"].rstrip("/").split("/")[-1]


def value_manifold(r: dict, doc: dict, out: Path) -> list[Path]:
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    sc = r["scatter"]
    if sc["pc2"]:
        s = ax[0].scatter(sc["pc1"], sc["pc2"], c=_a(sc["entropy_bits"]), cmap="viridis", s=18)
        fig.colorbar(s, ax=ax[0], label="next-token entropy (bits)")
    ax[0].set(xlabel="PC1", ylabel="PC2", title=f"final-layer values ({r['primary_pca']}), n={len(sc['pc1'])}")
    layer = r["layers"][str(r["final_layer"])]
    for space, style in (("standardized", "o-"), ("raw", "s--")):
        ev = _a(layer[space]["explained_variance_ratio"])
        ax[1].plot(np.arange(1, len(ev) + 1), ev, style, label=space)
    ax[1].axhline(layer["standardized"]["null"]["gaussian"]["pc1_mean"], color="grey", ls=":", label="Gaussian null PC1")
    ax[1].set(xlabel="component", ylabel="explained variance ratio", title="scree")
    ax[1].legend()
    fig.suptitle(_title(doc))
    return [save_figure(fig, out / "value_manifold.png")]


def key_orthogonality(r: dict, doc: dict, out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(7, 4))
    L = np.array([x["layer"] for x in r["layers"]])
    ax.plot(L, _a([x["mean"] for x in r["layers"]]), "o-", label="trained (mean over KV heads)")
    ax.fill_between(L, _a([x["p10"] for x in r["layers"]]), _a([x["p90"] for x in r["layers"]]), alpha=0.25,
                    label="heads p10-p90")
    g = r["null"]["gaussian_empirical"]
    ax.axhspan(g["layer_q05"], g["layer_q95"], color="grey", alpha=0.3, label="Gaussian null q05-q95")
    if "init_from_config" in r["null"]:
        ax.plot(L, _a(r["null"]["init_from_config"]["per_layer"]), "k:", label="family initialiser")
    if "init_revision" in r["null"]:
        ax.plot(L, _a(r["null"]["init_revision"]["per_layer"]), "r--", label=f"revision {r['null']['init_revision']['revision']}")
    ax.axhline(r["summary"]["threshold"], color="C3", lw=0.8, label="criterion")
    ax.set(xlabel="layer", ylabel="mean off-diagonal |cos| of W_K columns", title=f"key orthogonality: {_title(doc)}")
    ax.legend(fontsize=7)
    return [save_figure(fig, out / "key_orthogonality.png")]


def attention_focusing(r: dict, doc: dict, out: Path) -> list[Path]:
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    L = np.array([x["layer"] for x in r["layers"]])
    for a, key, label in ((ax[0], "entropy", "entropy (bits)"), (ax[1], "normalised", "entropy / log2(#keys)"),
                          (ax[2], "sink_mass", "mass on first token")):
        name = "entropy_bits" if key == "entropy" else key
        m = _a([x[name] for x in r["layers"]])
        lo = _a([x[f"{key}_ci"][0] for x in r["layers"]])
        hi = _a([x[f"{key}_ci"][1] for x in r["layers"]])
        a.plot(L, m, "o-")
        a.fill_between(L, lo, hi, alpha=0.3)
        a.set(xlabel="layer", ylabel=label)
    ax[0].axhline(r["uniform_bits_mean"], color="grey", ls=":", label="uniform")
    ax[0].legend()
    f = r["focusing"]
    fig.suptitle(f"{_title(doc)}: focusing {100 * (f['relative_drop'] or 0):.1f}% ({r['positions']} position)")
    return [save_figure(fig, out / "attention_focusing.png")]


def domain_restriction(r: dict, doc: dict, out: Path) -> list[Path]:
    mixed = doc["results"]["value_manifold"] if r["mixed"].get("same_as") else r["mixed"]
    layer = str(r["final_layer"])
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.8))
    for a, space in zip(ax, ("standardized", "raw")):
        vals, errs, labels = [], [], []
        for name, res in (("mixed", mixed), ("math", r["math"])):
            x = res["layers"][layer][space]
            for stat in ("pc1", "pc1_pc2"):
                v = x[stat] or 0.0
                lo, hi = _a(x[f"{stat}_ci"])
                vals.append(v)
                errs.append([max(v - lo, 0), max(hi - v, 0)])
                labels.append(f"{name}\n{stat.replace('_', '+').upper()}")
        a.bar(range(len(vals)), vals, yerr=np.array(errs).T, color=["C0", "C0", "C1", "C1"], capsize=3)
        a.axhline(x["null"]["gaussian"]["pc1_pc2_mean"], color="grey", ls=":", label="Gaussian null PC1+PC2")
        a.set_xticks(range(len(vals)), labels, fontsize=7)
        a.set(ylim=(0, 1), title=space)
        a.legend(fontsize=7)
    fig.suptitle(f"{_title(doc)}: domain restriction (layer {layer})")
    return [save_figure(fig, out / "domain_restriction.png")]


def sula(r: dict, doc: dict, out: Path) -> list[Path]:
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ks = [int(k) for k in r["calibration"]["per_k"]]
    pk = r["calibration"]["per_k"]
    ax[0].plot(ks, [pk[str(k)]["mean_h_bayes"] for k in ks], "k--o", label="Bayes")
    ax[0].plot(ks, [pk[str(k)]["mean_h_model"] for k in ks], "o-", label="model")
    pp = r["per_prompt"]
    ax[0].scatter(np.array(pp["k"]) + np.random.default_rng(0).uniform(-0.15, 0.15, len(pp["k"])), _a(pp["h_model"]),
                  s=6, alpha=0.4)
    ax[0].set(xlabel="k", ylabel="entropy (bits)", title=f"calibration: MAE {r['calibration']['mae']:.3f} bits")
    ax[0].legend()
    tr = r["trajectory"]["per_k"]
    m = _a([tr[str(k)]["mean"] for k in ks])
    ax[1].errorbar(ks, m, yerr=[m - _a([tr[str(k)]["ci"][0] for k in ks]), _a([tr[str(k)]["ci"][1] for k in ks]) - m],
                   fmt="o-", capsize=3)
    ax[1].set(xlabel="k", ylabel=f"PC1 ({r['alignment']['pca']})",
              title=f"PC1 trajectory, |r(PC1,H_Bayes)|={abs(r['alignment']['pearson_pc1_h_bayes'] or 0):.2f}")
    for name, c in r.get("controls", {}).items():
        cpk = c["calibration"]["per_k"]
        ax[2].plot(ks, [cpk[str(k)]["mean_h_model"] for k in ks], "o-", label=name)
    ax[2].set(xlabel="k", ylabel="mean H_model (bits)", title="controls")
    if r.get("controls"):
        ax[2].legend(fontsize=7)
    fig.suptitle(f"{_title(doc)}: SULA, labels {r['labels']}")
    return [save_figure(fig, out / "sula.png")]


def interventions(r: dict, doc: dict, out: Path) -> list[Path]:
    fig, ax = plt.subplots(1, 2, figsize=(13, 4))
    sets = [tuple(s) for s in r["layer_sets"]]
    conds = list(dict.fromkeys(x["condition"] for x in r["runs"]))
    w = 0.8 / max(len(sets), 1)
    for j, s in enumerate(sets):
        runs = {x["condition"]: x for x in r["runs"] if tuple(x["layers"]) == s}
        ax[0].bar(np.arange(len(conds)) + j * w, [runs[c]["delta_mae"] or 0 for c in conds], w, label=str(list(s)))
        ax[1].bar(np.arange(len(conds)) + j * w, [runs[c]["axis_corr_downstream_mean"] or 0 for c in conds], w,
                  label=str(list(s)))
    for a in ax:
        a.set_xticks(np.arange(len(conds)) + 0.4 - w / 2, conds, rotation=35, ha="right", fontsize=7)
        a.axhline(0, color="k", lw=0.5)
        a.legend(fontsize=7, title="layers")
    ax[0].set(ylabel="delta MAE (bits)", title="SULA calibration change")
    ax[1].set(ylabel="corr(v.u, H_model)", title="axis-entropy corr downstream of the cut")
    fig.suptitle(f"{_title(doc)}: entropy-axis interventions ({r['axis']['space']} axis)")
    return [save_figure(fig, out / "interventions.png")]

