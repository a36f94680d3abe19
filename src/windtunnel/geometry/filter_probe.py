"""Filter probe: does the model's state carry the exact filter mean of a state-space task?

Applies to tasks whose batches carry a ``filter_mean`` latent (B, P, n): the exact filtered mean
x̂ after each observation, one row per scored position, such that the scored position j (0-based)
has read j observations (kalman: the scored position of step k >= 2 is the token y_{k-1}, and
``filter_mean[:, k-2]`` = x̂_{k-1|k-1}). Every scored position j >= 1 is one point, labelled by
``filter_mean[:, j-1]``; position 0 has read no observation and is left out.

For every representation (``embed``, every layer's ``blocks.{i}.resid_post`` and ``final``): a
linear ridge probe to x̂ in R^n (closed form; features standardised with the training split's
statistics; penalty 1e-3 per training point, as :func:`windtunnel.stats.probe_r2`), fitted on 80%
of the sequences and scored on the other 20% (split by sequence, seeded): held-out R² pooled over
the n coordinates (1 - sum of squared errors / total sum of squares, over all coordinates) and per
coordinate. The same probe to the scalar predictive mean C A x̂ is reported beside it.

Nulls: the same probes on the step-0 model, and the probe to shuffled labels (rows of x̂ permuted,
seeded). How to read the predictive-mean probe and the embedding row: docs/geometry.md, "Choices
to know about".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from windtunnel import stats
from windtunnel.analysis import Analysis
from windtunnel.figures import plt, save_figure
from windtunnel.geometry.context import Activations, Context
from windtunnel.tables import f, table

HEADLINE = "final"
ALPHA = 1e-3


def applies(ctx: Context) -> str | None:
    fm = ctx.batch.latent.get("filter_mean")
    if fm is None:
        return (f"task '{ctx.config.task}' has no filter_mean latent (its batches carry no exact filter mean; "
                "linear-Gaussian state-space tasks such as kalman do)")
    if ctx.batch.positions.numel() < 2 or fm.shape[1] < ctx.batch.positions.numel():
        return "fewer than two scored positions: no scored position has read an observation"
    return None


def ridge_r2(x: np.ndarray, y: np.ndarray, seed: int, groups: np.ndarray, shuffle: bool = False,
             alpha: float = ALPHA) -> tuple[float, list[float]]:
    """Held-out R² of a ridge probe from ``x`` (N, d) to ``y`` (N, m): pooled over the m columns
    and per column (split by ``groups`` as :func:`windtunnel.stats.split_indices`)."""
    if shuffle:
        y = y[np.random.default_rng(seed + 1).permutation(len(y))]
    tr, te = stats.split_indices(len(y), 0.2, seed, groups)
    mean, std = x[tr].mean(0), x[tr].std(0)
    xtr, xte = stats.standardise(x[tr], mean, std), stats.standardise(x[te], mean, std)
    ym = y[tr].mean(0)
    w = np.linalg.solve(xtr.T @ xtr + alpha * len(tr) * np.eye(x.shape[1]), xtr.T @ (y[tr] - ym))
    err = ((y[te] - (xte @ w + ym)) ** 2).sum(0)
    tot = ((y[te] - y[te].mean(0)) ** 2).sum(0)
    per = [float(1 - e / t) if t > 0 else float("nan") for e, t in zip(err, tot)]
    return (float(1 - err.sum() / tot.sum()) if tot.sum() > 0 else float("nan")), per


def points(acts: Activations) -> dict[str, np.ndarray]:
    """Representation name -> (B * (P - 1), d) states at the scored positions j >= 1."""
    return {name: v[:, 1:].reshape(-1, v.shape[-1]).double().numpy() for name, v in acts.states.items()}


def run(ctx: Context) -> dict:
    B, P = ctx.batch.entropy.shape
    fm = ctx.batch.latent["filter_mean"][:, : P - 1].double()
    n = int(fm.shape[-1])
    y = fm.reshape(-1, n).cpu().numpy()
    pred = ctx.batch.mean[:, 1:].reshape(-1, 1).double().cpu().numpy() if ctx.batch.mean is not None else None
    groups = np.repeat(np.arange(B), P - 1)
    reps, reps0 = points(ctx.acts("final")), points(ctx.acts("init"))
    layers = []
    for name, x in reps.items():
        r2, per = ridge_r2(x, y, ctx.seed, groups)
        r2_0, per_0 = ridge_r2(reps0[name], y, ctx.seed, groups)
        row = {"name": name, "r2": r2, "r2_per_dim": per, "r2_shuffled": ridge_r2(x, y, ctx.seed, groups, True)[0],
               "init_r2": r2_0, "init_r2_per_dim": per_0}
        if pred is not None:
            row["r2_predictive_mean"] = ridge_r2(x, pred, ctx.seed, groups)[0]
            row["init_r2_predictive_mean"] = ridge_r2(reps0[name], pred, ctx.seed, groups)[0]
        layers.append(row)
    finite = [r for r in layers if r["r2"] == r["r2"]]
    best = max(finite, key=lambda r: r["r2"]) if finite else layers[-1]
    head = next(r for r in layers if r["name"] == HEADLINE) if HEADLINE in reps else layers[-1]
    return {"label": f"exact filter mean x̂ (n = {n}) after the observations read", "n": n,
            "n_points": int(len(y)), "n_sequences": int(B), "split": "80/20 by sequence, seeded",
            "ridge_alpha_per_point": ALPHA, "null_init": ctx.init_source, "headline": head["name"],
            "layers": layers,
            "best": {"name": best["name"], "r2": best["r2"], "init_r2": best["init_r2"]},
            "final": {"r2": head["r2"], "init_r2": head["init_r2"], "r2_shuffled": head["r2_shuffled"],
                      "gain_over_init": head["r2"] - head["init_r2"]}}


def markdown(r: dict, doc: dict) -> list[str]:
    b, h = r["best"], r["final"]
    out = [f"Ridge probe from each representation to the {r['label']}; {r['n_points']} points (every scored "
           f"position that has read an observation), held-out R² pooled over the coordinates, split "
           f"{r['split']}. Nulls: step 0 ({r['null_init']}) and shuffled labels. `{r['headline']}`: R² "
           f"{f(h['r2'])} (step 0 {f(h['init_r2'])}, shuffled {f(h['r2_shuffled'])}); best `{b['name']}` "
           f"{f(b['r2'])}.", ""]
    rows = [[x["name"], f(x["r2"]), f(x["init_r2"]), f(x["r2_shuffled"]),
             " ".join(f(v, ".2f") for v in x["r2_per_dim"]),
             f(x.get("r2_predictive_mean")), f(x.get("init_r2_predictive_mean"))] for x in r["layers"]]
    return out + table(["representation", "R² x̂", "R² x̂ step 0", "shuffled R²", "R² per coordinate",
                        "R² predictive mean", "step 0"], rows)


def plot(r: dict, doc: dict, out: Path) -> list[Path]:
    names = [x["name"] for x in r["layers"]]
    xs = np.arange(len(names))
    def val(key: str) -> np.ndarray:
        return np.array([np.nan if x.get(key) is None else x[key] for x in r["layers"]], dtype=float)

    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(names) + 2), 3.8))
    ax.plot(xs, val("r2"), "o-", label="x̂, trained")
    ax.plot(xs, val("init_r2"), "s--", label="x̂, step 0")
    ax.plot(xs, val("r2_shuffled"), ":", color="k", label="x̂, shuffled labels")
    if any(x.get("r2_predictive_mean") is not None for x in r["layers"]):
        ax.plot(xs, val("r2_predictive_mean"), "^-", alpha=0.6, label="predictive mean, trained")
    ax.set_xticks(xs, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("held-out R²")
    ax.set_ylim(min(-0.05, float(np.nanmin(np.r_[val("r2"), val("init_r2"), 0.0]))), 1.02)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_title(f"Filter probe: linear read-out of the exact filter mean (n = {r['n']})", fontsize=10)
    ax.legend(fontsize=8)
    return [save_figure(fig, out / "filter_probe.png")]


ANALYSIS = Analysis(name="filter_probe", title="Filter probe", applies=applies, run=run, markdown=markdown,
                    plot=plot, needs_activations=True)
