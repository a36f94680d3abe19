"""The results pages are data: docs/results/, the README's generated tables and the site's Results
nav are rendered from results/ (scripts/render_results.py), and must not differ from a fresh
rendering. Fix a failure with `make results` (or `python scripts/render_results.py`), after
changing the data or scripts/results/, never by editing a generated page."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _renderer():
    spec = importlib.util.spec_from_file_location("render_results", ROOT / "scripts" / "render_results.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("render_results", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def renderer():
    pytest.importorskip("matplotlib")
    return _renderer()


def test_committed_pages_match_the_data(renderer):
    """A fresh rendering (nothing in it depends on the clock or the machine) equals the committed
    pages, figures' data, README blocks and nav."""
    problems = renderer.check(ROOT)
    assert not problems, "the results pages differ from their data (run make results):\n" + "\n".join(problems)


def test_every_template_directive_is_filled(renderer):
    """No page shows a raw ``{{ table ... }}``: a directive the renderer does not recognise (as
    TOPIC/NAME once was not) would leave it on the page and its table under "Other records"."""
    files, blocks, _ = renderer.render(ROOT)
    pages = {name: data.decode() for name, data in files.items() if name.endswith(".md")}
    left = {name: text.count("{{") for name, text in {**pages, **blocks}.items() if "{{" in text}
    assert not left, f"unfilled template directives: {left}"


def test_every_record_has_its_provenance(renderer):
    assert renderer.provenance_errors(ROOT) == []


def test_a_changed_number_is_caught(renderer, tmp_path):
    """Copy the repository's results, pages and README, change one number of the main job's
    table, and the check names the page it no longer matches."""
    import shutil

    for rel in ("results", "docs", "scripts"):
        shutil.copytree(ROOT / rel, tmp_path / rel)
    for rel in ("README.md", "mkdocs.yml"):
        shutil.copy2(ROOT / rel, tmp_path / rel)
    rec = tmp_path / "results" / "main-job" / "recorded.json"
    text = rec.read_text()
    assert "0.0425" in text
    rec.write_text(text.replace("0.0425", "0.0426", 1))
    problems = renderer.check(tmp_path)
    assert any("main-job.md" in p for p in problems) and any("README.md" in p for p in problems), problems


# numbers the results pages' prose may write that no record holds, each with its reason
NOT_MEASURED_HERE = {
    "0.0000316": "a learning rate in a command line",
    "2.08": "ln 8, the loss of a uniform guess among 8 values",
    "0.978": "Paper I's number",
    "2.67": "Paper I's model size (2.67M parameters)",
    "2601.21266": "an arXiv id",
}


def test_the_prose_cites_numbers_the_data_holds(renderer):
    """Every number with two or more decimals that a results page's prose writes is in the data
    (so a number cannot drift from its table), or is listed above with its reason."""
    from _lib import data_numbers, uncited
    from _tables import load_json

    numbers = data_numbers([load_json(p) for p in sorted((ROOT / "results").glob("*/*.json"))])
    stray = {}
    for template in sorted((ROOT / "scripts" / "results").glob("*.md")):
        for n in uncited(template.read_text(), numbers):
            if n not in NOT_MEASURED_HERE:
                stray.setdefault(template.name, []).append(n)
    assert not stray, f"numbers in the prose that no record of results/ holds: {stray}"


def test_a_folded_part_is_a_details_block_and_an_unclosed_one_is_left_unfilled(renderer, tmp_path):
    from _lib import Context

    ctx = Context(root=ROOT, out=tmp_path, topic="main-job")
    folded = ctx.template("before\n\n{{ fold: the long table }}\n| a |\n|---|\n| 1 |\n{{ /fold }}\nafter\n")
    assert folded == ("before\n\n<details markdown>\n<summary>the long table</summary>\n\n| a |\n|---|\n| 1 |\n\n"
                      "</details>\nafter\n")
    # without its end the fold stays in the text, which test_every_template_directive_is_filled catches
    assert "{{ fold: the long table }}" in ctx.template("{{ fold: the long table }}\n| a |\n")
