"""The adapters of :mod:`windtunnel.train.tracking`, one per experiment tracker (each a
:class:`Tracker`): TensorBoard (``<run>/tensorboard``), MLflow (``MLFLOW_TRACKING_URI``, else
``sqlite:///<root>/mlflow.db``) and W&B (``<run>/wandb``, offline unless ``WANDB_MODE`` is set).
Each imports its package when it is made (the extras are optional)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol


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
