"""What a recorded measurement says about where it ran: the machine and the checkout's commit
(shared by the scripts that write committed data: ship_reference.py, record_comparison.py,
record_scorecard.py)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path


def machine() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores"


def head_commit() -> str:
    """The checkout's commit (asked in the checkout, wherever the script was started from)."""
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root).stdout.strip()


def provenance(command: str, concurrent: str, **extra: str) -> dict[str, str]:
    """A record's provenance for a measurement taken now, in this checkout, on this machine."""
    return {"command": command, "commit": head_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "concurrent": concurrent, **extra}
