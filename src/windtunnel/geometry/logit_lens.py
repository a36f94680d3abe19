"""Logit lens: read every layer's state through the model's final norm and output head.

At the scored positions, each layer state (the embedding, then every ``blocks.{i}.resid_post``)
goes through the final norm (``model.final_norm``) and head as if it were the last layer;
the resulting prediction is compared with the exact posterior: KL(model_layer || Bayes) and
KL(Bayes || model_layer) in bits (both with the metrics' eps clip, 1e-10, on the second
argument) and the entropy error. The last layer reproduces the model's own output. Nulls: the
same lens on the step-0 model, and the task's context-blind baselines (e.g. uniform).
"""

from __future__ import annotations

import torch

from windtunnel.analysis import Analysis
from windtunnel.evaluate.metrics import AUTHORS_KL_EPS, entropy_error, model_prediction, per_position
from windtunnel.geometry import markdown, plots
from windtunnel.geometry.context import Activations, Context


def applies(ctx: Context) -> str | None:
    if ctx.model.final_norm is None:
        return "no final norm to read layers through (model.final_norm is None)"
    if not ctx.model.layer_state_names():
        return "no per-layer states (model.layer_state_names() is empty: no blocks.{i}.resid_post captures)"
    return None


@torch.no_grad()
def lens(model, acts: Activations, ctx: Context) -> list[dict]:
    norm = model.final_norm
    out = []
    for name in ["embed", *acts.layer_names]:
        h = acts.states[name]
        if name == "embed" and h.shape[-1] != acts.states["final"].shape[-1]:
            continue  # (prefix MLP: the embedding is narrower than the residual width)
        logits = model.head(norm(h), model.embed.tok.weight)
        pp = per_position(model_prediction(logits, ctx.task.spec.output_kind), ctx.bayes, eps=AUTHORS_KL_EPS)
        out.append({"name": name, "kl_model_bayes": float(pp["kl_model_bayes"].mean()),
                    "kl_bayes_model": float(pp["kl_bayes_model"].mean()),
                    "entropy_error": float(entropy_error(pp["dh"]))})
    return out


def run(ctx: Context) -> dict:
    acts = ctx.acts("final")
    out: dict = {"kl_eps": AUTHORS_KL_EPS, "null_init": ctx.init_source,
                 "layers": lens(ctx.model, acts, ctx), "init_layers": lens(ctx.init_model, ctx.acts("init"), ctx)}
    pp = per_position(model_prediction(acts.logits, ctx.task.spec.output_kind), ctx.bayes, eps=AUTHORS_KL_EPS)
    out["model_output"] = {"kl_model_bayes": float(pp["kl_model_bayes"].mean()),
                           "kl_bayes_model": float(pp["kl_bayes_model"].mean()),
                           "entropy_error": float(entropy_error(pp["dh"]))}
    out["baselines"] = {}
    for name, pred in ctx.task.baselines(ctx.batch).items():
        if name == "bayes":
            continue
        b = per_position(pred, ctx.bayes, eps=AUTHORS_KL_EPS)
        out["baselines"][name] = {"kl_bayes_model": float(b["kl_bayes_model"].mean()),
                                  "entropy_error": float(entropy_error(b["dh"]))}
    return out


ANALYSIS = Analysis(name='logit_lens', title='Logit lens', applies=applies, run=run,
                    markdown=markdown.logit_lens, plot=plots.logit_lens, needs_activations=True)
