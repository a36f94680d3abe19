"""Shipped studies: a fixed plan of runs, each trained, diagnosed and recorded as one job of the
job runner (:func:`~windtunnel.engine.jobs.run_jobs`), so that workers, resuming, run folders and
failures behave as in every sweep. The key-frame study (:mod:`.keyframe_plan`, :mod:`.keyframe_record`,
:mod:`.keyframe`) is the first; ``scripts/keyframe_study.py`` parses its options and renders its page."""
