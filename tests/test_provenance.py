"""The one provenance helper (windtunnel.provenance): commands made portable, and the two forms of a
record's provenance, each with the keys its readers need (scripts/results/_lib.py's check for the
results pages; the key-frame records' keys)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from windtunnel import provenance as prov

ROOT = Path(__file__).resolve().parents[1]


def _lib():
    """scripts/results/_lib.py, the results renderer's checks."""
    sys.path.insert(0, str(ROOT / "scripts" / "results"))
    return importlib.import_module("_lib")


@pytest.mark.parametrize(("command", "portable"), [
    ("windtunnel sweep --out /work/checkout/runs/x", "windtunnel sweep --out runs/x"),
    ("windtunnel sweep --out /tmp/scratch/x", "windtunnel sweep --out x"),
    ("windtunnel llm --out=/home/someone/cmp", "windtunnel llm --out=cmp"),
    ("/usr/bin/time -v windtunnel run", "/usr/bin/time -v windtunnel run"),
    ("python scripts/keyframe_study.py run --only a", "python scripts/keyframe_study.py run --only a"),
])
def test_a_command_keeps_no_path_of_one_machine(command, portable):
    assert prov.portable(command, Path("/work/checkout")) == portable
    assert not prov.MACHINE_PATH.search(prov.portable(command, Path("/work/checkout")))


def test_a_checkout_anywhere_is_named_relative_to_itself():
    """A checkout outside the usual roots (a CI's /check/work/main) still leaves no path of its own."""
    root = Path("/check/work/main")
    assert prov.portable(f"windtunnel sweep --out {root}/runs/x --cfg={root}/c.yaml", root) == \
        "windtunnel sweep --out runs/x --cfg=c.yaml"


def test_other_processes_are_named_by_their_program():
    assert prov.program("/x/.venv/bin/python -m pytest -q tests") == "python -m pytest"
    assert prov.program(["/usr/bin/python3", "/work/x/scripts/keyframe_study.py", "run", "--only", "a"]) == \
        "python3 keyframe_study.py run"
    assert prov.program("python -c import x") == "python -c"


def test_a_results_page_record_has_what_the_renderer_requires(tmp_path):
    p = prov.provenance(f"windtunnel sweep --out {ROOT}/runs/x", concurrent="nothing else", root=ROOT, note="n")
    assert list(p) == ["command", "commit", "date", "machine", "concurrent", "note"]
    assert p["command"] == "windtunnel sweep --out runs/x" and len(p["commit"]) == 40
    assert isinstance(p["machine"], str) and p["date"].endswith("+00:00")
    assert _lib().check_provenance(Path("x.json"), {"provenance": p}) == []


def test_a_given_key_replaces_its_default_and_none_keeps_it():
    p = prov.provenance("cmd", concurrent="c", root=ROOT, commit="a" * 40, date="2026-01-02", machine=None)
    assert p["commit"] == "a" * 40 and p["date"] == "2026-01-02" and p["machine"] == prov.machine_line()
    assert list(p) == ["command", "commit", "date", "machine", "concurrent"]


def test_a_results_page_record_must_say_what_ran_beside_it():
    with pytest.raises(ValueError, match="concurrent"):
        prov.provenance("cmd", root=ROOT)


def test_a_measured_record_has_the_key_frame_records_keys():
    committed = json.loads((ROOT / "results" / "keyframe" / "transformer-1x-s0.json").read_text())["provenance"]
    with prov.measuring(every=0.05) as measured:
        pass
    p = prov.provenance("python scripts/keyframe_study.py run --only x", measured=measured, root=ROOT, note="n")
    assert set(p) == set(committed)
    assert set(p["machine"]) == set(committed["machine"]) and set(p["load_while_running"]) == set(
        committed["load_while_running"])
    assert isinstance(p["dirty"], bool) and p["wall_seconds"] >= 0 and p["started"].endswith("+00:00")
    assert p["load_while_running"]["n_samples"] >= 1
