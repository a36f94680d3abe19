"""What a recorded measurement says about where it ran: the machine and the checkout's commit
(shared by the scripts that write committed data: ship_reference.py, record_comparison.py,
record_scorecard.py)."""

from __future__ import annotations

import datetime
import os
import platform
import re
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
    return {"command": portable(command), "commit": head_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "concurrent": concurrent, **extra}


#: the start of an absolute path of one machine (a checkout, a home, a scratch folder): no record
#: holds one (system programs such as /usr/bin/time are the same everywhere and may stay)
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|tmp|Users|mnt|opt|scratch|var|private)/")
REPO = Path(__file__).resolve().parents[1]


def portable(command: str, root: Path = REPO) -> str:
    """``command`` as a record keeps it: a path inside the repository relative to it, and any other
    path of this machine by its last name (``--out /work/runs/x`` -> ``--out x``)."""
    def word(w: str) -> str:
        key, eq, value = w.rpartition("=") if w.startswith("-") and "=" in w else ("", "", w)
        if not MACHINE_PATH.match(value):
            return w
        path = Path(value)
        try:
            value = path.relative_to(root).as_posix() or "."
        except ValueError:
            value = path.name
        return key + eq + value
    return " ".join(word(w) for w in command.split(" "))


_INTERPRETER = re.compile(r"python[\d.]*$")


def program(cmdline: str | list[str]) -> str:
    """Another process by its program's name (never its paths): the executable's name, for an
    interpreter the script's name or ``-m`` module, and the subcommand where one follows
    (``/x/.venv/bin/python -m pytest -q tests`` -> ``python -m pytest``)."""
    words = cmdline.split() if isinstance(cmdline, str) else [w for a in cmdline for w in a.split()]
    if not words:
        return "?"
    name, rest = words[0].rsplit("/", 1)[-1], words[1:]
    if _INTERPRETER.match(name):
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("-m", "-c"):
            i += 2 if rest[i] in ("-W", "-X") else 1  # an option that takes the next word
        if i < len(rest) and rest[i] == "-c":
            return f"{name} -c"
        if i + 1 < len(rest) and rest[i] == "-m":
            name, rest = f"{name} -m {rest[i + 1]}", rest[i + 2:]
        elif i < len(rest):
            name, rest = f"{name} {rest[i].rsplit('/', 1)[-1]}", rest[i + 1:]
    if rest and re.fullmatch(r"[a-z][a-z0-9_-]*", rest[0]):
        name += f" {rest[0]}"
    return name
