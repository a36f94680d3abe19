"""The commands that train: ``train``, ``eval``, ``run`` (the main job), ``sweep``, ``scorecard``
and ``tune``. Each parses its options, calls the library and prints."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from windtunnel.cli.common import (
    SET_HELP,
    Address,
    Backend,
    Jobs,
    Log,
    Profile,
    Quiet,
    Reuse,
    Sets,
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
    from windtunnel.sweep.compare import compare
    from windtunnel.sweep.markdown import comparison_table

    def go():
        how = execution(trackers=trackers, quiet=quiet)
        how = how.but(log=Execution.quiet().log) if quiet else how  # --quiet: no log lines either
        names = tuple(m.strip() for m in models.split(",") if m.strip())
        folder, summary = compare(task, names, profile, parse_overrides(overrides), out, how)
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


@app.command()
def scorecard(
    model: str = typer.Argument(..., help="a registered architecture, or package.module:Class for your own (imports it)"),
    profile: str = typer.Option("quick", "--profile", help="run profile: quick (paper1-quick's budget, 2 CPU cores) or paper"),
    seeds: int = typer.Option(1, "--seeds", min=1, max=100, help="seeds 0..N-1 per run"),
    primitives: str | None = typer.Option(
        None, "--primitives", help="comma-separated subset of accumulation, transport, binding, continuous, sula, "
        "continuous_transport, counting, revision"),
    out: Path | None = typer.Option(None, "--out", help="folder (default runs/sweep-scorecard-<model>-<hash>)"),
    backend: str = typer.Option("local", "--backend", help="local or ray (the model's module must be importable on the workers)"),
    address: Address = None,
    jobs: Jobs = None,
    overrides: Sets = (),
    rungs: bool = typer.Option(True, "--rungs/--no-rungs", help="score the rungs of each tunnel's difficulty ladder, "
                               "or only the profile's own setting"),
    full_ladder: bool = typer.Option(False, "--full-ladder", help="every rung of every ladder (default: search each "
                                     "ladder from the profile's own rung, up while realised, down while not)"),
    tune: bool = typer.Option(True, "--tune/--no-tune", help="tune the learning rate (windtunnel tune) of every model "
                              "whose profile commits none for a tunnel; --no-tune: the profile's lr"),
    search: str = typer.Option("full", "--search", help="how the learning rate is searched: full (every candidate "
                               "trained to the end, the best at the end wins), annealed (annealed comparisons with the "
                               "plateau guard) or halving (the plain successive halving)"),
    lrs: str | None = typer.Option(None, "--lrs", help="the learning rates searched, comma-separated (default "
                                   "1e-3,3.16e-3,1e-2)"),
    full: bool = typer.Option(False, "--full", hidden=True, help="deprecated: --search full (the default)"),
    settle: bool = typer.Option(True, "--settle/--no-settle", help="--search annealed: train to the end the rates the "
                                "search could not rule out (stopped while every rate was on the plateau), so that no "
                                "verdict is left with a ?; --no-settle: the faster search that leaves them marked ?"),
    halving: bool = typer.Option(False, "--halving", hidden=True, help="deprecated: --search halving"),
    finalists: float | None = typer.Option(None, "--finalists", help="--search annealed: every rate within this "
                                           "relative spread of the leader at its last comparison trains to the end "
                                           "(default 0.15)"),
    early_stop: bool = typer.Option(True, "--early-stop/--no-early-stop", help="stop a run once its probe and its full "
                                    "evaluation agree that the primitive is realised"),
    reference: str = typer.Option("auto", "--reference", help="the transformer beside the model: auto (shipped where "
                                  "the profile ships it for these runs, else train), shipped (the package's results), "
                                  "train, none, or a folder holding its runs"),
    model_sets: list[str] = typer.Option([], "--model-set", help="field=value for the scored model's runs alone, "
                                         "on every tunnel, or TUNNEL.field=value on one (e.g. --model-set n_layers=2 "
                                         "--model-set sula.n_layers=1); --set sets every run"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the capacity pre-flight and the planned runs; train "
                                 "and write nothing"),
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
    from windtunnel.report.page import write_report
    from windtunnel.scorecard.preflight import preflight_lines
    from windtunnel.scorecard.score import (
        SCORECARD_FILE,
        ScorecardRequest,
        plan_scorecard,
        run_scorecard,
        scorecard_lines,
    )

    def go():
        how = execution(backend, address, jobs, trackers, reuse, quiet)
        chosen = [p.strip() for p in primitives.split(",") if p.strip()] if primitives is not None else None
        if full or halving:
            typer.echo(f"note: --{'halving' if halving else 'full'} is deprecated: "
                       f"--search {'halving' if halving else 'full'}", err=True)
        request = ScorecardRequest.build(dict(model=model, profile=profile, seeds=seeds, primitives=chosen, rungs=rungs,
                                              full_ladder=full_ladder, tune=tune, settle=settle, finalists=finalists,
                                              search="halving" if halving else "full" if full else search,
                                              lrs=floats_option(lrs, "--lrs", "1e-3,3.16e-3,1e-2"),
                                              early_stop=early_stop, reference=reference,
                                              overrides=list(overrides), model_sets=list(model_sets)),
                                         where="scorecard")
        if request.reference == "auto" and request.model != "transformer" and (why := request.auto_reason()):
            typer.echo(f"note: {why}: the transformer is trained beside {model} (as --reference train)")
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

    _run_errors(go)


@app.command("tune")
def tune_cmd(
    task: str = typer.Argument(..., help="task name (a wind tunnel)"),
    model: str = typer.Argument(..., help="a registered architecture, or package.module:Class; several, "
                                "comma-separated, are searched together (one pool of workers)"),
    profile: str = typer.Option("quick", "--profile", help="run profile (its scorecard's budget applies)"),
    grid: list[str] = typer.Option([], "--grid", help="candidates, e.g. --grid train.lr=1e-4,1e-3,1e-2 "
                                   "--grid train.weight_decay=0,0.1 (default: lr at 1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2)"),
    compare_at: str | None = typer.Option(None, "--compare-at", help="fractions of train.steps at which candidates "
                                          "are compared (default 0.1,0.3)"),
    rungs: str | None = typer.Option(None, "--rungs", hidden=True, help="deprecated: use --compare-at"),
    eta: float = typer.Option(2.0, "--eta", help="keep ceil(n / eta) candidates at each comparison but the last "
                              "(which keeps one)"),
    metric: str | None = typer.Option(None, "--metric", help="probe metric that ranks them: kl_bayes_model, "
                                      "entropy_error or accuracy (default: the task's primitive metric)"),
    full: bool = typer.Option(False, "--full", help="train every candidate to the end (no halving)"),
    cooldown: float | None = typer.Option(None, "--cooldown", help="compare candidates after annealing each over this "
                                          "fraction of the comparison step (default 0.2; 0: as they are)"),
    settle: bool = typer.Option(False, "--settle", help="where every rate is still on the plateau at the last "
                                "comparison, train them all to the end"),
    finalists: float | None = typer.Option(None, "--finalists", help="at the last comparison, train to the end every "
                                           "candidate within this relative spread of the leader (default 0.15)"),
    halving: bool = typer.Option(False, "--halving", help="the plain successive halving (no "
                                 "cooldown, no plateau guard, no ties kept)"),
    out: Path | None = typer.Option(None, "--out", help="folder (default runs/tune-<task>-<model>, or "
                                    "runs/tune-<task> for several models)"),
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
    from windtunnel.report.page import write_report
    from windtunnel.sweep.config import parse_grid_option
    from windtunnel.tune.search import TuneRequest, run_tune

    def go():
        if rungs is not None:
            typer.echo("note: `tune --rungs` is deprecated (ladder rungs are a scorecard's); use --compare-at", err=True)
        option, fractions = ("--compare-at", compare_at) if compare_at is not None else ("--rungs", rungs or "0.1,0.3")
        points = floats_option(fractions, option, "0.1,0.3 (fractions of the run)")
        spec = {"compare_at": points, "eta": eta, "full": full, **({"metric": metric} if metric else {}),
                **({"grid": dict(parse_grid_option(g) for g in grid)} if grid else {})}
        if finalists is not None and (halving or full):
            raise ConfigError(f"--finalists {finalists:g}: the spread of the rates trained to the end after the last "
                              f"comparison; {'--halving' if halving else '--full'} has no such comparison")
        if halving:
            spec["halving"] = True
        elif not full:  # the annealed search: TuneRequest puts SEARCH's settings under these
            spec.update(settle=settle, **({"cooldown": cooldown} if cooldown is not None else {}),
                        **({"finalists": finalists} if finalists is not None else {}))
        models = list(dict.fromkeys(m.strip() for m in model.split(",") if m.strip()))
        request = TuneRequest.build(dict(task=task, models=models, profile=profile, overrides=list(overrides), spec=spec),
                                    where="tune")
        results = run_tune(request, out, execution(jobs=jobs, reuse=reuse))
        for result in results:
            typer.echo("")
            echo_markdown(result.files["markdown"].read_text())
        paths = write_report(out or request.default_out())
        typer.echo("written: " + ", ".join(f"{r.files['json']}, {r.files['csv']}" for r in results) + f", {paths['html']}")

    _run_errors(go)
