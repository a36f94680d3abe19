"""``run_diagnostics``: every geometric analysis that applies to a run, with its nulls.

Analyses are named units over one shared :class:`~windtunnel.geometry.context.Context` (the
run's final and step-0 models and the activations they produce on one fixed probe batch). Each
analysis module, named as its analysis, declares one :class:`~windtunnel.analysis.Analysis`
record (``applies(ctx)``, ``run(ctx)``, ``markdown(result, doc)``, ``plot(result, doc, out)``,
whether it needs the activations);
:data:`REGISTRY` holds them in the order they run.
Results go to ``diagnostics.json`` (numbers, nulls and tests per analysis; skipped analyses
with the reason), ``diagnostics.md`` (short tables) and ``plots/geometry/*.png`` in the run
directory.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from threadpoolctl import threadpool_limits

from windtunnel.analysis import AnalysisRegistry
from windtunnel.config import ConfigError
from windtunnel.files import atomic_write_text, jsonable
from windtunnel.geometry import ablation, attention, dynamics, filter_probe, key_frame, logit_lens, recurrent, value_manifold
from windtunnel.geometry.context import Context
from windtunnel.geometry.markdown import render
from windtunnel.progress import progress_bar

#: every analysis, in the order they run and are written (a new analysis: one module with an
#: ``ANALYSIS`` record, named here)
REGISTRY = AnalysisRegistry([key_frame.ANALYSIS, attention.ANALYSIS, value_manifold.ANALYSIS, ablation.ANALYSIS,
                             logit_lens.ANALYSIS, dynamics.ANALYSIS, recurrent.ANALYSIS, filter_probe.ANALYSIS])
#: the names of the built-in analyses, in the order they run
ANALYSES: tuple[str, ...] = tuple(REGISTRY.names())
DEFAULT_N_SEQUENCES = 256


def parse_analyses(analyses: list[str] | str | None) -> list[str] | None:
    """Validate a list (or comma-separated string) of analysis names; None means all."""
    return None if analyses is None else REGISTRY.parse(analyses)


def run_diagnostics(run_dir: Path | str, analyses: list[str] | None = None,
                    n_sequences: int = DEFAULT_N_SEQUENCES, seed: int = 0, progress: bool = True,
                    strict: bool = True) -> dict:
    """Diagnose the run in ``run_dir``: every analysis in ``analyses`` (None: all that apply).

    Writes ``diagnostics.json``, ``diagnostics.md`` and ``plots/geometry/*.png`` into the run
    directory and returns the JSON document as a dict. ``n_sequences`` sequences from the
    task's probe stream of ``seed`` form the fixed probe batch. An unknown analysis name, or one
    asked for explicitly that does not apply to the run's architecture or task, is a
    :class:`~windtunnel.config.ConfigError` (with ``strict=False`` it is skipped); with
    ``analyses=None`` such analyses are skipped and the reason is recorded. A missing or unreadable run raises ConfigError or
    :class:`~windtunnel.train.checkpoint.CheckpointError`.
    """
    wanted = parse_analyses(analyses)
    t_start = time.perf_counter()
    ctx = Context(run_dir, n_sequences=n_sequences, seed=seed)
    todo, skipped = _applicable(ctx, wanted, strict)
    # a bar over the capture, each analysis and the plots (the analyses' times are in diagnostics.json)
    capture = any(REGISTRY.get(name).needs_activations for name in todo)
    bar = progress_bar(len(todo) + 1 + capture, desc="diagnose", enabled=progress, unit="analysis")
    t_setup = time.perf_counter() - t_start
    results, timings = _analyse(ctx, todo, capture, bar)
    doc: dict[str, Any] = {**ctx.describe(), "analyses_run": todo, "skipped": skipped,
                           "init_weights": ctx.init_source or None, "results": results}
    doc = jsonable(doc)
    out_dir = ctx.run_dir / "plots" / "geometry"
    bar.set_postfix(now="plots")
    t0 = time.perf_counter()
    paths = REGISTRY.plot_all(doc, out_dir)
    timings["plots"] = time.perf_counter() - t0
    bar.update()
    bar.close()
    timings["setup"] = t_setup
    timings["total"] = time.perf_counter() - t_start
    doc["plots"] = [str(p.relative_to(ctx.run_dir)) for p in paths]
    doc["seconds"] = jsonable(timings)
    atomic_write_text(ctx.run_dir / "diagnostics.json", json.dumps(doc, indent=1, allow_nan=False))
    atomic_write_text(ctx.run_dir / "diagnostics.md", render(doc, REGISTRY))
    return doc


def _applicable(ctx: Context, wanted: list[str] | None, strict: bool) -> tuple[list[str], dict[str, str]]:
    """(the analyses to run, {skipped analysis: why}): of ``wanted`` (None: all), those that apply to
    the run; one asked for by name that does not is a ConfigError when ``strict``."""
    todo, skipped = [], {}
    for name in wanted if wanted is not None else REGISTRY.names():
        reason = REGISTRY.get(name).applies(ctx)
        if reason is None:
            todo.append(name)
        elif wanted is not None and strict:
            raise ConfigError(f"analysis '{name}' does not apply to this run "
                              f"({ctx.config.task}/{ctx.config.model}): {reason}")
        else:
            skipped[name] = reason
    return todo, skipped


def _analyse(ctx: Context, todo: list[str], capture: bool, bar: Any) -> tuple[dict[str, Any], dict[str, float]]:
    """Run the analyses ``todo`` (after capturing the activations once, when ``capture``): their
    results and seconds, by name."""
    results, timings = {}, {}
    # numpy's matrices here are small (d x d); a multithreaded BLAS gains nothing on them and
    # stalls badly (30x measured) when the cores are busy, so it runs single-threaded
    with torch.no_grad(), threadpool_limits(1, user_api="blas"):
        if capture:  # capture once, timed on its own
            bar.set_postfix(now="capture")
            t0 = time.perf_counter()
            ctx.acts("final"), ctx.acts("init")
            timings["capture"] = time.perf_counter() - t0
            bar.update()
        for name in todo:
            bar.set_postfix(now=name)
            t0 = time.perf_counter()
            results[name] = REGISTRY.get(name).run(ctx)
            timings[name] = time.perf_counter() - t0
            bar.update()
    return results, timings
