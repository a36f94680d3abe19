"""The control of a language model: the same architecture at initialisation, analysed by the same code.

A Paper III verdict is only worth reading if it separates a trained model from an untrained one,
so every run analyses, beside the model, its **control** (option ``control``, on by default):

- the checkpoint at initialisation where the hub has one (``init_revision``, e.g. Pythia's
  ``step0``);
- else the model re-initialised from its own config by its family's initialiser (transformers'
  ``_init_weights``), ``control_seeds`` times with torch seeds ``control_seed``, +1, ... (GGUF
  files included: their config is read from the file's metadata).

The control keeps the model's tokenizer and options, so it sees the same prompts. It lives in the
model's folder, ``control/<label>/`` (``step0``, ``init-seed1000003``, ...), with the files a run
writes, and resumes like a run: a finished control of the same settings is read, not run again.
:func:`judge_into` then judges every claim of :mod:`windtunnel.llm.claims` against the controls
and writes the verdicts into the model's ``llm.json`` (``claims``) and ``llm.md``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from windtunnel.llm.config import LLMOptions

CONTROL_DIR = "control"


def control_plan(opts: LLMOptions) -> list[dict[str, Any]]:
    """The controls of a run: ``label`` (its folder) and what :func:`~windtunnel.llm.loading.load_model`
    loads (``revision`` or ``reinit_seed``); none with ``control`` off."""
    if not opts.control:
        return []
    if opts.init_revision is not None:
        return [{"label": re.sub(r"[^A-Za-z0-9_.-]", "_", opts.init_revision), "revision": opts.init_revision}]
    seeds = range(opts.control_seed, opts.control_seed + opts.control_seeds)
    return [{"label": f"init-seed{s}", "reinit_seed": s} for s in seeds]


def control_options(opts: LLMOptions) -> LLMOptions:
    """A control's options: the model's, with no control of its own and no second init checkpoint."""
    return opts.replace(control=False, init_revision=None)


def control_folders(out: Path | str, opts: LLMOptions) -> list[Path]:
    return [Path(out) / CONTROL_DIR / c["label"] for c in control_plan(opts)]


def run_controls(model: str, analyses: list[str], out: Path, opts: LLMOptions, *, progress: bool = False,
                 replace: bool = False) -> list[dict]:
    """Each control's ``llm.json`` document: read where a finished one of the same settings is in
    its folder, else analysed now. A control of other settings is an error (nothing is
    overwritten), unless ``replace``: the single-model command analyses its model again, and its
    controls with it."""
    from windtunnel.config import ConfigError
    from windtunnel.llm.analysis_pass import analyse, finished_run

    copts = control_options(opts)
    docs = []
    for c, folder in zip(control_plan(opts), control_folders(out, opts)):
        load = {k: c[k] for k in ("revision", "reinit_seed") if k in c}
        try:
            doc = finished_run(folder, analyses, copts)
        except ConfigError:
            if not replace:
                raise
            doc = None
        docs.append(doc or analyse(model, analyses, folder, copts, progress=progress, **load))
    return docs


def finished_controls(out: Path | str, analyses: list[str], opts: LLMOptions) -> list[dict] | None:
    """Every control of a run read from its folder, or None while one is not finished."""
    from windtunnel.llm.analysis_pass import finished_run

    docs = [finished_run(folder, analyses, control_options(opts)) for folder in control_folders(out, opts)]
    return None if any(d is None for d in docs) else docs


def judge_into(doc: dict, controls: list[dict], out: Path | str) -> dict:
    """Judge ``doc``'s claims against ``controls`` and write them into ``out``'s llm.json and llm.md."""
    from windtunnel.files import atomic_write_text, jsonable
    from windtunnel.llm.analyses import REGISTRY
    from windtunnel.llm.claims import control_description, judge
    from windtunnel.llm.report import render

    out = Path(out)
    plots = doc.pop("plots", None)
    doc["control"] = {"rests_on": control_description(controls),
                      "folders": [str(p.relative_to(out)) for p in control_folders(out, LLMOptions.build(doc["options"]))]}
    doc["claims"] = judge(doc, controls)
    doc = jsonable(doc)
    atomic_write_text(out / "llm.json", json.dumps(doc, indent=1, allow_nan=False))
    doc["plots"] = plots if plots is not None else sorted(p.name for p in out.glob("*.png"))
    atomic_write_text(out / "llm.md", render(doc, REGISTRY))
    return doc
