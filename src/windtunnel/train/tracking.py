"""Experiment trackers: a run's metrics, config, evaluation and plots sent to TensorBoard, MLflow
or Weights & Biases as well (``--log tensorboard,mlflow,wandb``; ``train(..., trackers=[...])``).

:func:`parse_trackers` checks the names and imports each tracker's optional extra before anything
is written (a missing one is a :class:`~windtunnel.config.ConfigError` with the install command).
:class:`Tracking` drives one run's adapters (:data:`~windtunnel.train.trackers.ADAPTERS`, each a
:class:`~windtunnel.train.trackers.Tracker`): the config flattened by :func:`flatten` (``train.lr``)
as parameters, every row of ``metrics.jsonl`` at its step, and at the end the numbers of ``eval.json``
as ``eval/<length>/<metric>`` (:func:`eval_metrics`) at the last step, with ``eval.json`` and the plots as artifacts.
TensorBoard writes ``<run>/tensorboard/``; MLflow ``MLFLOW_TRACKING_URI``, else
``sqlite:///<root>/mlflow.db``; W&B ``<run>/wandb/``, offline unless ``WANDB_MODE`` is set
(``<root>``: the sweep folder for the runs of a sweep, else the run folder).

A resumed run goes on logging to the same place: ``<run>/tracking.json`` (:data:`STATE`) keeps
each tracker's last logged step and the MLflow and W&B run ids; rows already logged are not sent
again, and a tracker first named on a trained run gets its whole history. A tracker that fails
never stops or loses the run: the failure is warned once and that tracker is off for the rest of
the run. Where each tool writes and the settings it reads: docs/interop.md, "Experiment trackers".
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError, require
from windtunnel.files import atomic_write_text
from windtunnel.train.trackers import ADAPTERS

#: tracker name -> (module to import, extra that installs it)
TRACKERS: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
}
STATE = "tracking.json"


@dataclass(frozen=True)
class Trackers:
    """The experiment trackers runs log to, checked once (:meth:`parse`), and the group their runs
    share (the sweep folder, for a sweep's runs). False when it names none."""

    names: tuple[str, ...] = ()
    group: str | None = None

    @classmethod
    def parse(cls, names: Trackers | str | Iterable[str] | None, group: Path | str | None = None) -> Trackers:
        """``names`` checked by :func:`parse_trackers` (a :class:`Trackers` is taken as it is)."""
        found = names if isinstance(names, Trackers) else cls(parse_trackers(names))
        return found if group is None else cls(found.names, str(group))

    def __bool__(self) -> bool:
        return bool(self.names)


def parse_trackers(names: Trackers | str | Iterable[str] | None) -> tuple[str, ...]:
    """``"tensorboard,mlflow"`` or ``["tensorboard", "mlflow,wandb"]`` (``--log`` repeated or
    comma-separated) -> the names, once each, in order. An unknown name or a tracker whose extra
    is not installed is a :class:`ConfigError` (with the install command); nothing is written.
    :class:`Trackers` were checked when they were made: their names are returned as they are."""
    if isinstance(names, Trackers):
        return names.names
    if names is None:
        return ()
    items = [names] if isinstance(names, str) else list(names)
    out: list[str] = []
    for item in items:
        for name in (n.strip().lower() for n in str(item).split(",")):
            if not name or name in out:
                continue
            if name not in TRACKERS:
                raise ConfigError(f"--log {name!r}: unknown tracker; allowed: {', '.join(TRACKERS)}")
            out.append(name)
    for name in out:
        module, extra = TRACKERS[name]
        require(module, extra, f"--log {name}")
    return tuple(out)


def flatten(doc: Mapping[str, Any], prefix: str = "", sep: str = ".") -> dict[str, Any]:
    """Nested dicts to one level (``{"train": {"lr": 1e-3}}`` -> ``{"train.lr": 1e-3}``); numbers,
    text and booleans stay, anything else (lists, None) becomes its JSON text."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten(value, name, sep))
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value)
    return out


def eval_metrics(ev: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of an ``eval.json`` as flat metric names: ``eval/<length>/<metric>`` (the value
    of an interval; ``.../lo`` and ``.../hi`` its ends), ``eval/<length>/baseline/<name>/<metric>``
    and ``eval/n_params``, ``eval/steps``, ``eval/train_seconds``. Per-position curves are left to
    the plots."""
    out: dict[str, float] = {}

    def walk(x: Any, path: list[str]) -> None:
        if isinstance(x, Mapping):
            for k, v in x.items():
                walk(v, [*path, str(k)])
        elif isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
            if path and path[-1] == "value":
                path = path[:-1]
            out[re.sub(r"[^\w./\- ]", "_", "/".join(["eval", *path]))] = float(x)

    lengths = ev.get("lengths", {})
    for length, summary in lengths.items():
        walk({k: v for k, v in summary.items() if k not in ("curves", "step")}, [str(length)])
    for length, baselines in ev.get("baselines", {}).items():
        walk(baselines, [str(length), "baseline"])
    walk({k: v for k, v in ev.items() if k not in ("lengths", "baselines", "main_length")}, [])
    return out


# ---------------------------------------------------------------------------------------
# All of a run's trackers
# ---------------------------------------------------------------------------------------
class Tracking:
    """The trackers of one run, each call guarded: a tracker that raises is warned about once and
    switched off; the run goes on. ``Tracking([], ...)`` does nothing and writes nothing."""

    def __init__(self, trackers: Trackers | Iterable[str], run_dir: Path | str, adapters: Mapping[str, Any] | None = None):
        trackers = Trackers.parse(trackers)
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STATE
        self.names, group = trackers.names, trackers.group
        self.state: dict[str, dict[str, Any]] = {}
        self.active: list[Any] = []
        if not self.names:
            return
        try:
            self.state = json.loads(self.path.read_text()) if self.path.is_file() else {}
        except (OSError, ValueError):
            self.state = {}
        adapters = adapters or ADAPTERS
        for name in self.names:
            state = self.state.setdefault(name, {})
            try:
                self.active.append(adapters[name](self.run_dir, Path(group) if group is not None else None, state))
            except Exception as exc:  # noqa: BLE001  a tracker that cannot start must not stop the run
                self._warn(name, "could not start", exc)

    def __bool__(self) -> bool:
        return bool(self.names)

    def _warn(self, name: str, what: str, exc: BaseException) -> None:
        warnings.warn(f"--log {name}: {what} ({type(exc).__name__}: {exc}); logging to {name} is off for the rest "
                      f"of this run, which goes on (metrics.jsonl holds every row)", RuntimeWarning, stacklevel=3)

    def _each(self, what: str, fn) -> None:
        for t in list(self.active):
            try:
                fn(t)
            except Exception as exc:  # noqa: BLE001  see the class docstring
                self.active.remove(t)
                self._warn(t.name, f"{what} failed", exc)
                if what != "closing":
                    try:
                        t.close()
                    except Exception:  # noqa: BLE001  it failed already; the warning says so
                        pass

    def _save(self) -> None:
        if self.names:
            try:
                atomic_write_text(self.path, json.dumps(self.state, indent=1))
            except OSError as exc:
                warnings.warn(f"{self.path} not written ({exc}); a resumed run may log some rows twice",
                              RuntimeWarning, stacklevel=3)

    def start(self, params: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        """The config (once per tracker), then the rows of ``metrics.jsonl`` a tracker has not had."""

        def params_once(t):
            if not t.state.get("params"):
                t.log_params(params)
                t.state["params"] = True

        self._each("logging the config", params_once)
        self.log_rows(rows)

    def log_rows(self, rows: list[dict[str, Any]]) -> None:
        """Rows of ``metrics.jsonl`` (each with its ``step``), as written to it."""

        def send(t):
            last = t.state.get("step", 0)
            new = [r for r in rows if r["step"] > last]
            for r in new:
                t.log_metrics(r["step"], {k: float(v) for k, v in r.items()
                                          if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)})
            t.flush()
            if new:
                t.state["step"] = new[-1]["step"]

        if self.active and rows:
            self._each("logging metrics", send)
            self._save()

    def finish(self, step: int, ev: Mapping[str, Any], files: Iterable[Path]) -> None:
        """The evaluation as metrics at ``step`` and ``files`` (eval.json, plots) as artifacts, once."""
        files = [Path(f) for f in files if Path(f).is_file()]

        def send(t):
            if t.state.get("final"):
                return
            t.log_metrics(step, eval_metrics(ev))
            for f in files:
                t.log_artifact(f)
            t.flush()
            t.state["final"] = True

        if self.active:
            self._each("logging the evaluation", send)
            self._save()

    def close(self) -> None:
        self._each("closing", lambda t: t.close())
        self.active = []
        self._save()
