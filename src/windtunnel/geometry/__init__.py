"""Geometric diagnostics of trained wind-tunnel models (Paper I's mechanism).

``run_diagnostics(run_dir)`` runs every analysis in :data:`ANALYSES` that applies to the run
(key frame, attention focusing, value manifold, ablations, logit lens, training dynamics,
recurrent geometry), each beside a computed null; each is one module with one
:class:`~windtunnel.analysis.Analysis` record, registered in
:data:`~windtunnel.geometry.diagnose.REGISTRY`; :mod:`windtunnel.stats` holds the
pure statistics they share.
"""

from windtunnel.geometry.diagnose import ANALYSES, run_diagnostics

__all__ = ["ANALYSES", "run_diagnostics"]
