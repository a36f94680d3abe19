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


def task_record(name: str) -> dict[str, Any]:
    """What ``windtunnel tasks`` lists of one tunnel: its description, hypothesis space, presets,
    baselines, default sequence shape and parameters (with defaults, ranges and help)."""
    from windtunnel.compat import PRESETS_OLD_KEYS
    from windtunnel.tasks import make_task, task_class

    cls = task_class(name)
    task = make_task(name)
    spec = task.spec
    record = {
        "name": name,
        "description": cls.description,
        "hypothesis_space": str(task.hypothesis_space()),
        "log10_hypotheses": task.hypothesis_space().log10_size,
        "presets": cls.Config.presets,
        **{old: cls.Config.presets for old in PRESETS_OLD_KEYS},
        "baselines": ["bayes", *cls.baseline_names],
        "seq_len": spec.seq_len,
        "scored_positions": spec.n_scored,
        "answer_space": spec.answer_size if spec.output_kind == "categorical" else "real (Gaussian)",
        "parameters": cls.Config.describe_fields(),
    }
    return record


def task_lines(r: dict[str, Any]) -> list[str]:
    """A :func:`task_record` as ``windtunnel tasks`` prints it."""
    lines = [f"{r['name']}: {r['description']}", f"  hypothesis space: {r['hypothesis_space']}",
             f"  default sequence: {r['seq_len']} positions, {r['scored_positions']} scored, answer space {r['answer_space']}",
             f"  baselines: {', '.join(r['baselines'])}"]
    if r["presets"]:
        lines.append(f"  presets: {', '.join(r['presets'])}")
    lines += [f"    --{f['name']:<18} default {f['default']!s:<14} {f['allowed']:<24} {f['help']}" for f in r["parameters"]]
    return [*lines, ""]
