"""The engine: how work runs. One validated :class:`~windtunnel.engine.execution.Execution`
(where and how), one job runner (:func:`~windtunnel.engine.jobs.run_jobs`, with a typed
:class:`~windtunnel.engine.jobs.Outcome` per job) and the folders of runs it writes
(:mod:`windtunnel.engine.folders`). Sweeps, searches, the scorecard and the comparison of
language models all run through it."""
