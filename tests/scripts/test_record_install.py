"""scripts/record_install.py: which installs it measures, and what its committed record says (the
install itself is what CI does, .ci/run); and the README's LLM row's time."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


record_install = _load(ROOT / "scripts" / "record_install.py", "record_install")


def test_the_sets_of_extras():
    assert record_install.parse_sets(",llm,test+docs+llm") == ["", "llm", "test,docs,llm"]
    assert record_install.parse_sets("") == [""]


def test_the_committed_record_has_the_core_beside_the_full_install():
    rec = json.loads((ROOT / "results" / "install" / "install.json").read_text())
    rows = {r["extras"]: r for r in rec["rows"]}
    core, full = rows["(none: the core)"], rows["test,docs,llm"]
    assert core["packages"] < rows["llm"]["packages"] < full["packages"]
    assert core["size_mib"] < full["size_mib"]
    for r in rec["rows"]:
        assert r["total_s"] >= r["torch_s"] + r["rest_s"]


def test_wall_time_as_the_readme_writes_it():
    sys.path.insert(0, str(ROOT / "scripts" / "results"))
    try:
        main_job = _load(ROOT / "scripts" / "results" / "main_job.py", "main_job_topic")
    finally:
        sys.path.remove(str(ROOT / "scripts" / "results"))
    assert main_job.minutes("498 s") == "8 min 18 s"
    assert main_job.minutes("59.6 s") == "1 min 0 s"
    assert main_job.minutes("42 s") == "42 s"
    assert main_job.minutes("7 min 13 s") == "7 min 13 s"  # already in minutes: as recorded
    with pytest.raises(ValueError):
        main_job.minutes("soon s")
