"""Key orthogonality: mean |off-diagonal cosine| of the W_K columns per key/value head."""

from __future__ import annotations

import numpy as np

from windtunnel.analysis import Analysis
from windtunnel.llm import plots, report
from windtunnel.llm.loading import LoadedModel, load_model
from windtunnel.llm.session import Session
from windtunnel.llm.stats import blas1
from windtunnel.stats import gaussian_abs_cosine, mean_offdiag_abs_cosine, monte_carlo_test

#: the analyses that run the mixed pool's pass; the activation variant reads its keys when one of them runs
MIXED_POOL_USERS = ("value_manifold", "attention_focusing", "domain_restriction")


def _key_layer_stats(ad, weights) -> list[dict]:
    out = []
    for i, w in enumerate(weights):
        per_head = np.atleast_1d(mean_offdiag_abs_cosine(w.float().cpu().numpy()))
        out.append({"layer": i, "mean": float(per_head.mean()), "median": float(np.median(per_head)),
                    "p10": float(np.quantile(per_head, 0.1)), "p90": float(np.quantile(per_head, 0.9)),
                    "per_head": per_head.tolist()})
    return out


def _init_from_config(lm: LoadedModel, seed: int) -> list[float] | None:
    """W_K drawn by the family's own initialiser (``_init_weights``) for a fresh linear of each
    layer's shape: a measured at-initialisation value when no step-0 checkpoint exists."""
    import torch

    init = getattr(lm.model, "_init_weights", None)
    if init is None:
        return None
    ad = lm.adapter
    out = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for i in range(ad.n_layers):
            o, n = ad.key_linear_shape(i)
            lin = torch.nn.Linear(n, o, bias=False)
            try:
                init(lin)
            except Exception:  # pragma: no cover - exotic initialisers
                return None
            w = ad.key_weight_from(lin.weight)
            out.append(float(np.mean(mean_offdiag_abs_cosine(w.numpy()))))
    return out


def _gaussian_null(ad, o) -> tuple[np.ndarray, np.ndarray]:
    """Empirical Gaussian null of one head (d_head columns in R^d_model), then of a layer mean over
    the n_kv heads: ``n_null`` draws of each, seeded with the run's ``seed``."""
    rng = np.random.default_rng(o.seed)
    head_null = np.array([mean_offdiag_abs_cosine(rng.standard_normal((ad.head_dim, ad.d_model)))
                          for _ in range(o.n_null)])
    return head_null, rng.choice(head_null, (o.n_null, ad.n_kv_heads)).mean(1)


def _init_revision(sess: Session) -> np.ndarray:
    """Per-layer mean |cos| of the W_K columns of the model's ``init_revision`` checkpoint."""
    init_lm = load_model(sess.name, sess.opts, revision=sess.opts.init_revision, weights_only=True)
    try:
        ad = init_lm.adapter
        init_layers = _key_layer_stats(ad, [ad.key_weight(i) for i in range(ad.n_layers)])
    finally:
        init_lm.close()
    return np.array([x["mean"] for x in init_layers])


def _activation_variant(sess: Session) -> dict:
    """The authors' analyze_icl_sula variant: |cos| between the key/value heads' final-token keys,
    read from the mixed pool's pass."""
    ad = sess.lm.adapter
    _, cap = sess.pool("mixed")
    idx = sess.selection("mixed")["indices"]
    act = []
    for i in range(ad.n_layers):
        k = cap.keys[i][idx].reshape(len(idx), ad.n_kv_heads, ad.head_dim)
        act.append(float(np.mean(mean_offdiag_abs_cosine(k))))
    return {"definition": "final-token keys (pre-rotary), mean |cos| between the key/value heads, averaged over the "
                          "stratified mixed prompts (the authors' analyze_icl_sula variant; not the paper's definition)",
            "per_layer": act, "gaussian_null_d_head": gaussian_abs_cosine(ad.head_dim)}


@blas1
def key_orthogonality(sess: Session) -> dict:
    """Mean |off-diagonal cosine| of the d_head columns of W_K (each in R^d_model) per
    key/value head; per layer mean, median, 10/90 percentiles; Gaussian and init baselines."""
    o, lm, ad = sess.opts, sess.lm, sess.lm.adapter
    layers = _key_layer_stats(ad, [ad.key_weight(i) for i in range(ad.n_layers)])
    means = np.array([x["mean"] for x in layers])
    head_null, layer_null = _gaussian_null(ad, o)
    for x in layers:
        x["test_vs_gaussian"] = monte_carlo_test(x["mean"], layer_null, alternative="two-sided")
    t = o.thresholds
    res = {
        "definition": "W_K columns per key/value head (weight-only; bias ignored; rotary irrelevant)",
        "d_model": ad.d_model, "d_head": ad.head_dim, "n_kv_heads": ad.n_kv_heads, "layers": layers,
        "summary": {
            "mean": float(means.mean()), "min": float(means.min()), "max": float(means.max()),
            "early_mean": float(means[: max(1, ad.n_layers // 3)].mean()),
            "fraction_layers_below_threshold": float((means < t.key_orth_max).mean()),
            "threshold": t.key_orth_max,
        },
        "null": {
            "gaussian_analytic": gaussian_abs_cosine(ad.d_model),
            "gaussian_analytic_formula": "E|cos| of two N(0, I_d_model) vectors (the columns live in R^d_model)",
            "gaussian_paper_sec45_d_head": float(np.sqrt(2 / (np.pi * ad.head_dim))),
            "gaussian_empirical": {"head_mean": float(head_null.mean()), "layer_mean": float(layer_null.mean()),
                                   "layer_q05": float(np.quantile(layer_null, 0.05)),
                                   "layer_q95": float(np.quantile(layer_null, 0.95)), "n_draws": int(o.n_null)},
        },
    }
    res["summary"]["ratio_to_gaussian"] = float(means.mean() / layer_null.mean())
    res["summary"]["fraction_layers_outside_gaussian_q05_q95"] = float(
        ((means < np.quantile(layer_null, 0.05)) | (means > np.quantile(layer_null, 0.95))).mean())
    init = _init_from_config(lm, o.seed) if o.init_from_config else None
    if init is not None:
        res["null"]["init_from_config"] = {"per_layer": init, "mean": float(np.mean(init)),
                                           "how": "the family's _init_weights on a fresh linear of each layer's shape"}
    if o.init_revision is not None:
        m0 = _init_revision(sess)
        res["null"]["init_revision"] = {"revision": o.init_revision, "per_layer": m0.tolist(), "mean": float(m0.mean())}
        res["summary"]["ratio_to_init_revision"] = float(means.mean() / m0.mean())
    # named alternative (the authors' analyze_icl_sula), when the session runs the mixed pool's pass anyway
    if ad.n_kv_heads > 1 and set(MIXED_POOL_USERS) & set(sess.analyses):
        res["activation_variant"] = _activation_variant(sess)
    return res


ANALYSIS = Analysis(name="key_orthogonality", title="Key orthogonality", run=key_orthogonality,
                    markdown=report.key_orthogonality, plot=plots.key_orthogonality)
