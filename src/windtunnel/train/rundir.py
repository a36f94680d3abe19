"""One run's folder, opened: its config, checkpoints, model at any checkpoint, metrics and evaluation.

Every command that opens a run folder goes through :class:`RunDir` (``windtunnel train`` and
``eval``, the sweeps, the geometric diagnostics, the report pages), so the folder's layout is
written down once::

    config.json          the resolved RunConfig
    metrics.jsonl        one JSON record per logged step (training loss, held-out probe metrics)
    checkpoints/step_N/  weights (and, for resumable ones, the optimiser and data-stream state)
    eval.json            the evaluation against the exact posterior
"""

from __future__ import annotations

import json
import math
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from windtunnel.config import ConfigError
from windtunnel.files import atomic_write_text
from windtunnel.tasks import Task
from windtunnel.train.build import build
from windtunnel.train.checkpoint import CheckpointError, checkpoint_dir, list_checkpoints, load_weights, read_state
from windtunnel.train.config import RunConfig, read_run_config

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
EVAL_FILE = "eval.json"


class RunDir:
    """A run directory. ``RunDir(path)`` opens it lazily; :meth:`open` checks that it is one."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def is_run(self) -> bool:
        """The folder holds a run (its ``config.json``)."""
        return self.config_path.is_file()

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def eval_path(self) -> Path:
        return self.path / EVAL_FILE

    @classmethod
    def open(cls, path: Path | str, not_a_run: type[Exception] = ConfigError) -> RunDir:
        """The run in ``path``, or ``not_a_run`` raised when ``path`` has no ``config.json``.

        (``windtunnel eval`` raises :class:`~windtunnel.train.checkpoint.CheckpointError` there,
        exit code 3, and the diagnostics :class:`~windtunnel.config.ConfigError`, exit code 2.)
        """
        run = cls(path)
        if not run.is_run():
            raise not_a_run(f"{run.path} is not a run directory (no config.json)")
        return run

    # --- config ------------------------------------------------------------------------
    @cached_property
    def config(self) -> RunConfig:
        return read_run_config(self.config_path)

    def write_config(self, config: RunConfig) -> None:
        """Create the folder with ``config.json``; a folder that holds a run already must hold this
        very config (a :class:`~windtunnel.config.ConfigError` otherwise, and nothing is written)."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.config_path.exists():
            if read_run_config(self.config_path).model_dump(mode="json") != config.model_dump(mode="json"):
                raise ConfigError(
                    f"{self.path} already holds a run with a different config; choose another --out "
                    "(nothing was overwritten)"
                )
        else:
            atomic_write_text(self.config_path, json.dumps(config.model_dump(mode="json"), indent=2))
        self.__dict__["config"] = config

    # --- checkpoints and models --------------------------------------------------------
    def checkpoints(self) -> list[tuple[int, Path]]:
        """``(step, folder)`` of every checkpoint, oldest first."""
        return list_checkpoints(self.path)

    def checkpoint(self, step: int | None = None, purpose: str = "load") -> tuple[int, Path]:
        """``(step, folder)`` of the checkpoint at ``step`` (None: the newest); a
        :class:`~windtunnel.train.checkpoint.CheckpointError` names ``purpose`` when there is none."""
        cks = self.checkpoints()
        if not cks:
            raise CheckpointError(f"{self.path} has no checkpoint to {purpose}")
        if step is None:
            return cks[-1]
        for s, folder in cks:
            if s == step:
                return s, folder
        raise CheckpointError(f"{self.path} has no checkpoint at step {step}; it has steps {[s for s, _ in cks]}")

    def load_model(self, step: int | None = None, purpose: str = "load") -> tuple[Task, torch.nn.Module]:
        """The run's task and its model with the weights of the checkpoint at ``step`` (None: the newest)."""
        _, folder = self.checkpoint(step, purpose)
        task, model = build(self.config)
        load_weights(model, folder)
        return task, model

    def state(self, step: int | None = None) -> dict[str, Any]:
        """The training state saved with the checkpoint at ``step`` (``train_seconds``, ...)."""
        return read_state(self.checkpoint(step)[1])

    # --- metrics and evaluation --------------------------------------------------------
    def metrics(self, upto: float = math.inf) -> list[dict]:
        """The records of ``metrics.jsonl`` up to step ``upto`` (a resumed run drops the later
        ones, which belong to lost work), oldest first; [] before the first is logged. Only
        complete lines count: a line still being appended is not read."""
        if not self.metrics_path.exists():
            return []
        rows = [json.loads(line) for line in self.metrics_path.read_text().split("\n")[:-1] if line.strip()]
        return [r for r in rows if r.get("step", 0) <= upto]

    def eval(self) -> dict[str, Any] | None:
        """``eval.json``, or None before the run is evaluated."""
        return json.loads(self.eval_path.read_text()) if self.eval_path.is_file() else None

    def write_eval(self, result: dict[str, Any]) -> Path:
        atomic_write_text(self.eval_path, json.dumps(result, indent=1))
        return self.eval_path


def branch_run(src: Path | str, step: int, config: RunConfig, dst: Path | str) -> RunDir:
    """A new run in ``dst`` (with ``config``, a variant of the run in ``src``: e.g. a cooldown from
    ``step``) that starts from ``src``'s resumable checkpoint at ``step``: the checkpoint (weights,
    optimizer, random states) and the metrics log up to it are copied, so training ``dst`` goes on
    from there. A ``dst`` that holds this run already is left as it is."""
    import shutil

    out = RunDir(dst)
    if out.is_run():
        out.write_config(config)  # the same config, or a ConfigError
        return out
    ckpt = checkpoint_dir(Path(src), step)
    if not (ckpt / "optim.safetensors").is_file():
        raise CheckpointError(f"{src} has no resumable checkpoint at step {step} to branch from")
    tmp = Path(dst).parent / f".{Path(dst).name}.branching"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(ckpt, tmp / "checkpoints" / ckpt.name)
        rows = RunDir(src).metrics(step)
        atomic_write_text(tmp / METRICS_FILE, "".join(json.dumps(r) + "\n" for r in rows))
        atomic_write_text(tmp / CONFIG_FILE, json.dumps(config.model_dump(mode="json"), indent=2))
        tmp.rename(dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return RunDir(dst)
