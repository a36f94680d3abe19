"""The ``windtunnel`` command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from windtunnel.config import ConfigError, parse_overrides

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Bayesian wind tunnels: exact posteriors, models, geometry.")

EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
SET_HELP = "override a config field: section.field=value (value read as JSON when it parses, else as text)."
REUSE_HELP = ("a folder (another sweep or scorecard) whose runs of this one, finished or paused, are copied in "
              "rather than trained again (the same folder name and config); repeat it for several")
JOBS_HELP = ("local backend: runs at once, each in its own process (N, or auto: the cores divided by the runs' "
             "train.threads); default: the sweep's jobs (1 unless it says)")
LOG_HELP = ("log to an experiment tracker as well: tensorboard, mlflow or wandb (repeat it or separate by commas); "
            "each is an extra (make setup EXTRAS=tensorboard); see docs/interop.md")


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


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
                "presets": cls.Config.presets,
                "profiles": cls.Config.presets,  # deprecated name of "presets", kept for existing readers
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
        if r["presets"]:
            typer.echo(f"  presets: {', '.join(r['presets'])}")
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
    preset: str | None = typer.Option(None, "--preset", help="start from a named preset of the task (see `windtunnel tasks`)"),
    profile: str | None = typer.Option(None, "--profile", hidden=True, help="deprecated: use --preset"),
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP + " Here task_params.NAME=value, e.g. --set task_params.V=6"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON document"),
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
        params = task_params(overrides, ctx.args, f"task '{task}'")
        t = make_task(task, params, preset=preset)
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


@app.command()
def train(
    task: str = typer.Option("bijection", "--task", help="task name"),
    model: str = typer.Option("transformer", "--model", help="architecture name"),
    profile: str = typer.Option("quick", "--profile", help="config profile: quick (CPU, minutes) or paper"),
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP + " e.g. --set train.steps=500 --set model_params.d_model=64"),
    out: Path | None = typer.Option(None, "--out", help="run directory (default runs/<task>-<model>-<hash>)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
    trackers: list[str] = typer.Option([], "--log", help=LOG_HELP),
) -> None:
    """Train one architecture on one wind tunnel (resumes if the run directory has a checkpoint)."""
    from windtunnel.train.config import resolve_run
    from windtunnel.train.tracking import parse_trackers
    from windtunnel.train.trainer import train as run_training
    from windtunnel.train.trainer import write_run_plots

    def go():
        names = parse_trackers(trackers)
        cfg = resolve_run(task, model, profile, parse_overrides(overrides))
        run_dir = out or Path("runs") / cfg.run_name()
        typer.echo(f"run directory: {run_dir}")
        res = run_training(cfg, run_dir, progress=not quiet, trackers=names)
        _print_eval(res.eval, res.n_params, res.steps, res.train_seconds)
        if not names:  # the trainer wrote (and logged) them
            write_run_plots(res.run_dir, res.eval)
        typer.echo(f"results: {run_dir}/eval.json, plots in {run_dir}/plots")

    _run_errors(go)


@app.command("eval")
def eval_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory made by `windtunnel train`"),
    json_out: bool = typer.Option(False, "--json", help="print the evaluation as JSON"),
) -> None:
    """Re-evaluate a run's final weights on the held-out stream (writes eval.json and plots)."""
    from windtunnel.train.checkpoint import CheckpointError
    from windtunnel.train.rundir import RunDir
    from windtunnel.train.trainer import evaluate_run, write_run_plots

    def go():
        run = RunDir.open(run_dir, not_a_run=CheckpointError)
        cfg = run.config
        step, _ = run.checkpoint(purpose="evaluate")
        task, model = run.load_model(step)
        state = run.state(step)
        result = evaluate_run(model, task, cfg)
        result.update(n_params=model.n_params(), steps=step, train_seconds=state.get("train_seconds", 0.0))
        run.write_eval(result)
        write_run_plots(run_dir, result)
        if json_out:
            typer.echo(json.dumps(result, indent=1))
        else:
            if step < cfg.train.steps:
                typer.echo(f"note: the run stopped at step {step} of {cfg.train.steps}; evaluating that checkpoint")
            _print_eval(result, result["n_params"], step, result["train_seconds"])

    _run_errors(go)


def _print_eval(ev: dict, n_params: int, steps: int, seconds: float) -> None:
    typer.echo(f"{n_params:,} parameters, {steps} steps, {seconds:.0f} s of training")
    for L, s in ev["lengths"].items():
        name = f"{ev['length_field']}={L}" if ev["length_field"] else "eval"
        e = s["entropy_error_mean_abs"]
        line = f"  {name}: entropy error {e['value']:.4f} bits [{e['lo']:.4f}, {e['hi']:.4f}]"
        line += f", KL(Bayes||model) {s['kl_bayes_model']['value']:.4f} bits"
        if "accuracy" in s:
            line += f", accuracy {s['accuracy']['value']:.3f}"
        typer.echo(line)
        for b, v in ev["baselines"][L].items():
            typer.echo(f"      baseline {b}: entropy error {v['entropy_error_mean_abs']:.4f} bits")


@app.command()
def run(
    task: str = typer.Option("bijection", "--task", help="task name"),
    models: str = typer.Option("transformer,lstm,mamba,mlp", "--models", help="comma-separated architectures"),
    profile: str = typer.Option("quick", "--profile", help="config profile"),
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP + " For every run, e.g. --set train.steps=500"),
    out: Path | None = typer.Option(None, "--out", help="output folder (default runs/compare-<task>-<hash>)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
    trackers: list[str] = typer.Option([], "--log", help=LOG_HELP),
) -> None:
    """The main job: train several architectures on one wind tunnel, capacity-matched, and compare."""
    from windtunnel.sweep.compare import compare
    from windtunnel.sweep.markdown import comparison_table
    from windtunnel.train.tracking import parse_trackers

    def go():
        logs = parse_trackers(trackers)
        names = tuple(m.strip() for m in models.split(",") if m.strip())
        folder, summary = compare(task, names, profile, parse_overrides(overrides), out, progress=not quiet,
                                  trackers=logs)
        typer.echo("")
        typer.echo(comparison_table(summary["table"], task))
        typer.echo(f"\nwritten: {folder}/summary.md, {folder}/table.csv, {folder}/calibration.png; "
                   f"page: windtunnel report {folder}")
        typer.echo(str(folder))

    _run_errors(go)


@app.command()
def sweep(
    config: str | None = typer.Argument(None, help="a shipped sweep (paper1, paper1-quick) or a sweep JSON file"),
    out: Path | None = typer.Option(None, "--out", help="sweep folder (default runs/sweep-<name>-<hash>)"),
    backend: str = typer.Option("local", "--backend", help="local (this machine) or ray"),
    address: str | None = typer.Option(
        None, "--address", help="Ray cluster to join (e.g. auto or ray://host:10001); default: start a local Ray"),
    jobs: str | None = typer.Option(None, "--jobs", help=JOBS_HELP),
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP + " For every run, e.g. --set train.steps=500"),
    grid: list[str] = typer.Option([], "--grid", help="grid axis, e.g. --grid train.seed=0,1,2 (replaces the sweep's axis)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the run list (and which are finished) without training"),
    json_out: bool = typer.Option(False, "--json", help="with --dry-run: the resolved run configs as JSON"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
    trackers: list[str] = typer.Option([], "--log", help=LOG_HELP),
    reuse: list[Path] = typer.Option([], "--reuse", help=REUSE_HELP),
) -> None:
    """Run a grid of runs (tasks x architectures x seeds x any config field) and aggregate the results.

    Finished runs are skipped and interrupted ones resume, so running a sweep again continues it.
    Writes results.csv (a row per run and length), table.csv (means and 95% intervals over seeds),
    summary.md and summary.json; `windtunnel report DIR` turns them into a page.
    """
    from windtunnel.sweep import expand, load_sweep, run_sweep, sweep_names
    from windtunnel.sweep.config import parse_grid_option, parse_jobs
    from windtunnel.sweep.run import check_backend, default_out, is_finished
    from windtunnel.train.tracking import parse_trackers

    if config is None:
        typer.echo("shipped sweeps: " + ", ".join(sweep_names()) + "\nrun one with `windtunnel sweep NAME`, or pass a JSON file")
        return

    def go():
        # every argument is checked before anything is written (run_sweep checks the runs, jobs and
        # the backend again, and starts or joins Ray, before it makes the folder)
        check_backend(backend)
        logs = parse_trackers(trackers)
        if jobs is not None:
            parse_jobs(jobs)
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
        outcome = run_sweep(cfg, folder, backend=backend, address=address, overrides=pairs, grid=axes,
                            progress=not quiet, log=typer.echo, jobs=jobs, trackers=logs, reuse=reuse)
        typer.echo("")
        typer.echo((outcome.out / "summary.md").read_text())
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
    address: str | None = typer.Option(None, "--address", help="Ray cluster to join"),
    jobs: str | None = typer.Option(None, "--jobs", help=JOBS_HELP),
    overrides: list[str] = typer.Option([], "--set", help="override for every run, e.g. --set train.steps=500"),
    rungs: bool = typer.Option(True, "--rungs/--no-rungs", help="score every rung of each tunnel's difficulty ladder, "
                               "or only the profile's own setting"),
    tune: bool = typer.Option(True, "--tune/--no-tune", help="tune the learning rate (windtunnel tune) of every model "
                              "whose profile commits none for a tunnel; --no-tune: the profile's lr"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
    trackers: list[str] = typer.Option([], "--log", help=LOG_HELP + " (the scored runs; not the tuning's candidates)"),
    reuse: list[Path] = typer.Option([], "--reuse", help=REUSE_HELP),
) -> None:
    """Which inference primitives an architecture realises, scored against exact posteriors.

    Trains MODEL and the transformer (MODEL capacity-matched to it) on bijection (accumulation),
    HMM (transport), recall (binding), regression (continuous beliefs), SULA, Kalman filtering
    (continuous transport), Dirichlet-categorical draws (counting) and change-points (revision),
    each at the rungs of its difficulty ladder, with the budget of paper1-quick; a model whose
    learning rate the profile does not commit is tuned first (the same protocol as every built-in). Writes
    scorecard.json, the sweep tables and report.html. It is a sweep: run it again to continue,
    `windtunnel report DIR` to redraw the page.
    """
    from windtunnel.report.page import write_report
    from windtunnel.sweep import expand, run_sweep
    from windtunnel.sweep.config import parse_jobs
    from windtunnel.sweep.run import backend_session, check_backend, check_reuse, default_out
    from windtunnel.sweep.scorecard import (
        SCORECARD_FILE,
        scorecard_cautions,
        scorecard_sweep,
        tune_scorecard,
        write_scorecard,
    )
    from windtunnel.train.tracking import parse_trackers

    def go():
        # every argument is checked before anything is written (the tuning writes first)
        check_backend(backend)
        logs = parse_trackers(trackers)
        chosen = [p.strip() for p in primitives.split(",") if p.strip()] if primitives is not None else None
        pairs = parse_overrides(overrides)
        if jobs is not None:
            parse_jobs(jobs)
        if tune and any(k == "train.lr" for k, _ in pairs):
            raise ConfigError("--set train.lr=... fixes the learning rate that the scorecard would tune; add --no-tune")
        cfg = scorecard_sweep(model, profile, seeds, chosen, rungs)
        expand(cfg, pairs)  # the model and the --set overrides, on every run
        folder = out or default_out(cfg, overrides)
        check_reuse(reuse, folder)
        with backend_session(backend, address):  # a Ray cluster that cannot be started or joined, too
            tuned = None
            if tune:
                tuned = tune_scorecard(model, folder, profile, chosen, pairs, jobs, log=typer.echo, reuse=reuse)
                cfg = scorecard_sweep(model, profile, seeds, chosen, rungs, tuned)
            outcome = run_sweep(cfg, folder, backend=backend, address=address,
                                overrides=pairs, progress=not quiet, log=typer.echo, jobs=jobs, trackers=logs,
                                reuse=reuse)
        summary = json.loads((outcome.out / "summary.json").read_text())
        doc = write_scorecard(outcome.out, summary, cfg, model, tuned, pairs)
        paths = write_report(outcome.out)
        typer.echo("")
        for prim, row in doc["primitives"].items():
            cells = [f"{who}: " + (f"{r['verdict']} {r['score']:.2f}" if r and r.get("score") is not None else "-")
                     for who, r in (("model", row["model"]), ("transformer", row["transformer"]))]
            highest = [f"{who}: {doc['highest'][name].get(prim) or 'none'}" for who, name in
                       (("model", model), ("transformer", "transformer")) if len(doc["ladder"][prim]) > 1]
            typer.echo(f"{prim:<13} ({row['task']}, {row['metric']}): " + "; ".join(cells)
                       + (f"  [highest rung realised: {'; '.join(highest)}]" if highest else ""))
            for c in scorecard_cautions(row):
                typer.echo(f"  caution: {c}")
        typer.echo(f"written: {outcome.out / SCORECARD_FILE}, {paths['html']}")

    _run_errors(go)


@app.command("tune")
def tune_cmd(
    task: str = typer.Argument(..., help="task name (a wind tunnel)"),
    model: str = typer.Argument(..., help="a registered architecture, or package.module:Class; several, "
                                "comma-separated, are searched together (one pool of workers)"),
    profile: str = typer.Option("quick", "--profile", help="run profile (its scorecard's budget applies)"),
    grid: list[str] = typer.Option([], "--grid", help="candidates, e.g. --grid train.lr=1e-4,1e-3,1e-2 "
                                   "--grid train.weight_decay=0,0.1 (default: lr at 1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2)"),
    rungs: str = typer.Option("0.1,0.3", "--rungs", help="fractions of train.steps at which candidates are compared"),
    eta: float = typer.Option(2.0, "--eta", help="keep ceil(n / eta) candidates at each rung but the last (which keeps one)"),
    metric: str | None = typer.Option(None, "--metric", help="probe metric that ranks them: kl_bayes_model, "
                                         "entropy_error or accuracy (default: the task's primitive metric)"),
    full: bool = typer.Option(False, "--full", help="train every candidate to the end (no halving)"),
    out: Path | None = typer.Option(None, "--out", help="folder (default runs/tune-<task>-<model>, or "
                                    "runs/tune-<task> for several models)"),
    jobs: str | None = typer.Option(None, "--jobs", help=JOBS_HELP),
    overrides: list[str] = typer.Option([], "--set", help=SET_HELP),
    reuse: list[Path] = typer.Option([], "--reuse", help=REUSE_HELP),
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
    from windtunnel.sweep.scorecard import budget_jobs, task_metric, tune_configs
    from windtunnel.sweep.tune import TuneSpec, tune_many_in_folder, tune_name

    def go():
        try:
            fractions = [float(x) for x in rungs.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--rungs {rungs!r}: comma-separated fractions of the run, e.g. 0.1,0.3") from None
        spec_doc = {"rungs": fractions, "eta": eta, "full": full, "metric": metric or task_metric(task)}
        if grid:
            spec_doc["grid"] = dict(parse_grid_option(g) for g in grid)
        spec = TuneSpec.build(spec_doc, where="tune")
        models = list(dict.fromkeys(m.strip() for m in model.split(",") if m.strip()))
        if not models:
            raise ConfigError(f"model {model!r}: name an architecture (several: comma-separated)")
        bases = tune_configs(task, models, profile, parse_overrides(overrides))
        n = budget_jobs(profile, jobs, bases)
        folder = out or Path("runs") / (tune_name(task, models[0], full) if len(models) == 1
                                        else f"tune-{task}" + ("-full" if full else ""))
        results = tune_many_in_folder([(b, spec) for b in bases], folder, n, typer.echo, reuse)
        for result in results:
            typer.echo("")
            typer.echo(result.files["markdown"].read_text())
        paths = write_report(folder)
        typer.echo("written: " + ", ".join(f"{r.files['json']}, {r.files['csv']}" for r in results) + f", {paths['html']}")

    _run_errors(go)


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
            typer.echo((run_dir / "diagnostics.md").read_text())
            typer.echo(f"written: {run_dir}/diagnostics.json, {run_dir}/diagnostics.md, plots in {run_dir}/plots/geometry")

    _run_errors(go)


EXPORT_FORMATS = ("transformerlens",)


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="a run directory made by `windtunnel train` (a transformer or swa_transformer)"),
    to: str = typer.Option(..., "--to", help="format: transformerlens (a HookedTransformer; needs the transformerlens extra)"),
    out: Path | None = typer.Option(None, "--out", help="folder to write (default RUN_DIR/transformerlens)"),
) -> None:
    """Export a trained model to another library: --to transformerlens writes a HookedTransformer
    (config.json + model.safetensors; load it with windtunnel.interop.transformerlens.load_hooked_transformer).
    """

    def go():
        # every argument is checked (and the HookedTransformer built once) before anything is written
        if to not in EXPORT_FORMATS:
            raise ConfigError(f"--to {to!r}: unknown format; allowed: {', '.join(EXPORT_FORMATS)}")
        from windtunnel.interop.transformerlens import check_exportable, require_hooked_transformer, save_hooked_transformer
        from windtunnel.train.rundir import RunDir

        run = RunDir.open(run_dir)
        step, _ = run.checkpoint(purpose="export")
        _, model = run.load_model(step)
        check_exportable(model)
        require_hooked_transformer()
        folder = save_hooked_transformer(model.eval(), out or run_dir / "transformerlens")
        typer.echo(f"written: {folder}/config.json, {folder}/model.safetensors (step {step}); load it with\n"
                   f"  from windtunnel.interop.transformerlens import load_hooked_transformer\n"
                   f"  model = load_hooked_transformer({str(folder)!r})")

    _run_errors(go)


@app.command(context_settings=EXTRA)
def llm(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Hugging Face hub id, local folder or local .gguf file"),
    analyses: str | None = typer.Option(None, "--analyses", help="comma-separated subset (default: all)"),
    out: Path | None = typer.Option(None, "--out", help="output folder (default runs/llm-<model>)"),
) -> None:
    """Paper III on a pretrained causal LM: value manifold, key frames, attention, SULA, interventions.

    Options follow as --name value (dtype, device, device_map, trust_remote_code, ...):
    see docs/llm.md.
    """
    from windtunnel.llm.run import run_llm

    def go():
        names = [a.strip() for a in analyses.split(",")] if analyses else None
        folder = out or Path("runs") / ("llm-" + Path(model).name.replace("/", "_"))
        result = run_llm(model, names, folder, **parse_params(ctx.args, "llm"))
        summary = folder / "llm.md"
        if summary.exists():
            typer.echo(summary.read_text())
        typer.echo(f"written: {folder}/llm.json")
        return result

    _run_errors(go)


def main() -> None:  # pragma: no cover
    app()
