"""The tree is clean under ruff, with the configuration in pyproject.toml (`ruff check .`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff() -> list[str]:
    exe = Path(sys.executable).parent / "ruff"
    if exe.exists():
        return [str(exe)]
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.fail("ruff is not installed: `make setup` installs it with the test extra")


def test_the_tree_is_clean_under_ruff():
    out = subprocess.run([*ruff(), "check", "--no-cache", "--output-format", "concise", "."],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"ruff check . found:\n{out.stdout}{out.stderr}"
