"""Checkpoints: safetensors weights + JSON state, written atomically.

Layout inside a run directory::

    checkpoints/step_000000/model.safetensors    weights (every checkpoint)
                           state.json           step, metrics, timestamps
                           optim.safetensors    optimizer moments + RNG states (resumable ones)

Every checkpoint is written (fsynced) into a temporary folder and renamed into place, so a run
killed at any moment, or stopped by a full disk, leaves either the old checkpoints or the new
one, never a half-written one.
Only the newest resumable checkpoint keeps its optimizer file; the weight-only ones form the
log-spaced schedule that the training-dynamics analyses read.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from windtunnel.files import disk_full_names, write_synced


class CheckpointError(RuntimeError):
    """A checkpoint is missing or cannot be read."""


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:07d}"


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint, in step order."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith("step_") and (p / "state.json").is_file():
            out.append((int(p.name[5:]), p))
    return sorted(out)


def _optim_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Flatten an optimizer's state into named tensors and a JSON-able remainder."""
    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for pid, st in sd["state"].items():
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                tensors[f"state.{pid}.{k}"] = v.detach().cpu().contiguous()
            else:
                scalars[f"{pid}.{k}"] = v
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _restore_optim(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    state: dict[int, dict[str, Any]] = {}
    for name, t in tensors.items():
        if name.startswith("state."):
            _, pid, k = name.split(".", 2)
            state.setdefault(int(pid), {})[k] = t
    for key, v in meta["scalars"].items():
        pid, k = key.split(".", 1)
        state.setdefault(int(pid), {})[k] = v
    groups = [{**g, "betas": tuple(g["betas"])} if "betas" in g else g for g in meta["param_groups"]]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: torch.nn.Module,
    state: dict[str, Any],
    optimizer: torch.optim.Optimizer | None = None,
    generators: dict[str, torch.Generator] | None = None,
) -> Path:
    """Write checkpoint ``step`` atomically; with ``optimizer`` it is resumable."""
    final = checkpoint_dir(run_dir, step)
    with disk_full_names(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".tmp_{final.name}_"))
    try:
        weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        write_synced(tmp / "model.safetensors", save(weights))
        meta: dict[str, Any] = {"step": step, **state, "resumable": optimizer is not None}
        if optimizer is not None:
            tensors, optim_meta = _optim_tensors(optimizer)
            tensors["rng.torch_cpu"] = torch.get_rng_state()
            for name, g in (generators or {}).items():
                tensors[f"rng.gen.{name}"] = g.get_state()
            write_synced(tmp / "optim.safetensors", save(tensors))
            meta["optimizer"] = optim_meta
        write_synced(tmp / "state.json", json.dumps(meta, indent=1, default=float))
        if final.exists():  # the same step written again (a resumed run): replace it
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:  # a full disk, a second Ctrl-C: no half-written checkpoint is left
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if optimizer is not None:  # older resumable checkpoints become weight-only
        for s, p in list_checkpoints(run_dir):
            if s != step and (p / "optim.safetensors").exists():
                (p / "optim.safetensors").unlink()
    return final


def read_state(path: Path) -> dict[str, Any]:
    try:
        return json.loads((Path(path) / "state.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"corrupt checkpoint {path}: {exc}") from None


def load_weights(model: torch.nn.Module, path: Path) -> None:
    """Load ``model.safetensors`` from checkpoint folder ``path`` into ``model`` (strict)."""
    f = Path(path) / "model.safetensors"
    if not f.is_file():
        raise CheckpointError(f"missing checkpoint weights: {f}")
    try:
        weights = load_file(str(f))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"corrupt checkpoint weights {f}: {exc}") from None
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"checkpoint {f} does not fit this model: {exc}") from None


def load_resume(path: Path, model, optimizer, generators: dict[str, torch.Generator]) -> dict[str, Any]:
    """Restore model, optimizer and RNG states from a resumable checkpoint; returns its state."""
    meta = read_state(path)
    if not meta.get("resumable"):
        raise CheckpointError(f"checkpoint {path} is not resumable (weights only)")
    load_weights(model, path)
    try:
        tensors = load_file(str(Path(path) / "optim.safetensors"))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"corrupt optimizer state in {path}: {exc}") from None
    _restore_optim(optimizer, {k: v for k, v in tensors.items() if k.startswith("state.")}, meta["optimizer"])
    torch.set_rng_state(tensors["rng.torch_cpu"])
    for name, g in generators.items():
        g.set_state(tensors[f"rng.gen.{name}"])
    return meta


def latest_resumable(run_dir: Path) -> Path | None:
    """The newest checkpoint a run resumes from (with its optimizer's state), or None."""
    found = resumable_steps(run_dir)
    return checkpoint_dir(run_dir, found[-1]) if found else None


def resumable_steps(run_dir: Path) -> list[int]:
    """The steps of the run's resumable checkpoints, in order."""
    return [s for s, p in list_checkpoints(run_dir) if (p / "optim.safetensors").is_file()]


def log_spaced_steps(total: int, n: int) -> list[int]:
    """Step 0, ``n`` geometrically spaced steps in [1, total] (rounded, duplicates merged), and ``total``."""
    if total <= 0:
        return [0]
    steps = {0, total}
    if n > 0:
        for i in range(1, n + 1):
            s = int(round(math.exp(math.log(total) * i / (n + 1))))
            steps.add(min(max(s, 1), total))
    return sorted(steps)

