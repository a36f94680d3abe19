"""Sweeps: grids of runs (local or on a Ray cluster) aggregated into one results table."""

from windtunnel.engine.execution import Execution  # noqa: F401
from windtunnel.sweep.config import Experiment, SweepConfig, load_sweep, sweep_names  # noqa: F401
from windtunnel.sweep.expand import SweepRun, expand, matched_configs  # noqa: F401
from windtunnel.sweep.manifest import read_manifest  # noqa: F401
from windtunnel.sweep.run import Stage, SweepError, SweepOutcome, run_sweep, write_tables  # noqa: F401
