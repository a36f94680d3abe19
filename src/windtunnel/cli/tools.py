"""The commands that look: ``tasks``, ``sample``, ``report``, ``diagnose``, ``export`` and ``llm``.
Each parses its options, calls the library and prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from windtunnel.cli.common import (
    EXTRA,
    SET_HELP,
    Address,
    Backend,
    JsonOut,
    Quiet,
    _run_errors,
    app,
    execution,
    fail,
    parse_params,
    task_params,
)
from windtunnel.cli.terminal import echo_lines, echo_markdown
from windtunnel.config import ConfigError


@app.command()
def tasks(json_out: JsonOut = False) -> None:
    """List the wind tunnels with their parameters, defaults and hypothesis-space size."""
    from windtunnel.tasks import task_names
    from windtunnel.tasks.export import task_lines, task_record

    records = [task_record(name) for name in task_names()]
    if json_out:
        typer.echo(json.dumps(records, indent=2, default=str))
        return
    for r in records:
        echo_lines(task_lines(r))


@app.command(context_settings=EXTRA)
def sample(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="task name (see `windtunnel tasks`)"),
    n: int = typer.Option(2, "--n", min=1, help="number of sequences"),
    seed: int = typer.Option(0, "--seed", help="seed of the generator"),
    split: str = typer.Option("train", "--split", help="data stream: train, eval or probe"),
    preset: str | None = typer.Option(None, "--preset", help="start from a named preset of the task (see `windtunnel tasks`)"),
    profile: str | None = typer.Option(None, "--profile", hidden=True, help="deprecated: use --preset"),
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP + " Here task_params.NAME=value, e.g. --set task_params.V=6"),
    json_out: JsonOut = False,
) -> None:
    """Print sequences with the exact posterior and its entropy at each scored position.

    Task parameters follow as --set task_params.NAME=value or, short, --NAME value, e.g.
    `windtunnel sample bijection --V 6 --L 5`.
    """
    from windtunnel.tasks import make_generator, make_task
    from windtunnel.tasks.export import batch_to_json, format_sequence

    if profile is not None:
        typer.echo("note: `sample --profile` is deprecated (task presets are now called presets); use --preset", err=True)
        preset = preset if preset is not None else profile
    try:
        t = make_task(task, task_params(overrides, ctx.args, f"task '{task}'"), preset=preset)
        batch = t.sample(n, make_generator(seed, split))
    except ConfigError as exc:
        fail(str(exc))
    if json_out:
        doc = {"task": task, "config": t.config.model_dump(), "seed": seed, "split": split, **batch_to_json(t, batch)}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    typer.echo(f"{task} {t.config.model_dump()}  seed={seed} split={split}")
    echo_lines([format_sequence(t, batch, i) for i in range(n)])


@app.command()
def report(
    folder: Path = typer.Argument(..., help="a sweep folder (windtunnel sweep / run) or a run directory (windtunnel train)"),
) -> None:
    """Write one self-contained HTML page (and markdown) of a sweep or a run: tables, plots, geometry."""
    from windtunnel.report.page import write_report

    def go():
        paths = write_report(folder)
        typer.echo(f"written: {paths['html']} (open it in a browser; no server needed) and {paths['markdown']}")

    _run_errors(go)


@app.command()
def diagnose(
    run_dir: Path = typer.Argument(..., help="a run directory made by `windtunnel train` or `windtunnel run`"),
    analyses: str | None = typer.Option(None, "--analyses", help="comma-separated subset (default: all that apply)"),
    seed: int = typer.Option(0, "--seed", help="seed of the probe batch"),
    n_sequences: int = typer.Option(256, "--n", help="probe sequences"),
    threads: int = typer.Option(
        0, "--threads", min=0, help="torch CPU threads (0: torch's default; 1 is faster on a busy machine)"),
    json_out: bool = typer.Option(False, "--json", help="print diagnostics.json"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress output"),
) -> None:
    """Geometric diagnostics of a trained run (Paper I): key frames, attention, value manifold, ablations."""
    from windtunnel.geometry.diagnose import run_diagnostics

    def go():
        import torch

        if threads:
            torch.set_num_threads(threads)
        names = [a.strip() for a in analyses.split(",")] if analyses else None
        result = run_diagnostics(run_dir, names, n_sequences=n_sequences, seed=seed, progress=not quiet)
        if json_out:
            typer.echo(json.dumps(result, indent=1))
        else:
            echo_markdown((run_dir / "diagnostics.md").read_text())
            typer.echo(f"written: {run_dir}/diagnostics.json, {run_dir}/diagnostics.md, plots in {run_dir}/plots/geometry")

    _run_errors(go)


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="a run directory made by `windtunnel train` (a transformer or swa_transformer)"),
    to: str = typer.Option(..., "--to", help="format: transformerlens (a HookedTransformer; needs the transformerlens extra)"),
    out: Path | None = typer.Option(None, "--out", help="folder to write (default RUN_DIR/transformerlens)"),
) -> None:
    """Export a trained model to another library: --to transformerlens writes a HookedTransformer
    (config.json + model.safetensors; load it with windtunnel.interop.transformerlens.load_hooked_transformer).
    """
    from windtunnel.interop.transformerlens import export_run

    def go():
        folder, step = export_run(run_dir, to, out)
        typer.echo(f"written: {folder}/config.json, {folder}/model.safetensors (step {step}); load it with\n"
                   f"  from windtunnel.interop.transformerlens import load_hooked_transformer\n"
                   f"  model = load_hooked_transformer({str(folder)!r})")

    _run_errors(go)


@app.command(context_settings=EXTRA)
def llm(
    models: list[str] | None = typer.Argument(
        None, help="Hugging Face hub ids, local folders or local .gguf files (several: a comparison), then --name value options"),
    analyses: str | None = typer.Option(None, "--analyses", help="comma-separated subset (default: all)"),
    out: Path | None = typer.Option(None, "--out", help="output folder (default runs/llm-<model>, or runs/llm-<comparison>)"),
    config: str | None = typer.Option(
        None, "--config", help="a comparison: shipped (paper3, paper3-offline) or a JSON file; MODELs are added to it"),
    backend: Backend = "local",
    address: Address = None,
    quiet: Quiet = False,
) -> None:
    """Paper III on pretrained causal LMs: value manifold, key frames, attention, SULA, interventions.

    One MODEL: its analyses in --out (llm.json, llm.md, plots). Several, or --config: a comparison,
    each model in its own resumable folder of --out, then table.csv, summary.md and figures side
    by side. Options follow the models as --name value (dtype, device, device_map, ...): see docs/llm.md.
    """
    tokens = list(models or [])
    first_option = next((i for i, t in enumerate(tokens) if t.startswith("--")), len(tokens))
    names, options = tokens[:first_option], tokens[first_option:]

    def go():
        params = parse_params(options, "llm")
        if config is None and len(names) == 1:
            from windtunnel.llm.run import run_llm

            folder = out or Path("runs") / ("llm-" + Path(names[0]).name.replace("/", "_"))
            result = run_llm(names[0], [a.strip() for a in analyses.split(",")] if analyses else None, folder,
                             progress=not quiet, **params)
            summary = folder / "llm.md"
            if summary.exists():
                echo_markdown(summary.read_text())
            typer.echo(f"written: {folder}/llm.json")
            return result
        from windtunnel.llm.compare_config import CompareConfig, load_config
        from windtunnel.sweep.llm_compare import run_comparison

        how = execution(backend, address, quiet=quiet)  # checked before anything is written
        cfg = load_config(config) if config else CompareConfig()
        if analyses:
            cfg = cfg.replace(analyses=analyses)
        folder = out or Path("runs") / f"llm-{cfg.name}"
        summary = run_comparison(cfg, folder, how, cli_options=params, extra_models=names)
        echo_markdown((folder / "summary.md").read_text())
        typer.echo(f"written: {folder}/summary.md, {folder}/table.csv, {folder}/summary.json; page: windtunnel report {folder}")
        if summary["failed"] or summary["missing"]:
            fail(f"{len(summary['failed'])} model(s) failed ({', '.join(summary['failed'])}); the others' results are in "
                 f"{folder}. Run the same command again to retry them.", 4)

    if not names and config is None:
        fail("give a MODEL (or several), or a comparison with --config (shipped: paper3, paper3-offline)")
    _run_errors(go)
