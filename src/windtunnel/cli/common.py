"""What the commands share: the app, the options several commands take (declared once), the
:class:`~windtunnel.engine.execution.Execution` of those options, and the exit codes of errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from windtunnel.config import ConfigError, parse_overrides

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Bayesian wind tunnels: exact posteriors, models, geometry.")

EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
SET_HELP = "override a config field: section.field=value (value read as JSON when it parses, else as text)."

# The options several commands share, declared once.
Sets = Annotated[list[str], typer.Option("--set", help=SET_HELP + " For every run, e.g. --set train.steps=500")]
Profile = Annotated[str, typer.Option("--profile", help="run profile: quick (CPU, minutes) or paper")]
Quiet = Annotated[bool, typer.Option("--quiet", help="no progress bars")]
Backend = Annotated[str, typer.Option("--backend", help="local (this machine) or ray")]
Address = Annotated[str | None, typer.Option(
    "--address", help="Ray cluster to join (e.g. auto or ray://host:10001); default: start a local Ray")]
Jobs = Annotated[str | None, typer.Option("--jobs", help=(
    "local backend: runs at once, each in its own process (N, or auto: the cores divided by the runs' train.threads); "
    "default: the sweep's jobs (1 unless it says)"))]
Log = Annotated[list[str], typer.Option("--log", help=(
    "log to an experiment tracker as well: tensorboard, mlflow or wandb (repeat it or separate by commas); "
    "each is an extra (make setup EXTRAS=tensorboard); see docs/interop.md"))]
Reuse = Annotated[list[Path], typer.Option("--reuse", help=(
    "a folder (another sweep or scorecard) whose runs of this one, finished or paused, are copied in rather than "
    "trained again (the same folder name and config); repeat it for several"))]
JsonOut = Annotated[bool, typer.Option("--json", help="print one JSON document")]

# The learning-rate search's options (windtunnel.tune.settings.SearchSettings), shared by `windtunnel scorecard`
# and `windtunnel tune` (each with its own defaults).
Search = Annotated[str, typer.Option("--search", help=(
    "how the learning rate is searched: full (every candidate trained to the end, the best at the end wins), "
    "annealed (annealed comparisons with the plateau guard) or halving (the plain successive halving)"))]
Lrs = Annotated[str | None, typer.Option("--lrs", help=(
    "the learning rates searched, comma-separated (default: 1e-3,3.16e-3,1e-2 for scorecard, the five of --grid for "
    "tune)"))]
Settle = Annotated[bool, typer.Option("--settle/--no-settle", help=(
    "--search annealed: train to the end the rates the search could not rule out (stopped while every rate was on "
    "the plateau), so that no verdict is left with a ?; --no-settle: the faster search that leaves them marked ?"))]
Finalists = Annotated[float | None, typer.Option("--finalists", help=(
    "--search annealed: every rate within this relative spread of the leader at its last comparison trains to the "
    "end (default 0.15)"))]


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def floats_option(text: str | None, option: str, example: str) -> list[float] | None:
    """A comma-separated list of numbers given to ``option`` (None: not given)."""
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{option} {text!r}: comma-separated numbers, e.g. {example}") from None


def execution(backend: str = "local", address: str | None = None, jobs: str | None = None, trackers: list[str] = (),
              reuse: list[Path] = (), quiet: bool = False):
    """The :class:`~windtunnel.engine.execution.Execution` of a command's options (checked here, once)."""
    from windtunnel.engine.execution import Execution

    return Execution(backend=backend, address=address, workers=jobs, trackers=list(trackers), reuse=list(reuse),
                     progress=not quiet, log=typer.echo)


def task_params(overrides: list[str], args: list[str], where: str) -> dict[str, Any]:
    """A task's parameters from ``--set task_params.NAME=value`` items and the short ``--NAME value``
    form (sugar for the same; given both, the short form wins as it comes last on the line)."""
    out: dict[str, Any] = {}
    for key, value in parse_overrides(overrides):
        section, dot, name = key.partition(".")
        if section != "task_params" or not dot or not name or "." in name:
            raise ConfigError(f"--set {key}=...: {where} takes task_params.NAME=value (e.g. task_params.V=6)")
        out[name] = value
    return {**out, **parse_params(args, where)}


def parse_params(args: list[str], where: str) -> dict[str, Any]:
    """``--name value`` / ``--name=value`` pairs (the task's or model's own fields) to a dict.

    Values stay strings (or JSON where they parse as a list/dict); the pydantic config does
    the type conversion and names any bad field.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--") or len(a) <= 2:
            fail(f"unexpected argument {a!r} for {where}; parameters are given as --name value")
        name, eq, value = a[2:].partition("=")
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                fail(f"parameter --{name} for {where} needs a value")
            value = args[i + 1]
            i += 1
        if value[:1] in "[{":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        out[name.replace("-", "_")] = value
        i += 1
    return out


def _run_errors(fn):
    """Run ``fn`` and turn the errors a user can cause into a message and an exit code:
    2 bad input or a folder another process writes, 3 an unreadable checkpoint, 4 training or
    sweep failures, 5 a full disk, 130 / 143 stopped by SIGINT / SIGTERM (resumable)."""
    from windtunnel.files import DiskFullError
    from windtunnel.interrupt import Interrupted, command_line
    from windtunnel.lock import FolderLocked
    from windtunnel.sweep.run import SweepError
    from windtunnel.train.checkpoint import CheckpointError
    from windtunnel.train.trainer import TrainingError

    try:
        return fn()
    except (ConfigError, FolderLocked) as exc:
        fail(str(exc), 2)
    except CheckpointError as exc:
        fail(str(exc), 3)
    except (TrainingError, SweepError) as exc:
        fail(str(exc), 4)
    except DiskFullError as exc:
        fail(str(exc), 5)
    except Interrupted as exc:
        typer.echo(f"{exc}\nto resume, run the same command again: {command_line()}", err=True)
        raise typer.Exit(exc.exit_code) from None

