"""The documentation site builds: `mkdocs build --strict` (a broken link, a page missing from the
nav, an API object that does not resolve all fail it), and the CLI reference is the commands'
own help. Skipped, saying so, where the docs extra is not installed (`make setup EXTRAS=docs`;
CI installs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _need_mkdocs():
    for module in ("mkdocs", "material", "mkdocs_jupyter"):
        pytest.importorskip(module, reason=f"the docs extra is not installed ({module} missing): make setup EXTRAS=docs")


def test_the_site_builds_strict(tmp_path):
    _need_mkdocs()
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, f"mkdocs build --strict failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    site = tmp_path / "site"
    assert (site / "tutorial.html").exists(), "the tutorial notebook is not on the site"
    api = (site / "api.html").read_text()  # the generated reference, rendered (tests/docs/test_api_reference.py checks its text)
    for name in ("load_run", "results", "task", "windmodel", "registry", "train", "run_sweep", "tune", "run_scorecard",
                 "run_llm", "llmoptions", "make_model", "count_params", "resolve_run", "parse_overrides", "rundir", "export_run"):
        assert f'id="{name}"' in api, f"the API page has no section '{name}'"
    config = (site / "config.html").read_text()
    for name in ("runconfig", "trainconfig", "sweepconfig", "llmoptions", "compareconfig"):
        assert f'id="{name}"' in config, f"the config page has no section '{name}'"


def test_the_cli_reference_is_the_commands_help():
    pytest.importorskip("typer")
    typer_cli = Path(sys.executable).parent / "typer"
    if not typer_cli.exists():
        pytest.skip("typer's command-line tool is not installed next to this Python")
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_cli.py"), "--check"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
