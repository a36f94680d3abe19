"""The key-frame study's plan (Paper I's key frame: the model, the measure, or the budget?).

One factor at a time on the bijection tunnel, with our trainer and data, for our ``transformer``
and the authors' architecture (``tinygpt``). The protocol, the same for every cell: the quick
bijection profile (V = 20, L = 19, batch 64, AdamW, 100 warmup steps, cosine, weight decay 0.01,
clip 1.0), the profile's transformer shape for both models (3 layers, 4 heads, d 128), lr 3e-3 for
every cell (the quick profile's shared rate and the authors' recipe; the transformer's own tuned
rate, 3.16e-3, is 5% away), one torch thread, budgets of 1x, 3x and 10x the profile's 1200 steps,
seeds 0, 1, 2. A job is ``(cell, budget multiple, seed)``, named by :func:`job_name`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

TASK, PROFILE = "bijection", "quick"
BASE_STEPS = 1200  # the quick profile's train.steps
LR = 3e-3
SHAPE = {"n_layers": 3, "n_heads": 4, "d_model": 128}  # the quick profile's transformer
PROBE = {"n_sequences": 256, "seed": 0}  # the diagnostics' probe batch
ANALYSES = ["key_frame", "ablation", "dynamics"]
#: key-frame variants kept: the key tokens' raw and centred keys, per head and for the whole layer
#: (every head's keys together: the paper's reading), and (sep-vocab) the value tokens' per head
VARIANTS = ("tokens_raw", "tokens_centred", "layer_raw", "layer_centred", "value_tokens_raw", "value_tokens_centred")


#: (tag, overrides, what) of the trials on keys drawn with replacement (the ``regime`` factor)
REGIME_TRIALS = [
    ("lr1e-3", {"train.lr": 1e-3}, "lr 1e-3"),
    ("lr3e-4", {"train.lr": 3e-4}, "lr 3e-4 (the authors' production rate)"),
    ("warmup", {"train.warmup": 600}, "lr 3e-3 after a warm-up of half the 1x budget (600 steps)"),
    # the initialisation that leaves the recall tunnel's lookup plateau (configs/quick/recall.json)
    ("init-torch", {"model_params.init": "torch"}, "PyTorch's default initialisation"),
    ("embed", {"model_params.embed_std": 1.0}, "the token embedding alone at N(0, 1)"),
]


@dataclass(frozen=True)
class Cell:
    """One row of the study: a model and what differs from its defaults."""

    model: str
    changes: dict = field(default_factory=dict)  # dotted overrides, as --set takes them
    factor: str = "model"
    what: str = ""


CELLS = {
    "transformer": Cell("transformer", {}, "model", "our transformer (LayerNorm, biases, head tied over the answers)"),
    "tinygpt": Cell("tinygpt", {}, "model", "the authors' TinyGPT (RMSNorm, no biases, head tied over the vocabulary)"),
    "transformer-paired": Cell("transformer", {"task_params.format": "paired"}, "format", "transformer, paired format"),
    "tinygpt-paired": Cell("tinygpt", {"task_params.format": "paired"}, "format", "tinygpt, paired format"),
    "transformer-tie-vocab": Cell("transformer", {"model_params.tie_scope": "vocab"}, "head",
                                  "transformer, head tied over the whole vocabulary"),
    "transformer-untied": Cell("transformer", {"model_params.tie_head": False}, "head", "transformer, untied head"),
    "tinygpt-tie-answers": Cell("tinygpt", {"model_params.tie_scope": "answers"}, "head",
                                "tinygpt, head tied over the answers"),
    "transformer-rmsnorm": Cell("transformer", {"model_params.norm": "rmsnorm"}, "norm", "transformer, RMSNorm"),
    "tinygpt-layernorm": Cell("tinygpt", {"model_params.norm": "layernorm", "model_params.norm_eps": 1e-5}, "norm",
                              "tinygpt, LayerNorm"),
    "transformer-nobias": Cell("transformer", {"model_params.bias": False}, "bias", "transformer, no biases"),
    "transformer-init-torch": Cell("transformer", {"model_params.init": "torch"}, "init",
                                   "transformer, PyTorch's default initialisation"),
    "tinygpt-init-torch": Cell("tinygpt", {"model_params.init": "torch"}, "init",
                               "tinygpt, PyTorch's default initialisation"),
    # the embedding's scale alone: N(0, 1) token embeddings, W_K, positions and biases as in the
    # paper (N(0, 0.02), zero); init=torch changes all of them
    "transformer-init-embed": Cell("transformer", {"model_params.embed_std": 1.0}, "init",
                                   "transformer, token embeddings N(0, 1), everything else N(0, 0.02)"),
    "tinygpt-init-embed": Cell("tinygpt", {"model_params.embed_std": 1.0}, "init",
                               "tinygpt, token embeddings N(0, 1), everything else N(0, 0.02)"),
    # keys drawn with replacement (the authors' data code's default), so that a repeated key must
    # be matched to its earlier occurrence and key identity matters
    "transformer-replacement": Cell("transformer", {"task_params.with_replacement": True}, "task",
                                    "transformer, keys drawn with replacement"),
    "tinygpt-replacement": Cell("tinygpt", {"task_params.with_replacement": True}, "task",
                                "tinygpt, keys drawn with replacement"),
    # the authors' production regime (keys with replacement), trained with what the field would
    # try to leave a plateau: another rate, a long warm-up, a longer budget, the initialisation
    **{f"{m}-replacement-{tag}": Cell(m, {"task_params.with_replacement": True, **ch}, "regime",
                                      f"{m}, keys drawn with replacement, {what}")
       for m in ("transformer", "tinygpt") for tag, ch, what in REGIME_TRIALS},
}

#: (cell, budget multiple, seed), in the order they run: the decisive comparisons first (the
#: two models in both formats, the transformer's single factors, the seeds and budgets of the
#: two models in the main job's format), then keys with replacement, the reverse single factors
#: of tinygpt and the seeds of the paired format
PLAN = [
    *[(c, 1, 0) for c in ("transformer", "tinygpt", "transformer-paired", "tinygpt-paired")],
    *[(c, 1, 0) for c in ("transformer-tie-vocab", "transformer-untied", "transformer-rmsnorm", "transformer-nobias",
                          "transformer-init-torch")],
    *[(c, 1, s) for s in (1, 2) for c in ("transformer", "tinygpt")],
    ("tinygpt-init-torch", 1, 0), *[("transformer-init-torch", 1, s) for s in (1, 2)],  # the init moved it: seeds
    *[(c, b, 0) for b in (3, 10) for c in ("transformer", "tinygpt")],
    *[(c, 1, 0) for c in ("transformer-replacement", "tinygpt-replacement")],
    *[(c, 1, 0) for c in ("tinygpt-tie-answers", "tinygpt-layernorm")],
    *[("tinygpt-init-torch", 1, s) for s in (1, 2)],
    *[(c, 1, s) for s in (1, 2) for c in ("transformer-paired", "tinygpt-paired")],
    # the production regime, small budgets first, then longer
    *[(f"transformer-replacement-{tag}", 1, 0) for tag, _, _ in REGIME_TRIALS],
    ("transformer-replacement", 3, 0),
    # the embedding's scale alone, both models, three seeds
    *[(c, 1, s) for s in (0, 1, 2) for c in ("transformer-init-embed", "tinygpt-init-embed")],
]


def job_name(cell: str, budget: int, seed: int) -> str:
    return f"{cell}-{budget}x-s{seed}"


def job_overrides(cell: str, budget: int, seed: int) -> dict[str, Any]:
    """The job's dotted overrides of the quick bijection profile (as ``--set`` takes them)."""
    c = CELLS[cell]
    params = dict(SHAPE, tie_head=True) if c.model == "transformer" else dict(SHAPE)
    out = {"model_params": params, "train.steps": BASE_STEPS * budget, "train.lr": LR, "train.seed": seed,
           "train.threads": 1, "train.checkpoints": 20}
    return out | c.changes


def selected(only: list[str] | None) -> list[tuple[str, int, int]]:
    """The plan's jobs whose names match a glob of ``only`` (every job for None or an empty list)."""
    return [j for j in PLAN if not only or any(fnmatch.fnmatch(job_name(*j), g) for g in only)]
