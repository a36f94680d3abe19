"""Measure what each install costs: the wheel of this checkout installed into a fresh virtual
environment, with torch 2.13.0 first (as scripts/setup.sh and .ci/run install it), once per set
of extras. Records the seconds of each install, the environment's size on disk and the number of
packages it holds, into results/install/install.json (rendered on the Results pages and in
docs/index.md by `make results`).

    python scripts/record_install.py                         # the core, llm, test and test,docs,llm
    python scripts/record_install.py --extras ,llm --concurrent "nothing else running"

The packages come from wherever pip is configured to take them (on the project's machine: torch
from a local wheel, the rest from a local mirror where it has them, else from PyPI); the record
says which.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the checkout's package, installed or not

from windtunnel.provenance import provenance  # noqa: E402

TORCH = "torch==2.13.0"


def parse_sets(text: str) -> list[str]:
    """``",llm,test"`` -> ``["", "llm", "test"]``; a ``+`` joins extras into one set (``test+docs``)."""
    return [s.replace("+", ",") for s in text.split(",")]


def run(cmd: list[str], **kw) -> float:
    """Run ``cmd`` (it must succeed); its seconds."""
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def size_mib(folder: Path) -> float:
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


def build_wheel(tmp: Path) -> Path:
    """The checkout's wheel (no dependencies), as .ci/run builds it."""
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(tmp)])
    return next(tmp.glob("windtunnel-*.whl"))


def measure(wheel: Path, extras: str, tmp: Path) -> dict:
    venv = tmp / f"venv-{extras.replace(',', '-') or 'core'}"
    seconds = run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    torch_s = run([*pip, TORCH])
    target = f"windtunnel[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
    rest_s = run([*pip, target])
    packages = json.loads(subprocess.run([py, "-m", "pip", "list", "--format=json"], check=True, capture_output=True,
                                         text=True).stdout)
    run([str(venv / "bin" / "windtunnel"), "--help"])  # it works
    return {"extras": extras or "(none: the core)", "packages": len(packages), "size_mib": round(size_mib(venv)),
            "torch_s": round(torch_s, 1), "rest_s": round(rest_s, 1), "total_s": round(seconds + torch_s + rest_s, 1)}


def package_source() -> str:
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    local = [what for key, what in (("find-links", "local wheels (find-links)"), ("index-url='file:", "a local mirror"))
             if key in config]
    return "pip's configuration: " + ", then ".join([*local, "PyPI over the network (pip's cache as it was)"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extras", default=",llm,test,test+docs+llm",
                    help="comma-separated sets of extras, '' for the core, + to join extras (default: %(default)s)")
    ap.add_argument("--concurrent", default="unknown", help="what else ran on the machine meanwhile")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "install" / "install.json")
    a = ap.parse_args()
    command = "python scripts/record_install.py" + ("" if a.extras == ap.get_default("extras") else f" --extras {a.extras}")
    prov = provenance(command, concurrent=a.concurrent, root=ROOT, python=sys.version.split()[0],  # the wheel's commit
                      source=package_source())
    rows, load = [], os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        wheel = build_wheel(tmp)
        for extras in parse_sets(a.extras):
            rows.append(measure(wheel, extras, tmp))
            print(json.dumps(rows[-1]), flush=True)
    prov["concurrent"] += f"; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    rec = {"title": "What an install costs: the wheel in a fresh virtual environment, torch 2.13.0 (CPU) first",
           "provenance": prov,
           "columns": [{"key": "extras", "label": "extras"}, {"key": "packages", "label": "packages"},
                       {"key": "size_mib", "label": "size on disk (MiB)"}, {"key": "torch_s", "label": "torch (s)"},
                       {"key": "rest_s", "label": "windtunnel and its dependencies (s)"},
                       {"key": "total_s", "label": "in all, with the venv (s)"}],
           "rows": rows}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}")


if __name__ == "__main__":
    main()
