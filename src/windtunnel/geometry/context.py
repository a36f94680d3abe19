"""Shared inputs of every analysis: the run, its models (final and step 0), a fixed probe batch
and the activations captured once per model.

An analysis is a function of a :class:`Context`; it asks for ``ctx.acts("final")`` or
``ctx.acts("init")`` and gets the same :class:`Activations` every time (captured on the first
request). Activations that only matter at the scored positions are stored there only
((B, P, ...)); attention patterns are kept whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from windtunnel.config import ConfigError
from windtunnel.evaluate.evaluator import task_bayes
from windtunnel.models.base import LAYER_STATE
from windtunnel.tasks.base import Batch, Prediction, Task, make_generator
from windtunnel.train.build import build
from windtunnel.train.checkpoint import load_weights
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir


@dataclass
class Activations:
    """One model's activations on the probe batch.

    ``logits`` (B, P, O) at the scored positions; ``states`` maps ``embed``, every per-layer
    residual/hidden state (``blocks.{i}.resid_post``) and ``final`` to (B, P, d) tensors at the
    scored positions; models with attention (``model.has_attention``) add ``patterns[i]``
    (B, H, T, T), ``q[i]``/``k[i]`` (B, H, P, dh) at the scored positions and ``attn_out[i]``
    (B, P, d): what layer i's attention writes into the residual stream
    (``model.attention_output``, W_O of the concatenated heads)."""

    logits: torch.Tensor
    states: dict[str, torch.Tensor]
    patterns: dict[int, torch.Tensor] = field(default_factory=dict)
    q: dict[int, torch.Tensor] = field(default_factory=dict)
    k: dict[int, torch.Tensor] = field(default_factory=dict)
    attn_out: dict[int, torch.Tensor] = field(default_factory=dict)

    @property
    def layer_names(self) -> list[str]:
        return [n for n in self.states if LAYER_STATE.match(n)]


CAPABILITIES = {"has_attention": "no attention", "has_head_ablation": "no head mask or block bypass",
                "has_recurrent_state": "no recurrent state"}


def missing(model, capability: str) -> str | None:
    """None when ``model`` has ``capability`` (a boolean of the model contract: ``has_attention``,
    ``has_head_ablation``, ``has_recurrent_state``), else a skip reason that names it."""
    if getattr(model, capability, False):
        return None
    return f"{CAPABILITIES.get(capability, 'not ' + capability)} (model.{capability} is False)"


def attention_layers(model) -> int:
    """Number of attention layers of a model with ``has_attention`` (0 without)."""
    return sum(1 for n in model.capture_names() if n.endswith(".attn.pattern")) if model.has_attention else 0


@torch.no_grad()
def capture(model, batch: Batch, chunk: int = 128, full: bool = True) -> Activations:
    """Run ``model`` on ``batch`` once (in chunks of sequences) and keep what the analyses use.

    ``full=False`` keeps only the logits, the ``final`` state and the attention patterns (what
    the training-dynamics analysis needs at every checkpoint)."""
    model.eval()
    state_names = ["embed", *model.layer_state_names(), "final"] if full else ["final"]
    names = list(state_names)
    n_layers = attention_layers(model)
    if n_layers:
        for i in range(n_layers):
            names += [f"blocks.{i}.attn.{k}" for k in (("pattern", "q", "k", "z") if full else ("pattern",))]
    pos = batch.positions
    parts: dict[str, list[torch.Tensor]] = {}
    logits = []
    for start in range(0, batch.size, chunk):
        x = batch.inputs[start : start + chunk]
        out, cache = model.run_with_cache(x, names, positions=pos)
        logits.append(out.float())
        T = x.shape[1]
        for name, v in cache.items():
            if name.endswith(".pattern"):
                parts.setdefault(name, []).append(v.float())
            elif name.endswith((".q", ".k")):
                parts.setdefault(name, []).append(v[:, :, pos].float())
            elif name.endswith(".z"):
                i = int(name.split(".")[1])
                z = v[:, :, pos].transpose(1, 2).reshape(v.shape[0], len(pos), -1)
                parts.setdefault(f"attn_out.{i}", []).append(model.attention_output(i, z).float())
            else:  # (B, T, d) states, or (B, P, d) when the model computes only the scored positions
                parts.setdefault(name, []).append((v[:, pos] if v.shape[1] == T else v).float())
    cat = {k: torch.cat(v) for k, v in parts.items()}
    acts = Activations(logits=torch.cat(logits), states={n: cat[n] for n in state_names if n in cat})
    for i in range(n_layers):
        if f"blocks.{i}.attn.pattern" in cat:
            acts.patterns[i] = cat[f"blocks.{i}.attn.pattern"]
        if f"blocks.{i}.attn.q" in cat:
            acts.q[i], acts.k[i] = cat[f"blocks.{i}.attn.q"], cat[f"blocks.{i}.attn.k"]
            acts.attn_out[i] = cat[f"attn_out.{i}"]
    return acts


def probe_batch(task: Task, n_sequences: int, seed: int) -> Batch:
    """The fixed probe batch: ``n_sequences`` from the task's ``probe`` stream of ``seed``."""
    if not isinstance(n_sequences, int) or n_sequences < 2:
        raise ConfigError(f"n_sequences must be an integer >= 2, got {n_sequences!r}")
    return task.sample(n_sequences, make_generator(seed, "probe"))


class Context:
    """A run opened for diagnosis: config, task, final and initial models, probe batch, caches."""

    def __init__(self, run_dir: Path | str, n_sequences: int = 256, seed: int = 0):
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise ConfigError(f"{self.run_dir} is not a directory; pass a run directory made by `windtunnel train`")
        self.run = RunDir.open(self.run_dir)
        self.config: RunConfig = self.run.config
        self.checkpoints = self.run.checkpoints()
        self.step, _ = self.run.checkpoint(purpose="diagnose (checkpoints/step_*/ is empty)")
        self.task, self.model = self.run.load_model(self.step)
        self.model.eval()
        self.seed = int(seed)
        self.n_sequences = int(n_sequences)
        self.batch = probe_batch(self.task, n_sequences, seed)
        self._init_model = None
        self.init_source = ""
        self._acts: dict[str, Activations] = {}

    # --- models ------------------------------------------------------------------------
    def fresh_model(self, seed: int | None = None):
        """A model of the run's architecture with its seeded initial weights (``seed``: another
        draw from the same initialisation law; default the run's ``train.seed``)."""
        config = self.config if seed is None else self.config.replace(train=self.config.train.replace(seed=seed))
        return build(config)[1].eval()

    @property
    def init_model(self):
        """The step-0 checkpoint (or, when the run has none, the seeded initialisation it had)."""
        if self._init_model is None:
            model = self.fresh_model()
            if self.checkpoints[0][0] == 0:
                load_weights(model, self.checkpoints[0][1])
                self.init_source = "checkpoint step 0"
            else:
                self.init_source = f"re-initialised from train.seed = {self.config.train.seed} (no step-0 checkpoint)"
            self._init_model = model.eval()
        return self._init_model

    def model_for(self, which: str):
        if which == "final":
            return self.model
        if which == "init":
            return self.init_model
        raise ValueError(f"which must be 'final' or 'init', got {which!r}")

    def acts(self, which: str = "final") -> Activations:
        if which not in self._acts:
            self._acts[which] = capture(self.model_for(which), self.batch)
        return self._acts[which]

    # --- labels ------------------------------------------------------------------------
    @property
    def bayes(self) -> Prediction:
        return task_bayes(self.batch)

    @property
    def h_bayes(self) -> torch.Tensor:
        """(B, P) exact posterior entropy in bits at every scored position."""
        return self.batch.entropy

    @property
    def groups(self) -> torch.Tensor:
        """(B * P,) sequence index of every scored point (so probes split by sequence)."""
        B, P = self.batch.entropy.shape
        return torch.arange(B).repeat_interleave(P)

    @property
    def point_positions(self) -> torch.Tensor:
        """(B * P,) index of the scored position of every point (0..P-1)."""
        B, P = self.batch.entropy.shape
        return torch.arange(P).repeat(B)

    def describe(self) -> dict[str, Any]:
        return {"run_dir": str(self.run_dir), "run_name": self.config.run_name(), "task": self.config.task,
                "model": self.config.model, "step": int(self.step), "n_params": int(self.model.n_params()),
                "checkpoints": [int(s) for s, _ in self.checkpoints],
                "probe": {"split": "probe", "seed": self.seed, "n_sequences": self.n_sequences,
                          "n_positions": int(self.batch.positions.numel()),
                          "n_points": int(self.batch.entropy.numel())}}


def flat(x: torch.Tensor) -> torch.Tensor:
    """(B, P, ...) -> (B * P, ...)."""
    return x.reshape(-1, *x.shape[2:])
