"""A search's candidates and what it returns: :class:`Candidate` (one grid point and its run, as
``tune-*.json`` records it), :class:`TuneResult`, :class:`TuneError`, and the runs a candidate is
(:func:`candidate_configs`, the cooldown branches of :func:`branch_config`) and trains
(:func:`train_to`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError
from windtunnel.sweep.expand import grid_points
from windtunnel.train.config import RunConfig, apply_overrides
from windtunnel.train.decide import Decision, Race
from windtunnel.train.rundir import RunDir


class TuneError(ConfigError):
    """A search whose every candidate failed: ``errors`` ((task, model) -> why); the searches run
    beside it finished (``results``, their tables written)."""

    def __init__(self, message: str, results: list[TuneResult], errors: dict[tuple[str, str], str]):
        super().__init__(message)
        self.results, self.errors = results, errors


@dataclass
class Candidate:
    """One point of a search's grid and its run: its probe at each comparison it reached
    (``scores``: step -> value), its probe KL at the last one (the tie-break), and its status:
    ``running``, ``stopped at step N``, ``failed`` (with ``error``), ``finished`` or ``winner``
    (with ``eval``, its evaluation's headline numbers)."""

    point: dict[str, Any]
    config: RunConfig
    scores: dict[int, float | None] = field(default_factory=dict)
    status: str = "running"
    kl: float | None = None
    error: str | None = None
    eval: dict[str, float] | None = None
    annealed: dict[int, float | None] = field(default_factory=dict)  #: the probe after the cooldown from each comparison
    probe_score: dict[int, float | None] = field(default_factory=dict)  #: the primitive score the comparison read

    @property
    def run(self) -> str:
        return self.config.run_name()

    def to_json(self) -> dict[str, Any]:
        """As ``tune-*.json`` records it."""
        doc = {"point": self.point, "run": self.run, "scores": self.scores, "status": self.status}
        if self.error is not None:
            doc["error"] = self.error
        doc["kl"] = self.kl
        if self.eval is not None:
            doc["eval"] = self.eval
        if self.annealed:
            doc["annealed"] = self.annealed
        if self.probe_score:
            doc["probe_score"] = self.probe_score
        return doc


@dataclass
class TuneResult:
    task: str
    model: str
    metric: str
    rung_steps: list[int]  #: the steps at which candidates were compared, then the end
    candidates: list[dict[str, Any]]  #: each :class:`Candidate` as ``tune-*.json`` records it
    winner: dict[str, Any]
    seconds: float = 0.0
    cautions: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    together: int = 1  # searches run together (tune_many): ``seconds`` is then the wall time of them all
    unsettled: list[dict[str, Any]] = field(default_factory=list)  #: grid points stopped while the guard held

    @property
    def best(self) -> dict[str, Any]:
        """The winning grid point (``{"train.lr": 0.001}``)."""
        return dict(self.winner["point"])


def branch_config(config: RunConfig, step: int, cooldown: float) -> RunConfig:
    """The cooldown branch of a candidate at comparison ``step``: its run, annealed from ``step`` over
    ``cooldown`` x ``step`` steps (at least one)."""
    doc = config.model_dump(mode="json")
    doc["train"]["cooldown"] = {"at": step, "steps": max(1, round(cooldown * step))}
    return RunConfig.build(doc, where="cooldown branch")


def candidate_configs(base: RunConfig, grid: dict[str, list[Any]]) -> list[tuple[dict[str, Any], RunConfig]]:
    """(grid point, run config) for every point of ``grid`` applied to ``base``."""
    out = []
    for point in grid_points(grid):
        doc = apply_overrides(base.model_dump(mode="json"), list(point.items()))
        out.append((point, RunConfig.build(doc, where=f"tune candidate {point}")))
    return out


def train_to(config: dict[str, Any], run_dir: str, stop_at: int | None, decide: Decision | None = None,
             race: str | None = None) -> None:
    """Train (or resume) one candidate to ``stop_at`` (None: to the end, then evaluate; ``decide``:
    stopping early where the probe and the evaluation agree that the primitive is realised;
    ``race``: the file of its search's race, where it pauses once a rival was decided first)."""
    from windtunnel.train.trainer import Until, train

    train(RunConfig.build(config, where="run"), Path(run_dir), progress=False,
          until=Until(stop_at, decide, Race(Path(race)) if race else None))


def eval_of(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``eval.json`` (None: none yet, or a folder that is not a run)."""
    try:
        return RunDir(run_dir).eval()
    except (OSError, ValueError):
        return None


def reached(run_dir: Path, config: RunConfig, stop_at: int | None, decide: Decision | None) -> bool:
    """Training ``run_dir`` to ``stop_at`` would do nothing: it is finished (``stop_at`` None: its
    end, or an early decision under the rule ``decide`` itself), or it resumes from ``stop_at`` or later."""
    from windtunnel.train.checkpoint import resumable_steps
    from windtunnel.train.decide import decided

    if stop_at is None:
        ev = eval_of(run_dir)
        return ev is not None and (ev.get("steps", -1) >= config.train.steps or decide is not None and decided(ev, decide))
    steps = resumable_steps(run_dir)
    return bool(steps) and steps[-1] >= stop_at
