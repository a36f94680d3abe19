"""The commands that train: ``train``, ``eval``, ``run`` (the main job), ``sweep``, ``scorecard``
and ``tune``. Each parses its options, calls the library and prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from windtunnel.cli.common import (
    SET_HELP,
    Address,
    Backend,
    Finalists,
    Jobs,
    Log,
    Lrs,
    Profile,
    Quiet,
    Reuse,
    Search,
    Sets,
    Settle,
    _run_errors,
    app,
    execution,
    floats_option,
)
from windtunnel.cli.terminal import echo_lines, echo_markdown
from windtunnel.config import ConfigError, parse_overrides


@app.command()
def train(
    task: str = typer.Option("bijection", "--task", help="task name"),
    model: str = typer.Option("transformer", "--model", help="architecture name"),
    profile: Profile = "quick",
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP + " e.g. --set train.steps=500 --set model_params.d_model=64"),
    out: Path | None = typer.Option(None, "--out", help="run directory (default runs/<task>-<model>-<hash>)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
    trackers: Log = (),
) -> None:
    """Train one architecture on one wind tunnel (resumes if the run directory has a checkpoint)."""
    from windtunnel.evaluate.record import evaluation_lines
    from windtunnel.train.config import resolve_run
    from windtunnel.train.tracking import Trackers
    from windtunnel.train.trainer import train as run_training
    from windtunnel.train.trainer import write_run_plots

    def go():
        logs = Trackers.parse(trackers)
        cfg = resolve_run(task, model, profile, parse_overrides(overrides))
        run_dir = out or Path("runs") / cfg.run_name()
        typer.echo(f"run directory: {run_dir}")
        res = run_training(cfg, run_dir, progress=not quiet, trackers=logs)
        echo_lines(evaluation_lines(res.eval))
        if not logs:  # the trainer wrote (and logged) them
            write_run_plots(res.run_dir, res.eval)
        typer.echo(f"results: {run_dir}/eval.json, plots in {run_dir}/plots")

    _run_errors(go)


@app.command("eval")
def eval_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory made by `windtunnel train`"),
    json_out: bool = typer.Option(False, "--json", help="print the evaluation as JSON"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
) -> None:
    """Re-evaluate a run's final weights on the held-out stream (writes eval.json and plots)."""
    from windtunnel.evaluate.record import evaluation_lines
    from windtunnel.train.trainer import reevaluate

    def go():
        result, stopped_early = reevaluate(run_dir, progress=not (quiet or json_out))
        if json_out:
            typer.echo(json.dumps(result, indent=1))
            return
        if stopped_early:
            typer.echo(f"note: the run stopped at step {result['steps']} of {stopped_early}; evaluating that checkpoint")
        echo_lines(evaluation_lines(result))

    _run_errors(go)


@app.command()
def run(
    task: str = typer.Option("bijection", "--task", help="task name"),
    models: str = typer.Option("transformer,lstm,mamba,mlp", "--models", help="comma-separated architectures"),
    profile: Profile = "quick",
    overrides: Sets = (),
    out: Path | None = typer.Option(None, "--out", help="output folder (default runs/compare-<task>-<hash>)"),
    quiet: Quiet = False,
    trackers: Log = (),
) -> None:
    """The main job: train several architectures on one wind tunnel, capacity-matched, and compare."""
    from windtunnel.engine.execution import Execution
    from windtunnel.sweep.compare import Comparison, compare
    from windtunnel.sweep.markdown import comparison_table

    def go():
        how = execution(trackers=trackers, quiet=quiet)
        how = how.but(log=Execution.quiet().log) if quiet else how  # --quiet: no log lines either
        names = tuple(m.strip() for m in models.split(",") if m.strip())
        folder, summary = compare(Comparison(task, names, profile), overrides=parse_overrides(overrides), out=out,
                                  execution=how)
        typer.echo("")
        echo_markdown(comparison_table(summary["table"], task))
        typer.echo(f"\nwritten: {folder}/summary.md, {folder}/table.csv, {folder}/calibration.png; "
                   f"page: windtunnel report {folder}")
        typer.echo(str(folder))

    _run_errors(go)


@app.command()
def sweep(
    config: str | None = typer.Argument(None, help="a shipped sweep (paper1, paper1-quick) or a sweep JSON file"),
    out: Path | None = typer.Option(None, "--out", help="sweep folder (default runs/sweep-<name>-<hash>)"),
    backend: Backend = "local",
    address: Address = None,
    jobs: Jobs = None,
    overrides: Sets = (),
    grid: list[str] = typer.Option([], "--grid", help="grid axis, e.g. --grid train.seed=0,1,2 (replaces the sweep's axis)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the run list (and which are finished) without training"),
    json_out: bool = typer.Option(False, "--json", help="with --dry-run: the resolved run configs as JSON"),
    quiet: Quiet = False,
    trackers: Log = (),
    reuse: Reuse = (),
) -> None:
    """Run a grid of runs (tasks x architectures x seeds x any config field) and aggregate the results.

    Finished runs are skipped and interrupted ones resume, so running a sweep again continues it.
    Writes results.csv (a row per run and length), table.csv (means and 95% intervals over seeds),
    summary.md and summary.json; `windtunnel report DIR` turns them into a page.
    """
    from windtunnel.engine.folders import is_finished
    from windtunnel.sweep import expand, load_sweep, run_sweep, sweep_names
    from windtunnel.sweep.config import parse_grid_option
    from windtunnel.sweep.manifest import default_out

    if config is None:
        typer.echo("shipped sweeps: " + ", ".join(sweep_names()) + "\nrun one with `windtunnel sweep NAME`, or pass a JSON file")
        return

    def go():
        how = execution(backend, address, jobs, trackers, reuse, quiet)  # checked before anything is written
        cfg = load_sweep(config)
        pairs = parse_overrides(overrides)
        axes = dict(parse_grid_option(g) for g in grid)
        folder = out or default_out(cfg, overrides)  # named by the --set text as typed
        if dry_run:
            runs = expand(cfg, pairs, axes)
            if json_out:
                typer.echo(json.dumps([r.describe() for r in runs], indent=1))
                return
            for r in runs:
                state = "finished" if is_finished(folder / r.name, r.config) else "to run"
                typer.echo(f"{r.name:<36} {r.experiment:<12} {r.labels}  {r.config.train.steps} steps  [{state}]")
            typer.echo(f"{len(runs)} runs; folder {folder}")
            return
        outcome = run_sweep(cfg, folder, how, overrides=pairs, grid=axes)
        typer.echo("")
        echo_markdown((outcome.out / "summary.md").read_text())
        typer.echo(f"trained {len(outcome.trained)}, skipped {len(outcome.skipped)} finished, in {outcome.seconds:.0f} s")
        typer.echo(f"written: {outcome.out}/table.csv, results.csv, summary.md; page: windtunnel report {outcome.out}")

    _run_errors(go)


# The options of `windtunnel scorecard` alone (those it shares with `tune` are in windtunnel.cli.common).
Primitives = Annotated[str | None, typer.Option("--primitives", help=(
    "comma-separated subset of accumulation, transport, binding, continuous, sula, continuous_transport, counting, "
    "revision"))]
Rungs = Annotated[bool, typer.Option("--rungs/--no-rungs", help=(
    "score the rungs of each tunnel's difficulty ladder, or only the profile's own setting"))]
FullLadder = Annotated[bool, typer.Option("--full-ladder", help=(
    "every rung of every ladder (default: search each ladder from the profile's own rung, up while realised, down "
    "while not)"))]
Tune = Annotated[bool, typer.Option("--tune/--no-tune", help=(
    "tune the learning rate (windtunnel tune) of every model whose profile commits none for a tunnel; --no-tune: the "
    "profile's lr"))]
OldFull = Annotated[bool, typer.Option("--full", hidden=True, help="deprecated: --search full (the default)")]
OldHalving = Annotated[bool, typer.Option("--halving", hidden=True, help="deprecated: --search halving")]
EarlyStop = Annotated[bool, typer.Option("--early-stop/--no-early-stop", help=(
    "stop a run once its probe and its full evaluation agree that the primitive is realised"))]
Reference = Annotated[str, typer.Option("--reference", help=(
    "the transformer beside the model: auto (shipped where the profile ships it for these runs, else train), shipped "
    "(the package's results), train, none, or a folder holding its runs"))]
ModelSet = Annotated[list[str], typer.Option("--model-set", help=(
    "field=value for the scored model's runs alone, on every tunnel, or TUNNEL.field=value on one (e.g. --model-set "
    "n_layers=2 --model-set sula.n_layers=1); --set sets every run"))]
DryRun = Annotated[bool, typer.Option("--dry-run", help=(
    "print the capacity pre-flight and the planned runs; train and write nothing"))]


def search_settings(search: str, lrs: str | None, settle: bool, finalists: float | None, full: bool = False,
                    halving: bool = False) -> dict[str, Any]:
    """The search options of ``scorecard`` and ``tune`` as the fields of
    :class:`~windtunnel.tune.settings.SearchSettings` (which checks them): ``--full`` and
    ``--halving`` name the search as ``--search full`` and ``--search halving`` do."""
    if full and halving:
        raise ConfigError("--full and --halving: choose one search (--search full, annealed or halving)")
    return {"search": "halving" if halving else "full" if full else search, "settle": settle, "finalists": finalists,
            "lrs": floats_option(lrs, "--lrs", "1e-3,3.16e-3,1e-2")}


@app.command()
def scorecard(
    model: str = typer.Argument(..., help="a registered architecture, or package.module:Class for your own (imports it)"),
    profile: str = typer.Option("quick", "--profile", help="run profile: quick (paper1-quick's budget, 2 CPU cores) or paper"),
    seeds: int = typer.Option(1, "--seeds", min=1, max=100, help="seeds 0..N-1 per run"),
    primitives: Primitives = None,
    out: Path | None = typer.Option(None, "--out", help="folder (default runs/sweep-scorecard-<model>-<hash>)"),
    backend: str = typer.Option("local", "--backend", help="local or ray (the model's module must be importable on the workers)"),
    address: Address = None,
    jobs: Jobs = None,
    overrides: Sets = (),
    rungs: Rungs = True,
    full_ladder: FullLadder = False,
    tune: Tune = True,
    search: Search = "full",
    lrs: Lrs = None,
    full: OldFull = False,
    settle: Settle = True,
    halving: OldHalving = False,
    finalists: Finalists = None,
    early_stop: EarlyStop = True,
    reference: Reference = "auto",
    model_sets: ModelSet = (),
    dry_run: DryRun = False,
    quiet: Quiet = False,
    trackers: Log = (),
    reuse: Reuse = (),
) -> None:
    """Which inference primitives an architecture realises, scored against exact posteriors.

    Trains MODEL and the transformer (MODEL capacity-matched to it) on bijection (accumulation),
    HMM (transport), recall (binding), regression (continuous beliefs), SULA, Kalman filtering
    (continuous transport), Dirichlet-categorical draws (counting) and change-points (revision),
    each at the rungs of its difficulty ladder, with the budget of paper1-quick; a model whose
    learning rate the profile does not commit is tuned first (three rates, each trained to the end). Writes
    scorecard.json, the sweep tables and report.html. It is a sweep: run it again to continue,
    `windtunnel report DIR` to redraw the page. First it sizes MODEL on every tunnel (the capacity
    pre-flight, printed); a tunnel it cannot be matched on is left out ("not scored: capacity").
    """
    from windtunnel.scorecard.score import ScorecardRequest

    def go():
        how = execution(backend, address, jobs, trackers, reuse, quiet)
        chosen = [p.strip() for p in primitives.split(",") if p.strip()] if primitives is not None else None
        if full or halving:
            typer.echo(f"note: --{'halving' if halving else 'full'} is deprecated: "
                       f"--search {'halving' if halving else 'full'}", err=True)
        request = ScorecardRequest.build(dict(model=model, profile=profile, seeds=seeds, primitives=chosen, rungs=rungs,
                                              full_ladder=full_ladder, tune=tune, early_stop=early_stop,
                                              lr_search=search_settings(search, lrs, settle, finalists, full, halving),
                                              reference=reference, overrides=list(overrides), model_sets=list(model_sets)),
                                         where="scorecard")
        _score(request, out, how, dry_run)

    _run_errors(go)


def _score(request, out: Path | None, how, dry_run: bool) -> None:
    """``windtunnel scorecard`` of ``request``: the pre-flight, then the plan (``dry_run``) or the
    scorecard, its lines and its page."""
    from windtunnel.report.page import write_report
    from windtunnel.scorecard.preflight import preflight_lines
    from windtunnel.scorecard.score import SCORECARD_FILE, plan_scorecard, run_scorecard, scorecard_lines

    if request.reference == "auto" and request.model != "transformer" and (why := request.auto_reason()):
        typer.echo(f"note: {why}: the transformer is trained beside {request.model} (as --reference train)")
    plan = plan_scorecard(request)
    if dry_run:
        echo_lines(plan.lines(out))
        return
    echo_lines(preflight_lines(plan.sizings))
    result = run_scorecard(request, out, how, plan)
    paths = write_report(result.out)
    typer.echo("")
    echo_lines(scorecard_lines(result.doc))
    typer.echo(f"written: {result.out / SCORECARD_FILE}, {paths['html']}")


# The options of `windtunnel tune` alone (those it shares with `scorecard` are in windtunnel.cli.common).
TuneModels = Annotated[str, typer.Argument(help=(
    "a registered architecture, or package.module:Class; several, comma-separated, are searched together (one pool "
    "of workers)"))]
TuneGrid = Annotated[list[str], typer.Option("--grid", help=(
    "candidates, e.g. --grid train.lr=1e-4,1e-3,1e-2 --grid train.weight_decay=0,0.1 (default: lr at 1e-4, 3.16e-4, "
    "1e-3, 3.16e-3, 1e-2)"))]
CompareAt = Annotated[str | None, typer.Option("--compare-at", help=(
    "fractions of train.steps at which candidates are compared (default 0.1,0.3)"))]
OldRungs = Annotated[str | None, typer.Option("--rungs", hidden=True, help="deprecated: use --compare-at")]
Eta = Annotated[float, typer.Option("--eta", help=(
    "keep ceil(n / eta) candidates at each comparison but the last (which keeps one)"))]
Metric = Annotated[str | None, typer.Option("--metric", help=(
    "probe metric that ranks them: kl_bayes_model, entropy_error or accuracy (default: the task's primitive metric)"))]
Full = Annotated[bool, typer.Option("--full", help="train every candidate to the end (no halving): --search full")]
Cooldown = Annotated[float | None, typer.Option("--cooldown", help=(
    "compare candidates after annealing each over this fraction of the comparison step (default 0.2; 0: as they are)"))]
Halving = Annotated[bool, typer.Option("--halving", help=(
    "the plain successive halving (no cooldown, no plateau guard, no ties kept): --search halving"))]
TuneOut = Annotated[Path | None, typer.Option("--out", help=(
    "folder (default runs/tune-<task>-<model>, or runs/tune-<task> for several models)"))]


@app.command("tune")
def tune_cmd(
    task: str = typer.Argument(..., help="task name (a wind tunnel)"),
    model: TuneModels = ...,
    profile: str = typer.Option("quick", "--profile", help="run profile (its scorecard's budget applies)"),
    grid: TuneGrid = (),
    compare_at: CompareAt = None,
    rungs: OldRungs = None,
    eta: Eta = 2.0,
    metric: Metric = None,
    search: Search = "annealed",
    lrs: Lrs = None,
    full: Full = False,
    cooldown: Cooldown = None,
    settle: Settle = False,
    finalists: Finalists = None,
    halving: Halving = False,
    out: TuneOut = None,
    jobs: Jobs = None,
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP),
    reuse: Reuse = (),
) -> None:
    """Tune a training setting (the learning rate by default) of an architecture on one tunnel:
    successive halving, every candidate scored by the held-out probe, the winner trained to the end.

    The same protocol tunes every architecture, the transformer included, and `windtunnel
    scorecard` runs it for a model whose profile commits no learning rate. Several models
    (comma-separated) are searched together, each stage's candidates sharing the workers. Writes
    tune-<task>-<model>.json/.csv/.md per model and one run folder per candidate.
    """
    from windtunnel.sweep.config import parse_grid_option
    from windtunnel.tune.search import TuneRequest
    from windtunnel.tune.settings import SearchSettings

    def go():
        if rungs is not None:
            typer.echo("note: `tune --rungs` is deprecated (ladder rungs are a scorecard's); use --compare-at", err=True)
        option, fractions = ("--compare-at", compare_at) if compare_at is not None else ("--rungs", rungs or "0.1,0.3")
        settings = SearchSettings.build(search_settings(search, lrs, settle, finalists, full, halving), where="tune")
        spec = settings.named(compare_at=floats_option(fractions, option, "0.1,0.3 (fractions of the run)"), eta=eta,
                              **({"metric": metric} if metric else {}),
                              **({"grid": dict(parse_grid_option(g) for g in grid)} if grid else {}),
                              **({"cooldown": cooldown} if cooldown is not None and settings.search == "annealed" else {}))
        models = list(dict.fromkeys(m.strip() for m in model.split(",") if m.strip()))
        request = TuneRequest.build(dict(task=task, models=models, profile=profile, overrides=list(overrides), spec=spec),
                                    where="tune")
        _tune(request, out, execution(jobs=jobs, reuse=reuse))

    _run_errors(go)


def _tune(request, out: Path | None, how) -> None:
    """``windtunnel tune`` of ``request``: its searches, their tables and the page."""
    from windtunnel.report.page import write_report
    from windtunnel.tune.search import run_tune

    results = run_tune(request, out, how)
    for result in results:
        typer.echo("")
        echo_markdown(result.files["markdown"].read_text())
    paths = write_report(out or request.default_out())
    typer.echo("written: " + ", ".join(f"{r.files['json']}, {r.files['csv']}" for r in results) + f", {paths['html']}")
