"""Recurrent geometry (Paper I v3, section 6.6): the final-layer states of models with a
recurrent state (``model.has_recurrent_state``: Mamba, LSTM, ...).

At every scored position (HMM: every observation) take the final-normed state and label it by
the task's discrete state (``task.state_labels``: HMM, the most likely hidden state; by default
the argmax of the exact posterior, ties to the lowest index) and by H_Bayes. Report: PCA (PC1,
PC1+PC2, |Spearman r(PC1, H)|), a held-out entropy probe R^2 with its shuffled-label control, and
k-means with k = number of states (HMM's S; by default the answer size): silhouette and purity against the most likely
state, with the purity of the same clusters against permuted labels as null. The same entropy
probe per layer. Nulls: the step-0 model, and for PC1 and silhouette a Gaussian cloud of
matched n and d. (Paper, HMM: Mamba 5 clusters, probe R^2 0.40, PC1 21.9%; LSTM 0.004, 92.3%.)
"""

from __future__ import annotations

import numpy as np

from windtunnel import stats
from windtunnel.analysis import Analysis
from windtunnel.geometry import markdown, plots
from windtunnel.geometry.context import Activations, Context, flat, missing


def applies(ctx: Context) -> str | None:
    return missing(ctx.model, "has_recurrent_state")


def labels(ctx: Context) -> tuple[np.ndarray | None, int | None, str]:
    """State labels (B*P,), k, and what they are (None when the task has none:
    :meth:`~windtunnel.tasks.base.Task.state_labels`)."""
    got = ctx.task.state_labels(ctx.batch)
    if got is None:
        return None, None, "no discrete state labels (task.state_labels() is None): clusters skipped"
    lab, k, what = got
    return lab.reshape(-1).numpy(), int(k), what


def describe(acts: Activations, ctx: Context, lab, k, probe_layers: bool = True) -> dict:
    y = ctx.h_bayes.reshape(-1).numpy()
    groups = ctx.groups.numpy()
    x = flat(acts.states["final"]).numpy()
    pca = stats.pca_summary(x, y, standardize=False)
    out = {"pca": pca, "pca_standardized": stats.pca_summary(x, y, standardize=True),
           "probe": stats.probe_summary(x, y, seed=ctx.seed, groups=groups, positions=ctx.point_positions.numpy())}
    if lab is not None and 2 <= k < len(y):
        out["clusters"] = stats.kmeans_summary(x, k, lab, seed=ctx.seed)
    if probe_layers:
        split = stats.Split(ctx.seed, groups=groups)
        out["probe_per_layer"] = {name: stats.probe_r2(flat(acts.states[name]).numpy(), y, split) for name in acts.layer_names}
    return out


def scatter(acts: Activations, ctx: Context, lab, n_max: int = 3000) -> dict:
    x = flat(acts.states["final"]).numpy()
    _, scores = stats.pca(x, n_scores=2)
    y = ctx.h_bayes.reshape(-1).numpy()
    idx = np.random.default_rng(ctx.seed).permutation(len(y))[:n_max]
    out = {"pc1": scores[idx, 0].tolist(), "pc2": scores[idx, 1].tolist(), "h_bayes": y[idx].tolist()}
    if lab is not None:
        out["state"] = lab[idx].tolist()
    return out


def run(ctx: Context) -> dict:
    lab, k, what = labels(ctx)
    acts, init = ctx.acts("final"), ctx.acts("init")
    out: dict = {"representation": "final (after the final norm)", "labels": what, "k": k,
                 "null_init": ctx.init_source, "trained": describe(acts, ctx, lab, k),
                 "init": describe(init, ctx, lab, k, probe_layers=False)}
    x = flat(acts.states["final"]).numpy()
    g = stats.gaussian_cloud(*x.shape, seed=ctx.seed)
    y = ctx.h_bayes.reshape(-1).numpy()
    out["gaussian"] = {"pca": stats.pca_summary(g, y, standardize=False)}
    if lab is not None and k is not None and 2 <= k < len(y):
        out["gaussian"]["clusters"] = stats.kmeans_summary(g, k, lab, seed=ctx.seed)
    out["scatter"] = scatter(acts, ctx, lab)
    return out


ANALYSIS = Analysis(name='recurrent', title='Recurrent geometry', applies=applies, run=run,
                    markdown=markdown.recurrent, plot=plots.recurrent, needs_activations=True)
