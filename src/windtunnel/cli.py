"""The ``windtunnel`` command."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer

from windtunnel.config import ConfigError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Bayesian wind tunnels: exact posteriors, models, geometry.")

EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


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


@app.command()
def tasks(json_out: bool = typer.Option(False, "--json", help="print one JSON document")) -> None:
    """List the wind tunnels with their parameters, defaults and hypothesis-space size."""
    from windtunnel.tasks import make_task, task_class, task_names

    records = []
    for name in task_names():
        cls = task_class(name)
        task = make_task(name)
        spec = task.spec
        records.append(
            {
                "name": name,
                "description": cls.description,
                "hypothesis_space": str(task.hypothesis_space()),
                "log10_hypotheses": task.hypothesis_space().log10_size,
                "profiles": cls.Config.profiles,
                "baselines": ["bayes", *cls.baseline_names],
                "seq_len": spec.seq_len,
                "scored_positions": spec.n_scored,
                "answer_space": spec.answer_size if spec.output_kind == "categorical" else "real (Gaussian)",
                "parameters": cls.Config.describe_fields(),
            }
        )
    if json_out:
        typer.echo(json.dumps(records, indent=2, default=str))
        return
    for r in records:
        typer.echo(f"{r['name']}: {r['description']}")
        typer.echo(f"  hypothesis space: {r['hypothesis_space']}")
        typer.echo(
            f"  default sequence: {r['seq_len']} positions, {r['scored_positions']} scored, answer space {r['answer_space']}"
        )
        typer.echo(f"  baselines: {', '.join(r['baselines'])}")
        if r["profiles"]:
            typer.echo(f"  profiles: {', '.join(r['profiles'])}")
        for f in r["parameters"]:
            typer.echo(f"    --{f['name']:<18} default {f['default']!s:<14} {f['allowed']:<24} {f['help']}")
        typer.echo("")


@app.command(context_settings=EXTRA)
def sample(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="task name (see `windtunnel tasks`)"),
    n: int = typer.Option(2, "--n", min=1, help="number of sequences"),
    seed: int = typer.Option(0, "--seed", help="seed of the generator"),
    split: str = typer.Option("train", "--split", help="data stream: train, eval or probe"),
    profile: Optional[str] = typer.Option(None, "--profile", help="start from a named profile of the task"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON document"),
) -> None:
    """Print sequences with the exact posterior and its entropy at each scored position.

    Task parameters follow as --name value, e.g. `windtunnel sample bijection --V 6 --L 5`.
    """
    from windtunnel.tasks import make_generator, make_task
    from windtunnel.tasks.export import batch_to_json, format_sequence

    try:
        t = make_task(task, parse_params(ctx.args, f"task '{task}'"), profile=profile)
        batch = t.sample(n, make_generator(seed, split))
    except ConfigError as exc:
        fail(str(exc))
    if json_out:
        doc = {"task": task, "config": t.config.model_dump(), "seed": seed, "split": split, **batch_to_json(t, batch)}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    typer.echo(f"{task} {t.config.model_dump()}  seed={seed} split={split}")
    for i in range(n):
        typer.echo(format_sequence(t, batch, i))


@app.command()
def run() -> None:
    """The main job. (Until training lands: list the tasks and show one sample of each.)"""
    tasks(json_out=False)
    from windtunnel.tasks import make_generator, make_task
    from windtunnel.tasks.export import format_sequence

    for name, params in [("bijection", {"V": 6, "L": 5}), ("sula", {"k": 4})]:
        t = make_task(name, params)
        typer.echo(f"--- sample: {name} {params}")
        typer.echo(format_sequence(t, t.sample(1, make_generator(0)), 0))
