"""The six Paper III analyses over one loaded model, one module each, in one registry.

Each module, named as its analysis, declares one :class:`~windtunnel.analysis.Analysis` record
(the same contract as geometry's): ``run(session)`` returns a JSON-ready dict
(:class:`~windtunnel.llm.session.Session` holds the model and the prompt passes the analyses
share), ``markdown(result, doc)`` its section of ``llm.md`` (:mod:`windtunnel.llm.report`),
``plot(result, doc, out)`` its PNG (:mod:`windtunnel.llm.plots`); ``doc`` is ``llm.json``.
:data:`REGISTRY` holds them in the canonical order: the order they run, are listed and are
written in. A new analysis is one module here, named in :data:`REGISTRY`.
"""

from __future__ import annotations

from windtunnel.analysis import AnalysisRegistry
from windtunnel.llm.analyses import attention_focusing, domain_restriction, interventions, key_orthogonality, sula, value_manifold

REGISTRY = AnalysisRegistry([value_manifold.ANALYSIS, key_orthogonality.ANALYSIS, attention_focusing.ANALYSIS,
                             domain_restriction.ANALYSIS, sula.ANALYSIS, interventions.ANALYSIS])
#: the analysis names, in the canonical order
LLM_ANALYSES: list[str] = REGISTRY.names()
