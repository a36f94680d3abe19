"""One pass of the analyses over one model into a folder (:func:`analyse`), the model's run or a
control's, and the finished run a folder already holds (:func:`finished_run`); ``run_llm``
(:mod:`windtunnel.llm.run`) runs the model's pass and its controls'."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

from windtunnel import __version__
from windtunnel.files import jsonable
from windtunnel.llm.config import LLMOptions
from windtunnel.progress import progress_bar


def finished_run(folder: Path, analyses: list[str], opts: LLMOptions) -> dict | None:
    """``folder/llm.json`` when it is a finished run with these analyses and options (None when
    there is none, or it never finished writing); a finished run of other settings is an error:
    nothing is overwritten. Which model it is, the caller checks (a comparison's folder is its model)."""
    from windtunnel.config import ConfigError

    path = Path(folder) / "llm.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        return None
    want, have = opts.model_dump(mode="json"), doc.get("options", {})
    differ = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
    if doc.get("analyses") != analyses:
        differ.insert(0, "analyses")
    if differ:
        raise ConfigError(f"{folder} holds a run with other settings ({', '.join(differ)}); choose another --out or "
                          "remove that folder (nothing was overwritten)")
    return doc


def analyse(model: str, names: list[str], out: Path, opts: LLMOptions, *, progress: bool = False, **load) -> dict:
    """One pass of the analyses ``names`` over ``model`` (``load``: :func:`~windtunnel.llm.loading.load_model`'s
    ``revision`` or ``reinit_seed``, for a control) into ``out``: llm.json, plots and llm.md; ``progress``:
    a bar over loading and each analysis."""
    from windtunnel.files import atomic_write_text
    from windtunnel.llm.analyses import REGISTRY
    from windtunnel.llm.loading import load_model
    from windtunnel.llm.memory import PeakMemory
    from windtunnel.llm.report import render
    from windtunnel.llm.session import Session, strip_boot
    from windtunnel.llm.verdict import criteria

    t0 = time.perf_counter()
    desc = Path(model).name + (" (control)" if load else "")
    bar = progress_bar(len(names) + 1, desc=desc, enabled=progress, unit="analysis")
    with PeakMemory() as peak:
        bar.set_postfix(now="load")
        lm = load_model(model, opts, **load)  # estimates the memory first and refuses a model that would not fit
        load_s = time.perf_counter() - t0
        bar.update()
        out.mkdir(parents=True, exist_ok=True)  # once the model loads: a bad one writes nothing
        sess = Session(lm=lm, opts=opts, analyses=names, name=model)
        timing: dict[str, float] = {"load_s": load_s}
        for name in names:
            bar.set_postfix(now=name)
            t = time.perf_counter()
            sess.results[name] = REGISTRY.get(name).run(sess)
            timing[f"{name}_s"] = time.perf_counter() - t
            bar.update()
    bar.close()
    timing.update(sess.timing)
    timing.update(peak.result())
    timing["total_s"] = time.perf_counter() - t0
    timing["prompts_run"] = sess.n_prompts_run
    timing["prompts_per_s"] = sess.n_prompts_run / sess.timing["forward_s"] if sess.timing.get("forward_s") else None
    results = strip_boot(sess.results)  # the bootstrap arrays kept for differences
    if "value_manifold" in results and "domain_restriction" in results:
        results["domain_restriction"]["mixed"] = {"same_as": "value_manifold"}
    doc = {
        "windtunnel_version": __version__, "kind": "llm", "model": lm.info, "analyses": names,
        "options": opts.model_dump(mode="json"), "results": results,
        "criteria": criteria(results, opts),
        "timing": timing, "platform": {"python": platform.python_version(), "machine": platform.machine()},
    }
    lm.close()
    doc = jsonable(doc)
    atomic_write_text(out / "llm.json", json.dumps(doc, indent=1, allow_nan=False))
    plots = []
    if opts.plots:
        plots = [p.name for p in REGISTRY.plot_all(doc, out)]
    doc["plots"] = plots
    atomic_write_text(out / "llm.md", render(doc, REGISTRY))
    return doc
