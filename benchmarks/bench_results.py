"""Writing a sweep's results table: CSV (``write_csv``) against parquet.

A sweep writes ``results.csv`` (one row per run and evaluation length) every time its tables are
written; a ``results.parquet`` beside it was to be written only if that is no slower. This times
the CSV writer and a parquet writer (both atomic, to disk, as ``write_tables`` writes its files:
pandas' ``to_parquet`` with pyarrow, into ``atomic_write_bytes``) on results tables of realistic size,
built the way ``run_rows`` builds them: Paper I's sweep (44 runs x up to 3 lengths, ~130 rows),
a seed-and-learning-rate grid (~600 rows) and a large grid (~3,000 rows). It prints the median
seconds of each and the ratio parquet / CSV, and the one-off cost of importing pandas and pyarrow
in a fresh interpreter (paid once per sweep process, before its first parquet write).

Measured on 2 shared CPU cores (December 2026): parquet takes 1.4-1.6x the CSV's time at Paper I's
size (88 rows: 12 ms against 8.6 ms), 0.86x at 600 rows and 0.5x at 3,000, and a sweep process
would first import pandas and pyarrow (0.6 s). At the sizes the shipped sweeps write, parquet is
slower, so sweeps write no parquet; ``windtunnel.results(folder).to_parquet(...)`` gives one.

    python benchmarks/bench_results.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from windtunnel.files import atomic_write_bytes
from windtunnel.sweep.aggregate import write_csv

MODELS = ("transformer", "lstm", "mamba", "mlp")


def results_rows(n_runs: int, seed: int = 0) -> list[dict]:
    """``n_runs`` runs' rows with the columns (and kinds of values) of ``run_rows``: HMM runs
    at three lengths with a grid axis, bijection runs at one."""
    rng = random.Random(seed)
    rows = []
    for i in range(n_runs):
        hmm = i % 2 == 0
        model = MODELS[i % len(MODELS)]
        lengths = (20, 30, 50) if hmm else (19,)
        for L in lengths:
            row = {
                "experiment": "hmm" if hmm else "bijection", "task": "hmm" if hmm else "bijection",
                "model": model, "run": f"{'hmm' if hmm else 'bijection'}-{model}-{i:010x}", "seed": i % 5,
                "task_params": '{"K": 20, "O": 5, "S": 5}' if hmm else '{"L": 19, "V": 20, "format": "sepvocab"}',
                "grid:train.lr": f"{[0.001, 0.003, 0.01][i % 3]}",
                "length": L, "main_length": lengths[0], "is_main": L == lengths[0],
                "n_params": 400_000 + rng.randrange(8000), "steps": 1500, "train_seconds": round(rng.uniform(60, 900), 2),
            }
            for metric in ("entropy_error", "kl_bayes_model", "kl_model_bayes") + (() if hmm else ("accuracy",)):
                v = rng.uniform(0.001, 0.5)
                row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = v, v * 0.9, v * 1.1
                row[f"baseline_{metric}"], row[f"baseline_{metric}_name"] = rng.uniform(0.3, 1.0), "uniform"
            rows.append(row)
    return rows


def write_parquet(path: Path, rows: list[dict]) -> None:
    """The table of ``write_csv`` (the same columns in the same order) as parquet, atomically."""
    import io

    import pandas as pd

    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    buf = io.BytesIO()
    pd.DataFrame(rows, columns=fields).to_parquet(buf, index=False)
    atomic_write_bytes(path, buf.getvalue())


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def import_seconds() -> float:
    """Seconds a fresh interpreter spends importing pandas and pyarrow (median of 3)."""
    code = "import time; t = time.perf_counter(); import pandas, pyarrow, pyarrow.parquet; print(time.perf_counter() - t)"
    return statistics.median(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                  check=True).stdout) for _ in range(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        print("pandas and pyarrow are not installed (make setup EXTRAS=data): nothing to compare")
        return
    print(f"{'runs':>6} {'rows':>6} {'columns':>8} {'csv s':>9} {'parquet s':>10} {'parquet/csv':>12} "
          f"{'csv KB':>8} {'parquet KB':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n_runs in (44, 300, 1500):
            rows = results_rows(n_runs)
            write_parquet(folder / "warm.parquet", rows)  # the first call imports pandas' parquet writer
            csv_s = median_seconds(lambda rows=rows: write_csv(folder / "results.csv", rows), args.repeats)
            pq_s = median_seconds(lambda rows=rows: write_parquet(folder / "results.parquet", rows), args.repeats)
            n_cols = len({k for r in rows for k in r})
            print(f"{n_runs:>6} {len(rows):>6} {n_cols:>8} {csv_s:>9.4f} {pq_s:>10.4f} {pq_s / csv_s:>12.2f} "
                  f"{(folder / 'results.csv').stat().st_size / 1024:>8.0f} "
                  f"{(folder / 'results.parquet').stat().st_size / 1024:>11.0f}")
    print(f"importing pandas + pyarrow in a fresh interpreter: {import_seconds():.2f} s (once per sweep process)")


if __name__ == "__main__":
    main()
