"""Frame-precision dissociation (Paper I section 6.5): over the run's checkpoints, does the
attention settle early while the value manifold and the calibration keep improving?

For every saved checkpoint, on the same probe batch: the attention-map distance to the final
model (Jensen-Shannon divergence in bits between matching attention rows, averaged over
sequences, heads and query rows t >= 1, per layer and overall), the layer-0 key-frame statistic
(and every layer's; at layer 0 also every token variant of :mod:`key_frame`: centred keys, OV
vectors, the value tokens), the value-manifold numbers of the final-normed state (standardised PC1,
Spearman r(PC1, H_Bayes), probe R^2), the entropy error and KL(Bayes || model).

``settle_step`` of a series is the first checkpoint from which it stays within 10% of its
total change (first to last checkpoint) of the final value; the entropy error is taken in
log10. The claim reads: attention JS and the key frame settle before the entropy error does,
and the error still improves by ``error_improvement_after_attention_settles`` after.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from windtunnel import stats
from windtunnel.analysis import Analysis
from windtunnel.evaluate.metrics import AUTHORS_KL_EPS, entropy_error, model_prediction, per_position
from windtunnel.geometry import key_frame, markdown, plots
from windtunnel.geometry.context import Activations, Context, capture, flat
from windtunnel.train.checkpoint import load_weights


def applies(ctx: Context) -> str | None:
    if len(ctx.checkpoints) < 2:
        return f"needs at least two checkpoints; {ctx.run_dir} has {len(ctx.checkpoints)}"
    return None


def attention_js(acts: Activations, ref: Activations) -> list[float]:
    """Per layer, mean JS (bits) between the attention rows t >= 1 of ``acts`` and ``ref``."""
    return [float(stats.js_divergence_bits(acts.patterns[i][:, :, 1:], ref.patterns[i][:, :, 1:]).mean())
            for i in sorted(acts.patterns)]


def settle_step(steps: list[int], values: list[float], tol: float = 0.1) -> int | None:
    """First step from which ``values`` stay within ``tol`` of their total change of the last value."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0 or not np.isfinite(v).all():
        return None
    span = abs(v[-1] - v[0])
    if span == 0:
        return int(steps[0])
    ok = np.abs(v - v[-1]) <= tol * span
    bad = np.flatnonzero(~ok)
    first = 0 if bad.size == 0 else bad[-1] + 1
    return int(steps[min(first, len(steps) - 1)])


def checkpoint_point(ctx: Context, model, acts: Activations, final: Activations,
                     token_sets: dict[str, list[int]]) -> dict:
    y = ctx.h_bayes.reshape(-1).numpy()
    x = flat(acts.states["final"]).numpy()
    pca = stats.pca_summary(x, y, standardize=True)
    pp = per_position(model_prediction(acts.logits, ctx.task.spec.output_kind), ctx.bayes, eps=AUTHORS_KL_EPS)
    row = {"pc1": pca["pc1"], "spearman_pc1": pca["spearman_pc1"],
           "probe_r2": stats.probe_r2(x, y, stats.Split(ctx.seed, groups=ctx.groups.numpy())),
           "entropy_error": float(entropy_error(pp["dh"])), "kl_bayes_model": float(pp["kl_bayes_model"].mean())}
    if acts.patterns:
        js = attention_js(acts, final)
        row["attention_js_per_layer"] = js
        row["attention_js"] = float(np.mean(js))
    if token_sets:
        with torch.no_grad():
            variants = {prefix + v: [float(h.mean()) for h in key_frame.per_head(model, toks, v)]
                        for prefix, toks in token_sets.items() for v in key_frame.TOKEN_VARIANTS}
        row["key_frame_per_layer"] = variants[key_frame.HEADLINE]
        row["key_frame_layer0"] = row["key_frame_per_layer"][0]
        row["key_frame_variants_layer0"] = {k: v[0] for k, v in variants.items()}
    return row


def run(ctx: Context, progress=None) -> dict:
    final = ctx.acts("final")
    hyp = key_frame.hypothesis_tokens(ctx.task) if key_frame.model_reason(ctx.model) is None else None
    token_sets = {}  # key-frame token sets followed over the checkpoints: prefix -> token ids
    if hyp is not None and len(hyp[0]) >= 2:
        token_sets = {"": hyp[0], **{p: ids for p, (ids, _) in key_frame.extra_token_sets(ctx.task).items()}}
    rows = []
    for step, path in ctx.checkpoints:
        if step == ctx.step:
            model, acts = ctx.model, final
        elif step == 0 and ctx.checkpoints[0][0] == 0:
            model, acts = ctx.init_model, ctx.acts("init")
        else:
            model = ctx.fresh_model()
            load_weights(model, path)
            acts = capture(model, ctx.batch, full=False)
        rows.append({"step": int(step), **checkpoint_point(ctx, model, acts, final, token_sets)})
        if progress is not None:
            progress(step)
    steps = [r["step"] for r in rows]
    series = {k: [r[k] for r in rows] for k in ("attention_js", "key_frame_layer0", "pc1", "spearman_pc1",
                                                  "probe_r2", "entropy_error", "kl_bayes_model") if k in rows[0]}
    settle = {}
    for k, v in series.items():
        vals = [math.log10(max(x, 1e-12)) for x in v] if k in ("entropy_error", "kl_bayes_model") else v
        settle[k] = settle_step(steps, vals)
    out: dict = {"steps": steps, "checkpoints": rows, "series": series, "settle_step": settle, "tolerance": 0.1}
    if "attention_js" in settle and settle["attention_js"] is not None:
        s = settle["attention_js"]
        err_at = series["entropy_error"][steps.index(s)]
        out["error_at_attention_settle"] = err_at
        out["error_improvement_after_attention_settles"] = (err_at / series["entropy_error"][-1]
                                                            if series["entropy_error"][-1] > 0 else float("inf"))
        out["attention_settles_before_error"] = (settle["entropy_error"] is not None and s <= settle["entropy_error"])
    return out


ANALYSIS = Analysis(name='dynamics', title='Frame-precision dissociation', applies=applies, run=run,
                    markdown=markdown.dynamics, plot=plots.dynamics, needs_activations=True)
