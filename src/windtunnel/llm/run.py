"""``run_llm``: Paper III's analyses of one pretrained causal LM, written to a folder.

    from windtunnel.llm import run_llm
    doc = run_llm("EleutherAI/pythia-410m", ["value_manifold", "key_orthogonality"], Path("out"),
                  dtype="float32", init_revision="step0")

writes ``out/llm.json`` (every number, the resolved options, the model's description, timing),
``out/llm.md`` (a markdown summary) and ``out/*.png`` plots, and returns the JSON document.
The command line ``windtunnel llm MODEL [--analyses ...] [--out DIR] [--name value ...]``
calls it with the options as keyword pairs (validated by :class:`LLMOptions`).
"""

from __future__ import annotations

from pathlib import Path

from windtunnel.llm.config import LLMOptions, build_options

__all__ = ["run_llm", "LLM_ANALYSES", "LLMOptions", "resolve_analyses"]  # noqa: F822 (LLM_ANALYSES: lazy, module __getattr__)


def __getattr__(name: str):
    if name == "LLM_ANALYSES":  # the registry imports torch: only when asked for
        from windtunnel.llm.analyses import LLM_ANALYSES

        return LLM_ANALYSES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_analyses(analyses: list[str] | str | None) -> list[str]:
    """Validate the analysis names (None, [] or ``all`` = all), in the canonical order."""
    from windtunnel.llm.analyses import REGISTRY

    if isinstance(analyses, str):
        analyses = [a.strip() for a in analyses.split(",") if a.strip()]
    if not analyses or analyses == ["all"]:
        return REGISTRY.names()
    wanted = set(REGISTRY.parse(analyses))
    return [a for a in REGISTRY.names() if a in wanted]


def run_llm(model: str, analyses: list[str] | None, out: Path, *, resume: bool = False, progress: bool = False,
            **options) -> dict:
    """Run ``analyses`` (default: all of :data:`LLM_ANALYSES`, in their canonical order) on ``model``
    (hub id, local folder or .gguf file) and write llm.json, llm.md and plots into ``out``; then,
    unless ``control`` is off, the same analyses on the model at initialisation into
    ``out/control/<label>/`` (:mod:`windtunnel.llm.control`; a finished control of the same
    settings is read, not run again), and every Paper III claim judged against them into llm.json's
    ``claims``. Options: :class:`LLMOptions`. ``resume``: a finished run of the same settings in
    ``out`` is read too, not run again. ``progress``: a bar on stderr over loading the model and
    each analysis (and each control's)."""
    from windtunnel.llm.loading import require

    require("transformers")  # fail fast, before any heavy import, when the llm extra is missing
    from windtunnel.llm.analysis_pass import analyse, finished_run
    from windtunnel.llm.control import judge_into, run_controls

    opts = options.pop("options", None) if isinstance(options.get("options"), LLMOptions) else None
    opts = opts or build_options(options)
    names = resolve_analyses(analyses)
    out = Path(out)
    doc = (finished_run(out, names, opts) if resume else None) or analyse(model, names, out, opts, progress=progress)
    return judge_into(doc, run_controls(model, names, out, opts, progress=progress, replace=not resume), out)
