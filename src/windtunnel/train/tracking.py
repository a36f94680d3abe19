"""Experiment trackers: a run's metrics, config, evaluation and plots sent to TensorBoard, MLflow
or Weights & Biases as well (``--log tensorboard,mlflow,wandb``; ``train(..., trackers=[...])``).

:func:`parse_trackers` checks the names and imports each tracker's optional extra before anything
is written (a missing one is a :class:`~windtunnel.config.ConfigError` with the install command).
:class:`Tracking` drives one run's adapters (:data:`ADAPTERS`, each a :class:`Tracker`): the
config flattened by :func:`flatten` (``train.lr``) as parameters, every row of ``metrics.jsonl`` at
its step, and at the end the numbers of ``eval.json`` as ``eval/<length>/<metric>``
(:func:`eval_metrics`) at the last step, with ``eval.json`` and the plots as artifacts.
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
import os
import re
import time
import warnings
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from windtunnel.config import ConfigError, require
from windtunnel.files import atomic_write_text

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
# One tracker
# ---------------------------------------------------------------------------------------
class Tracker(Protocol):
    """What the trainer calls; each adapter keeps what a resumed run needs in ``state`` (a dict
    saved in ``tracking.json``), and ``state["final"]`` is set once the evaluation is logged."""

    name: str
    state: dict[str, Any]

    def log_params(self, params: dict[str, Any]) -> None: ...

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None: ...

    def log_artifact(self, path: Path) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class TensorBoardTracker:
    """``torch.utils.tensorboard.SummaryWriter`` in ``<run>/tensorboard``."""

    name = "tensorboard"

    def __init__(self, run_dir: Path, group: Path | None, state: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter

        self.state, self.step = state, state.get("step", 0)
        purge = self.step + 1 if "step" in state else None  # drop what a killed run logged past its last record
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=purge)

    def log_params(self, params: dict[str, Any]) -> None:
        from torch.utils.tensorboard.summary import hparams

        for summary in hparams(params, {}):  # into this run's own events file (add_hparams makes a sub-run)
            self.writer.file_writer.add_summary(summary)
        self.writer.add_text("config", "\n".join(f"    {k} = {v}" for k, v in params.items()))

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.step = max(self.step, step)

    def log_artifact(self, path: Path) -> None:
        if path.suffix == ".png":
            from matplotlib.image import imread

            self.writer.add_image(f"plots/{path.stem}", imread(str(path))[..., :3], self.step, dataformats="HWC")
        else:
            self.writer.add_text(path.name, "    " + path.read_text().replace("\n", "\n    "), self.step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


@contextmanager
def _file_lock(path: Path):
    """An exclusive ``flock`` on ``path`` (the runs of a sweep open one MLflow store at once)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class MLflowTracker:
    """An MLflow run (``MlflowClient``; no global active run), buffered and sent in batches."""

    name = "mlflow"

    def __init__(self, run_dir: Path, group: Path | None, state: dict[str, Any]):
        from mlflow.tracking import MlflowClient

        root = (group or run_dir).resolve()
        given = os.environ.get("MLFLOW_TRACKING_URI")
        uri = given or f"sqlite:///{root / 'mlflow.db'}"
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or (group.name if group else "windtunnel")
        self.state, self.pending, self.params = state, [], []
        with _file_lock(root / ".mlflow.lock"):  # one process creates the database and the experiment
            self.client = MlflowClient(tracking_uri=uri)
            if state.get("run_id") and state.get("tracking_uri") == uri:
                self.run_id = state["run_id"]
                self.client.update_run(self.run_id, status="RUNNING")
                return
            found = self.client.get_experiment_by_name(experiment)
            if found is not None:
                exp_id = found.experiment_id
            else:
                exp_id = self.client.create_experiment(experiment, None if given else (root / "mlartifacts").as_uri())
            run = self.client.create_run(exp_id, run_name=run_dir.name, tags={"windtunnel.run_dir": str(run_dir.resolve())})
        self.run_id = run.info.run_id
        state.update(run_id=self.run_id, tracking_uri=uri, experiment=experiment)

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        self.params = [Param(k, str(v)) for k, v in params.items()]
        self.flush()

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.pending += [Metric(k, float(v), now, step) for k, v in metrics.items()]

    def flush(self) -> None:
        while self.params:  # at most 100 parameters per batch
            self.client.log_batch(self.run_id, params=self.params[:100])
            self.params = self.params[100:]
        while self.pending:  # and 1000 metrics
            batch, self.pending = self.pending[:1000], self.pending[1000:]
            self.client.log_batch(self.run_id, metrics=batch)

    def log_artifact(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path), "plots" if path.parent.name == "plots" else None)

    def close(self) -> None:
        self.flush()
        self.client.set_terminated(self.run_id, "FINISHED" if self.state.get("final") else "KILLED")


class WandbTracker:
    """A W&B run, offline unless ``WANDB_MODE`` says otherwise, its files in ``<run>/wandb``."""

    name = "wandb"

    def __init__(self, run_dir: Path, group: Path | None, state: dict[str, Any]):
        import wandb

        try:
            settings = wandb.Settings(console="off", silent=True, x_disable_stats=True)
        except Exception:  # noqa: BLE001  an older wandb without the stats switch
            settings = wandb.Settings(console="off", silent=True)
        self.state, self.run_dir = state, run_dir
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "windtunnel", dir=str(run_dir), name=run_dir.name,
            group=group.name if group else None, id=state.get("id"), resume="allow" if state.get("id") else None,
            mode=None if os.environ.get("WANDB_MODE") else "offline", settings=settings,
        )
        state["id"] = self.run.id

    def log_params(self, params: dict[str, Any]) -> None:
        self.run.config.update(params, allow_val_change=True)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def log_artifact(self, path: Path) -> None:
        import shutil

        # a copy in the run's files folder (uploaded with the run, by `wandb sync` when offline)
        rel = path.relative_to(self.run_dir) if path.is_relative_to(self.run_dir) else Path(path.name)
        dest = Path(self.run.dir) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.run.finish(exit_code=0 if self.state.get("final") else 1)


ADAPTERS = {"tensorboard": TensorBoardTracker, "mlflow": MLflowTracker, "wandb": WandbTracker}


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
