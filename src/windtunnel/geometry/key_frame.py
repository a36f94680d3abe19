"""Key frame (Paper I section 6.1): are the keys of the hypothesis tokens orthogonal?

For models with attention and key weights (``model.has_attention``, ``model.key_weights(l)`` not
None) on tasks with ``task.hypothesis_tokens()``; per layer and head, per variant (:data:`VARIANTS`):

* ``tokens_raw`` (headline; the authors' ``qkv_analysis.py``): keys E W_K^T of the raw token
  embeddings E of the hypothesis tokens (no position, no norm), at every layer;
* ``tokens_prenorm``: the same keys after the layer's own pre-attention norm (``attention_norm(l)``);
* ``tokens_centred``: the ``tokens_raw`` keys minus their mean over the token set, per head;
* ``layer_raw`` / ``layer_centred``: the keys of every head of the layer concatenated (d_model
  dimensions: the whole layer's W_K, the reading whose random value is the paper's 0.082 at its
  size), raw and centred;
* ``ov`` / ``ov_centred``: the OV vectors W_O W_V e of the token embeddings (``ov_weights(l)``);
* ``wk_columns`` (Paper III section 3.2): the d_head columns of W_K in R^d, no tokens;
* ``value_...``: the token variants for the task's ``value_tokens()`` (the sep-vocab bijection).

The statistic is the mean |off-diagonal cosine| (0 = orthogonal), the signed mean beside it.
Nulls: the step-0 checkpoint, ``n_null`` fresh initialisations of the run's architecture under
its own ``model_params.init``, and (key variants) the closed form of random keys
(:func:`windtunnel.stats.random_key_abs_cosine`). Tests: a one-sided Monte Carlo p of the layer mean against the random
draws (below random), and a permutation test of trained against step-0 |cos| over the layer's heads
and token pairs (descriptive: pairs are not independent). Why each variant: docs/geometry.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from windtunnel import stats
from windtunnel.analysis import Analysis
from windtunnel.geometry import markdown, plots
from windtunnel.geometry.context import Context, attention_layers, missing

TOKEN_VARIANTS = ("tokens_raw", "tokens_prenorm", "tokens_centred", "layer_raw", "layer_centred", "ov", "ov_centred")
#: the variants whose vectors are keys E W_K^T (their random value has a closed form)
KEY_VARIANTS = ("tokens_raw", "tokens_prenorm", "tokens_centred", "layer_raw", "layer_centred")
VARIANTS = (*TOKEN_VARIANTS, "wk_columns")
HEADLINE = "tokens_raw"


def hypothesis_tokens(task) -> tuple[list[int], str] | None:
    """Token ids whose keys form the hypothesis frame, and what they are (None: no such tokens):
    the task's own :meth:`~windtunnel.tasks.base.Task.hypothesis_tokens`."""
    return task.hypothesis_tokens()


def extra_token_sets(task) -> dict[str, tuple[list[int], str]]:
    """Further token sets measured beside the hypothesis tokens: the task's
    :meth:`~windtunnel.tasks.base.Task.value_tokens` (the sep-vocab bijection's V value tokens,
    the answers the attention must tell apart), prefixed ``value_``."""
    values = task.value_tokens()
    return {"value_": values} if values is not None else {}


def model_reason(model) -> str | None:
    """Why the key frame cannot be measured on ``model`` (None: it can)."""
    reason = missing(model, "has_attention")
    if reason is None and model.key_weights(0) is None:
        reason = ("no key weights (model.key_weights(0) is None: its keys are no linear map of the "
                  "token embeddings)")
    return reason


def applies(ctx: Context) -> str | None:
    reason = model_reason(ctx.model)
    if reason is not None:
        return reason
    if hypothesis_tokens(ctx.task) is None:
        return f"no hypothesis tokens (task '{ctx.config.task}': task.hypothesis_tokens() is None)"
    return None


def key_weights(model) -> list[torch.Tensor]:
    """Per layer, W_K of every head: (H, d_head, d) (``model.key_weights``)."""
    return [model.key_weights(i) for i in range(attention_layers(model))]


def ov_weights(model) -> list[torch.Tensor]:
    """Per layer, W_O W_V of every head: (H, d, d) (``model.ov_weights``)."""
    return [model.ov_weights(i) for i in range(attention_layers(model))]


def frame_vectors(model, tokens: list[int], variant: str) -> list[torch.Tensor]:
    """Per layer the vectors whose cosines are measured: (H, n, d_head) keys, (1, n, H d_head) the
    whole layer's keys (``layer_``), (H, n, d) OV vectors, or (H, d_head, d) columns."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown key-frame variant {variant!r}; allowed: {', '.join(VARIANTS)}")
    if variant == "wk_columns":
        return key_weights(model)
    e = model.embed.tok.weight.detach()[torch.as_tensor(tokens)].double()
    if variant.startswith("ov"):
        vecs = [torch.einsum("nd,hkd->hnk", e, w) for w in ov_weights(model)]
    else:
        vecs = []
        for i, w in enumerate(key_weights(model)):
            norm = model.attention_norm(i) if variant == "tokens_prenorm" else None
            x = norm(e.to(norm.weight.dtype)).double() if norm is not None else e
            vecs.append(torch.einsum("nd,hkd->hnk", x, w))
        if variant.startswith("layer"):  # every head's keys side by side: (1, n, H d_head)
            vecs = [v.permute(1, 0, 2).reshape(1, v.shape[1], -1) for v in vecs]
    if variant.endswith("centred"):
        vecs = [v - v.mean(-2, keepdim=True) for v in vecs]
    return vecs


def per_head(model, tokens: list[int], variant: str) -> list[np.ndarray]:
    """Per layer, the (H,) mean |off-diagonal cosine| of every head."""
    return [np.atleast_1d(stats.mean_offdiag_abs_cosine(v)) for v in frame_vectors(model, tokens, variant)]


def random_null(draw: Callable[[int], torch.nn.Module], jobs: dict[str, tuple[str, list[int]]], n_null: int,
                seed: int) -> dict[str, list[np.ndarray]]:
    """Per job (``{key: (variant, tokens)}``) and layer, ``n_null`` layer means of the statistic on
    the models ``draw(seed + i)``: fresh initialisations of the run's architecture."""
    out: dict[str, list[list[float]]] = {key: [] for key in jobs}
    for i in range(n_null):
        model = draw(seed + i)
        for key, (variant, toks) in jobs.items():
            out[key].append([float(h.mean()) for h in per_head(model, toks, variant)])
    return {key: list(np.asarray(v).T) for key, v in out.items()}  # per layer: (n_null,)


def _pairs(model, tokens, variant) -> list[np.ndarray]:
    return [stats.offdiag_abs_cosines(v.numpy()).ravel() for v in frame_vectors(model, tokens, variant)]


def run(ctx: Context, n_null: int = 200, n_perm: int = 1000) -> dict:
    tokens, what = hypothesis_tokens(ctx.task)
    init = ctx.init_model
    law = ctx.model.config.init
    out: dict = {"tokens": what, "token_ids": tokens, "headline": HEADLINE, "n_null": n_null,
                 "null_init": ctx.init_source,
                 "null_random": f"fresh initialisations of the architecture (init={law!r}), seeded", "variants": {}}
    jobs = {v: (v, tokens) for v in VARIANTS}
    for prefix, (ids, desc) in extra_token_sets(ctx.task).items():
        out.setdefault("extra_tokens", {})[prefix] = {"token_ids": ids, "tokens": desc}
        jobs |= {prefix + v: (v, ids) for v in TOKEN_VARIANTS}
    jobs = {k: (v, toks) for k, (v, toks) in jobs.items() if v == "wk_columns" or len(toks) >= 2}
    with torch.no_grad():
        null = random_null(ctx.fresh_model, jobs, n_null, ctx.seed + 17)
        for key, (variant, toks) in jobs.items():
            trained, at_init = per_head(ctx.model, toks, variant), per_head(init, toks, variant)
            rand = null[key]
            pairs_t, pairs_0 = _pairs(ctx.model, toks, variant), _pairs(init, toks, variant)
            signed = [stats.mean_offdiag_cosine(v.numpy()) for v in frame_vectors(ctx.model, toks, variant)]
            layers = []
            for li, (h, h0, r) in enumerate(zip(trained, at_init, rand)):
                mean = float(h.mean())
                layers.append({
                    "layer": li,
                    "per_head": h.tolist(),
                    "mean": mean,
                    "median": float(np.median(h)),
                    "p10": float(np.quantile(h, 0.1)),
                    "p90": float(np.quantile(h, 0.9)),
                    "signed_mean": float(np.mean(signed[li])),
                    "init_per_head": h0.tolist(),
                    "init_mean": float(h0.mean()),
                    "random_mean": float(r.mean()),
                    "reduction_vs_random": float(1 - mean / r.mean()) if r.mean() > 0 else float("nan"),
                    "reduction_vs_init": float(1 - mean / h0.mean()) if h0.mean() > 0 else float("nan"),
                    "test_vs_random": stats.monte_carlo_test(mean, r, alternative="less"),
                    "test_vs_init": stats.permutation_test(pairs_t[li], pairs_0[li], n_perm=n_perm,
                                                           seed=ctx.seed + li),
                })
            dim = frame_vectors(ctx.model, toks, variant)[0].shape[-1]
            out["variants"][key] = {"layers": layers, "gaussian_abs_cosine": stats.gaussian_abs_cosine(dim)}
            if variant in KEY_VARIANTS:  # keys E W^T of isotropic E under a random W (m x d_model)
                out["variants"][key]["random_closed_form"] = stats.random_key_abs_cosine(
                    dim, ctx.model.embed.tok.weight.shape[1], len(toks), centred=variant.endswith("centred"))
        # the layer-0 cosine matrices of the headline variant (for the heatmaps)
        k0 = frame_vectors(ctx.model, tokens, HEADLINE)[0].numpy()
        k0_init = frame_vectors(init, tokens, HEADLINE)[0].numpy()
    if len(tokens) <= 64:
        out["layer0_cosines"] = [stats.cosine_matrix(k).tolist() for k in k0]
        out["layer0_cosines_init"] = [stats.cosine_matrix(k).tolist() for k in k0_init]
    return out


ANALYSIS = Analysis(name='key_frame', title='Key frame', applies=applies, run=run,
                    markdown=markdown.key_frame, plot=plots.key_frame, needs_activations=False)
