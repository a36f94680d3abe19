"""Value manifold (Paper I section 6.3): PCA of representations at the scored positions,
labelled by the exact posterior entropy H_Bayes.

For every representation (the final-normed state ``final``, which is the headline; the
embedding and every layer's residual/hidden state; for transformers what each layer's
attention writes into the residual stream) and for standardised and raw coordinates: PC1 and
PC1+PC2 explained variance, dimensions for 90% and 95% variance, participation ratio,
Spearman r(PC1, H_Bayes) (sign-flipped to be >= 0), and a held-out ridge probe R^2 for H_Bayes
(80/20 split by sequence, seeded) with its shuffled-label control and the position-only R^2
(H_Bayes predicted by its mean at each position). In the bijection H_Bayes is a function of the
position alone, so the position-only R^2 is 1 and any state that encodes the position (all of
them, through the position embedding) has a probe R^2 near 1, even at step 0: there the PCA
numbers and Spearman r(PC1, H) against the step-0 null carry the claim, not the probe. In the
HMM, H_Bayes varies within a position and the probe must beat the position-only R^2.

Nulls: the same numbers on the step-0 model, and for PCA an isotropic Gaussian cloud of the
same n and d passed through the same standardisation.
"""

from __future__ import annotations

import numpy as np

from windtunnel import stats
from windtunnel.analysis import Analysis
from windtunnel.geometry import markdown, plots
from windtunnel.geometry.context import Activations, Context, flat

HEADLINE = "final"


def applies(ctx: Context) -> str | None:
    return None


def representations(acts: Activations) -> dict[str, np.ndarray]:
    """Name -> (B*P, d) points: states in depth order, then ``attn_out.{i}``."""
    reps = {name: flat(v).numpy() for name, v in acts.states.items()}
    reps.update({f"attn_out.{i}": flat(v).numpy() for i, v in sorted(acts.attn_out.items())})
    return reps


def describe(x: np.ndarray, y: np.ndarray, ctx: Context) -> dict:
    return {"standardized": stats.pca_summary(x, y, standardize=True),
            "raw": stats.pca_summary(x, y, standardize=False),
            "probe": stats.probe_summary(x, y, seed=ctx.seed, groups=ctx.groups.numpy(),
                                         positions=ctx.point_positions.numpy())}


def scatter_points(x: np.ndarray, y: np.ndarray, standardize: bool = True, n_max: int = 3000, seed: int = 0) -> dict:
    """PC1/PC2 scores (oriented so PC1 rises with y) of at most ``n_max`` points, for the plots."""
    _, scores = stats.pca(x, standardize=standardize, n_scores=2)
    r, _ = stats.spearman(scores[:, 0], y)
    if r == r and r < 0:
        scores[:, 0] *= -1
    idx = np.random.default_rng(seed).permutation(len(y))[:n_max]
    return {"pc1": scores[idx, 0].tolist(), "pc2": scores[idx, 1].tolist(), "h_bayes": y[idx].tolist()}


def run(ctx: Context) -> dict:
    y = ctx.h_bayes.reshape(-1).numpy()
    reps, reps0 = representations(ctx.acts("final")), representations(ctx.acts("init"))
    out: dict = {"headline": HEADLINE, "label": "H_Bayes (bits)", "n_points": int(len(y)),
                 "null_init": ctx.init_source, "null_gaussian": "isotropic N(0, 1) cloud, same n and d",
                 "split": "80/20 by sequence, seeded", "representations": {}}
    gauss_cache: dict[int, dict] = {}
    for name, x in reps.items():
        d = x.shape[1]
        if d not in gauss_cache:
            g = stats.gaussian_cloud(len(y), d, seed=ctx.seed)
            gauss_cache[d] = {"standardized": stats.pca_summary(g, y, standardize=True),
                              "raw": stats.pca_summary(g, y, standardize=False)}
        out["representations"][name] = {
            "trained": describe(x, y, ctx),
            "init": describe(reps0[name], y, ctx),
            "gaussian": gauss_cache[d],
        }
    pc1 = {n: r["trained"]["standardized"]["pc1"] for n, r in out["representations"].items()}
    best = max(pc1, key=pc1.get)
    rep = out["representations"][best]
    out["most_one_dimensional"] = {"name": best, "pc1": pc1[best],
                                   "spearman_pc1": rep["trained"]["standardized"]["spearman_pc1"],
                                   "init_pc1": rep["init"]["standardized"]["pc1"]}
    out["scatter"] = {"trained": scatter_points(reps[HEADLINE], y, seed=ctx.seed),
                      "init": scatter_points(reps0[HEADLINE], y, seed=ctx.seed)}
    return out


ANALYSIS = Analysis(name='value_manifold', title='Value manifold', applies=applies, run=run,
                    markdown=markdown.value_manifold, plot=plots.value_manifold, needs_activations=True)
