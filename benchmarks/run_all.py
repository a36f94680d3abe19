"""Run every benchmarks/bench_*.py in turn (each prints its own figures)."""

import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).parent
failed = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n=== {script.name} ===", flush=True)
    if subprocess.call([sys.executable, str(script), *sys.argv[1:]]) != 0:
        failed.append(script.name)
sys.exit(f"failed: {', '.join(failed)}" if failed else 0)
