"""Readable and JSON views of a batch, for `windtunnel sample` and for anyone who wants to
recompute a posterior independently."""

from __future__ import annotations

from typing import Any

import torch

from windtunnel.tasks.base import Batch, Task


def batch_to_json(task: Task, batch: Batch) -> dict[str, Any]:
    """Per sequence: inputs, decoded tokens, scored positions, exact posterior, entropy,
    target and the latent truth. Positions and steps are shared by the batch."""
    seqs = []
    for i in range(batch.size):
        rec: dict[str, Any] = {
            "inputs": batch.inputs[i].tolist(),
            "tokens": task.decode(batch, i),
            "target": batch.target[i].tolist(),
            "entropy_bits": batch.entropy[i].tolist(),
        }
        if batch.probs is not None:
            rec["posterior"] = batch.probs[i].tolist()
        else:
            rec["posterior_mean"] = batch.mean[i].tolist()
            rec["posterior_var"] = batch.var[i].tolist()
        rec["latent"] = task.latent_json(batch, i)
        seqs.append(rec)
    return {
        "spec": {k: v for k, v in vars(task.spec).items()},
        "answers": task.answer_names(),
        "positions": batch.positions.tolist(),
        "step": batch.step.tolist(),
        "sequences": seqs,
    }


def describe_posterior(probs: torch.Tensor, names: list[str]) -> str:
    """A short description of one categorical posterior vector."""
    support = (probs > 0).nonzero().flatten().tolist()
    if len(probs) <= 8:
        return "[" + " ".join(f"{names[a]}:{p:.3f}" for a, p in enumerate(probs.tolist())) + "]"
    if len(support) == 1:
        return f"delta on {names[support[0]]}"
    vals = probs[support]
    if torch.allclose(vals, vals[0].expand_as(vals)):
        shown = ", ".join(names[a] for a in support[:12]) + (", ..." if len(support) > 12 else "")
        return f"uniform over {len(support)}: {{{shown}}}"
    top = probs.topk(5)
    return "top: " + " ".join(f"{names[a]}:{p:.3f}" for p, a in zip(top.values.tolist(), top.indices.tolist()))


def format_sequence(task: Task, batch: Batch, i: int) -> str:
    tokens = task.decode(batch, i)
    answers = task.answer_names()
    lines = [f"sequence {i}:", "  " + " ".join(tokens), "  scored positions:"]
    for j, (pos, k) in enumerate(zip(batch.positions.tolist(), batch.step.tolist())):
        h = batch.entropy[i, j].item()
        if batch.probs is not None:
            post = describe_posterior(batch.probs[i, j], answers)
            truth = answers[int(batch.target[i, j])]
        else:
            post = f"N(mean={batch.mean[i, j]:+.3f}, var={batch.var[i, j]:.3f})"
            truth = f"{batch.target[i, j].item():+.3f}"
        lines.append(f"    pos {pos:>4} k={k:<3} at {tokens[pos]:<10} H={h:6.3f} bits  truth={truth:<6} posterior {post}")
    return "\n".join(lines)
