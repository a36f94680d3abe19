"""The report page of ``windtunnel llm``: one model's folder (``llm.json``) or a comparison of several
(``compare.json``), as markdown that :func:`~windtunnel.report.page.write_report` renders into one
self-contained HTML page (every figure inlined).

A comparison's page is its ``summary.md`` (rewritten first from the models' ``llm.json`` files, so
it shows every model finished so far), then each finished model's own page (``llm.md``, its
headings pushed down, its plots from its folder), then the comparison's config.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from windtunnel.report.text import _config_block, _demote


def is_llm_folder(folder: Path) -> bool:
    from windtunnel.llm.compare import is_comparison

    return (folder / "llm.json").is_file() or is_comparison(folder)


def _model_page(folder: Path, prefix: str, levels: int) -> list[str]:
    """A model's ``llm.md`` with its plots' paths relative to the page (``prefix``) and its
    headings pushed down ``levels``."""
    text = (folder / "llm.md").read_text()
    if prefix:
        text = re.sub(r"\]\((?!data:|https?:|/)([^)]+\.png)\)", lambda m: f"]({prefix}/{m.group(1)})", text)
    return [_demote(text, levels), ""]


def run_page(folder: Path) -> tuple[str, str]:
    doc = json.loads((folder / "llm.json").read_text())
    if not (folder / "llm.md").is_file():
        from windtunnel.llm.analyses import REGISTRY
        from windtunnel.llm.report import render

        (folder / "llm.md").write_text(render(doc, REGISTRY))  # a Ray task's copy: llm.json only
    title = f"windtunnel report: llm {doc['model']['name']}"
    body = _model_page(folder, "", 0)
    body[0] = re.sub(r"\A# [^\n]*", f"# {title}", body[0])
    return title, "\n".join(body + ["## Options", ""] + _config_block(doc["options"]))


def comparison_page(folder: Path) -> tuple[str, str]:
    from windtunnel.llm.compare import read_models, write_comparison

    summary = write_comparison(folder)
    title = f"windtunnel report: comparison {summary['name']}"
    md = (folder / "summary.md").read_text()
    lines = [re.sub(r"\A# [^\n]*", f"# {title}", md), ""]
    manifest, models = read_models(folder)
    for m in models:
        if m["status"] == "finished" and (folder / m["folder"] / "llm.md").is_file():
            lines += [f"## Model: {m['name']}", ""] + _model_page(folder / m["folder"], m["folder"], 2)
    lines += ["## Comparison config", ""] + _config_block(manifest["config"])
    return title, "\n".join(lines)


def llm_report(folder: Path) -> tuple[str, str]:
    """(title, markdown) of an LLM run folder or a comparison folder."""
    from windtunnel.llm.compare import is_comparison

    return comparison_page(folder) if is_comparison(folder) else run_page(folder)
