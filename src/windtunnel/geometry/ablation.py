"""Ablations (Paper I section 6.4): zero every head, bypass every block (whole, attention only,
FFN only), and measure the damage to calibration on the probe batch.

Each ablation is set through the model's own hooks (``head_mask``, ``set_bypass``) and always
undone with ``clear_ablations`` (try/finally). For each: the entropy error (mean |H_model -
H_Bayes|, bits) and KL(Bayes || model) against the intact model, the change with a paired
bootstrap 95% CI over sequences (the null is "no change": a CI that excludes 0), and the error
ratio. The ranked table sorts by the change in entropy error; the frame head is the head whose
removal hurts most, with its ratio to the runner-up and how many heads reach half its effect.
For tasks with a length test (``task.length_test()``; HMM: the task's K and K = 50, the paper's),
attention is removed in the top two layers and the model is evaluated at every length, intact
and ablated. It applies to models with the ablation hooks (``model.has_head_ablation``).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from windtunnel.analysis import Analysis
from windtunnel.config import ConfigError
from windtunnel.evaluate.evaluator import predict, task_bayes
from windtunnel.evaluate.metrics import AUTHORS_KL_EPS, bootstrap_ci, entropy_error, per_position
from windtunnel.geometry import markdown, plots
from windtunnel.geometry.context import Context, missing, probe_batch

BYPASS = ("block", "attn", "ffn")


def applies(ctx: Context) -> str | None:
    return missing(ctx.model, "has_head_ablation")


@contextmanager
def ablated(model, heads: list[tuple[int, int]] = (), bypass: list[tuple[int, str]] = ()):
    """Zero ``heads`` [(layer, head)] and bypass ``bypass`` [(layer, what)] inside the block."""
    try:
        for layer, head in heads:
            model.head_mask[layer, head] = 0.0
        for layer, what in bypass:
            model.set_bypass(layer, what)
        yield model
    finally:
        model.clear_ablations()


def calibration(model, task, batch) -> dict[str, torch.Tensor]:
    """Per (sequence, position) |dh| and KL(Bayes || model) in bits (metrics' eps clip)."""
    pp = per_position(predict(model, task, batch), task_bayes(batch), eps=AUTHORS_KL_EPS)
    return {"abs_dh": pp["dh"].abs(), "kl": pp["kl_bayes_model"], "dh": pp["dh"]}


def effect(base: dict, abl: dict, n_boot: int, seed: int) -> dict:
    err0, err = float(entropy_error(base["dh"])), float(entropy_error(abl["dh"]))
    d, lo, hi = bootstrap_ci(abl["abs_dh"] - base["abs_dh"], n_boot=n_boot, generator=seed)
    kl = float(abl["kl"].mean())
    dkl, klo, khi = bootstrap_ci(abl["kl"] - base["kl"], n_boot=n_boot, generator=seed)
    return {"entropy_error": err, "delta_entropy_error": d, "delta_lo": lo, "delta_hi": hi,
            "ratio": err / err0 if err0 > 0 else float("inf"), "kl": kl, "delta_kl": dkl,
            "delta_kl_lo": klo, "delta_kl_hi": khi, "significant": bool(lo > 0 or hi < 0)}


def top_attention_length_test(ctx: Context, base_model, n_boot: int) -> dict:
    """Attention off in the top two layers, at every length of ``task.length_test()`` (HMM: the
    task's K and K = 50)."""
    L = base_model.head_mask.shape[0]
    top = list(range(max(0, L - 2), L))
    k0 = ctx.task.length
    out: dict = {"layers": top, "lengths": {}}
    for K in ctx.task.length_test():
        task = ctx.task if K == k0 else ctx.task.with_length(K)
        max_len = base_model.embed.pos.num_embeddings if base_model.embed.pos is not None else None
        if max_len is not None and task.spec.seq_len > max_len:
            out["lengths"][str(K)] = {"skipped": f"sequence length {task.spec.seq_len} exceeds the position table "
                                                 f"({max_len}); train with eval.lengths including {K}"}
            continue
        batch = ctx.batch if K == k0 else probe_batch(task, ctx.n_sequences, ctx.seed)
        base = calibration(base_model, task, batch)
        with ablated(base_model, bypass=[(layer, "attn") for layer in top]):
            abl = calibration(base_model, task, batch)
        out["lengths"][str(K)] = {"baseline_entropy_error": float(entropy_error(base["dh"])),
                                  **effect(base, abl, n_boot, ctx.seed)}
    return out


def run(ctx: Context, n_boot: int = 200) -> dict:
    model, task, batch = ctx.model, ctx.task, ctx.batch
    n_layers, n_heads = model.head_mask.shape
    base = calibration(model, task, batch)
    out: dict = {"baseline": {"entropy_error": float(entropy_error(base["dh"])), "kl": float(base["kl"].mean())},
                 "null": "no change: paired bootstrap 95% CI over sequences of the change", "n_boot": n_boot,
                 "heads": [], "blocks": []}
    for layer in range(n_layers):
        for head in range(n_heads):
            with ablated(model, heads=[(layer, head)]):
                abl = calibration(model, task, batch)
            out["heads"].append({"name": f"L{layer}H{head}", "layer": layer, "head": head,
                                 **effect(base, abl, n_boot, ctx.seed)})
        for what in BYPASS:
            with ablated(model, bypass=[(layer, what)]):
                abl = calibration(model, task, batch)
            out["blocks"].append({"name": f"L{layer}.{what}", "layer": layer, "what": what,
                                  **effect(base, abl, n_boot, ctx.seed)})
    ranked = sorted(out["heads"] + out["blocks"], key=lambda r: -r["delta_entropy_error"])
    out["ranked"] = [r["name"] for r in ranked]
    heads = sorted(out["heads"], key=lambda r: -r["delta_entropy_error"])
    top = heads[0]
    second = heads[1]["delta_entropy_error"] if len(heads) > 1 else float("nan")
    out["frame_head"] = {
        "name": top["name"], "layer": top["layer"], "head": top["head"],
        "delta_entropy_error": top["delta_entropy_error"],
        "ratio_to_second": top["delta_entropy_error"] / second if len(heads) > 1 and second > 0 else float("inf"),
        "n_heads_at_least_half": sum(h["delta_entropy_error"] >= 0.5 * top["delta_entropy_error"] for h in heads),
    }
    whole = [b for b in out["blocks"] if b["what"] == "block"]
    out["min_block_ratio"] = min(b["ratio"] for b in whole)
    if ctx.task.length_test():  # (the key keeps its first name, from the HMM)
        out["hmm_top_attention"] = top_attention_length_test(ctx, model, n_boot)
    if any(model.bypass) or not bool((model.head_mask == 1).all()):
        raise ConfigError("internal error: an ablation was left on")  # pragma: no cover
    return out


ANALYSIS = Analysis(name='ablation', title='Ablations', applies=applies, run=run,
                    markdown=markdown.ablation, plot=plots.ablation, needs_activations=False)
