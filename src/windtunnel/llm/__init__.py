"""Paper III on pretrained language models: value manifolds, key orthogonality, attention
focusing, domain restriction, SULA and entropy-axis interventions.

``import windtunnel.llm`` does not import transformers (an optional extra,
``make setup EXTRAS=llm``); loading a model does, and explains what to install when
it is missing. Entry point: :func:`run_llm`; analysis names: :data:`LLM_ANALYSES`; options:
:class:`LLMOptions`.
"""

from windtunnel.llm.config import LLM_ANALYSES, LLMOptions, Thresholds, build_options
from windtunnel.llm.run import run_llm

__all__ = ["LLM_ANALYSES", "LLMOptions", "Thresholds", "build_options", "run_llm"]
