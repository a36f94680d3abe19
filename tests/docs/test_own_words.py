"""The pages and records speak only the project's own words: no absolute path of one machine (a
checkout, a home, a scratch folder) and no word about how the work on the project was organised,
in README.md, docs/, results/, the shipped data and the CLI's help. The provenance helpers that
write the records keep it so: commands relative to the repository, other processes by their
program's name."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from _provenance import MACHINE_PATH, portable, program  # noqa: E402

#: words that tell how the work was organised, not what the project does
ORGANISATION = [re.compile(p, re.I) for p in (
    r"\bthe issue\b", r"\bissue's\b", r"\bSIGSTOP\b", r"\bof before\b", r"\bearlier versions\b", r"\bis proposed\b",
    r"\bproposals?, not changes\b", r"\bduplicates --change\b", r"\bdevelopment machines?\b", r"\bworktree\b",
    r"× target\b")]


def files() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".md", ".ipynb", ".json")]
    data = [*(ROOT / "results").rglob("*.json"), *(ROOT / "src" / "windtunnel" / "data").rglob("*.json")]
    return [ROOT / "README.md", *sorted(docs), *sorted(data), *sorted((ROOT / "src" / "windtunnel" / "cli").glob("*.py"))]


def problems(text: str) -> list[str]:
    """The machine paths and organisation words of ``text``, each with its context."""
    found = []
    for pattern in (MACHINE_PATH, *ORGANISATION):
        found += [text[max(0, m.start() - 30):m.end() + 30].replace("\n", " ") for m in pattern.finditer(text)]
    return found


def test_no_page_record_or_help_holds_a_machine_path_or_a_word_of_our_organisation():
    bad = {p.relative_to(ROOT).as_posix(): found for p in files() if (found := problems(p.read_text()))}
    assert not bad, bad


@pytest.mark.parametrize("text", [
    "measured with `--out /work/runs/x`", "a file in /home/someone/", "written to /tmp/cmp_tiny.json",
    "/root/.pyenv/versions/3.11.7/bin/python3", "The issue's target was met", "the search of before",
    "the halving of earlier versions", "so no change is proposed", "paused with SIGSTOP", "run duplicates --change",
    "from a worktree at abc123"])
def test_each_kind_is_caught(text):
    assert problems(text)


@pytest.mark.parametrize("text", [
    "`/usr/bin/time -v windtunnel run --out runs/main`", "see docs/results/tuning.md", "an issue of the task",
    "before the run", "a version of the task", "a path such as runs/work/x or src/windtunnel/tmp/y"])
def test_the_projects_own_words_pass(text):
    assert not problems(text)


def test_a_command_keeps_repository_paths_relative_and_other_paths_by_name(tmp_path):
    root = tmp_path / "repo"
    cmd = f"python {root}/benchmarks/x.py run --root {root}/runs/study --out=/work/runs/p3o --jobs 2"
    assert portable(cmd, root) == "python benchmarks/x.py run --root runs/study --out=p3o --jobs 2"
    assert portable(f"windtunnel run --out {root}", root) == "windtunnel run --out ."
    # a system program's path is the same on every machine: it stays
    assert portable("/usr/bin/time -v windtunnel run", root) == "/usr/bin/time -v windtunnel run"
    assert not MACHINE_PATH.search(portable(cmd, root))


@pytest.mark.parametrize(("cmdline", "name"), [
    ("/work/main/.venv/bin/python -W ignore /work/golden/model_hash.py", "python model_hash.py"),
    ("/work/main/.venv/bin/python /work/main/.venv/bin/windtunnel run --out /work/gold", "python windtunnel run"),
    ("/tmp/ci-clone/.venv/bin/python -B -c from multiprocessing.spawn import spawn_main", "python -c"),
    (".venv/bin/python -m pytest -q tests/llm", "python -m pytest"),
    (["/root/.pyenv/versions/3.11.7/bin/python3", "-I", "-S", "-B", "/usr/local/bin/duplicates"], "python3 duplicates"),
    ("dpkg-deb --fsys-tarfile /tmp/apt-dpkg-install/031.deb", "dpkg-deb"),
    ("ray::IDLE      ", "ray::IDLE"),
    ("", "?"),
])
def test_another_process_is_named_by_its_program(cmdline, name):
    assert program(cmdline) == name
    assert not MACHINE_PATH.search(program(cmdline))
