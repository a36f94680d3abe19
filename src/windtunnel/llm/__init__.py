"""Paper III on pretrained language models: value manifolds, key orthogonality, attention
focusing, domain restriction, SULA and entropy-axis interventions.

``import windtunnel.llm`` does not import transformers (an optional extra,
``make setup EXTRAS=llm``); loading a model does, and explains what to install when
it is missing. Entry point: :func:`run_llm`; analysis names: :data:`LLM_ANALYSES` (from the
registry in :mod:`windtunnel.llm.analyses`, imported on first use); options: :class:`LLMOptions`.
"""

from windtunnel.llm.config import LLMOptions, Thresholds, build_options
from windtunnel.llm.run import run_llm

__all__ = ["LLM_ANALYSES", "LLMOptions", "Thresholds", "build_options", "run_llm"]


def __getattr__(name: str):
    if name == "LLM_ANALYSES":  # the registry imports torch: only when asked for
        from windtunnel.llm.analyses import LLM_ANALYSES

        return LLM_ANALYSES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
