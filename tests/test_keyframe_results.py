"""The key-frame study's page and figures are what its committed data render to
(``python scripts/keyframe_study.py render``): any difference, a number typed by hand into the
page or data changed without rendering again, fails here."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "keyframe"
PAGE = ROOT / "docs" / "results" / "keyframe.md"
FIGURES = ROOT / "docs" / "results" / "figures"
GUIDE = ROOT / "docs" / "geometry.md"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("keyframe_render", ROOT / "scripts" / "keyframe_render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("keyframe")
    (out / "geometry.md").write_text(GUIDE.read_text())
    paths = module.render(RESULTS, out / "keyframe.md", out / "figures", out / "geometry.md")
    return out, paths


def test_the_committed_page_is_its_data_rendered(rendered):
    out, _ = rendered
    assert PAGE.read_text() == (out / "keyframe.md").read_text(), (
        "docs/results/keyframe.md differs from what results/keyframe/*.json render to; "
        "run `python scripts/keyframe_study.py render` and commit the page")


def test_the_geometry_guides_conclusions_are_their_data_rendered(rendered):
    """docs/geometry.md's key-frame conclusions are a generated block: a number typed by hand there
    (or data changed without rendering) fails here."""
    out, _ = rendered
    text = (out / "geometry.md").read_text()
    assert "keyframe:conclusions" in text and "**The initialisation's scale is the factor" in text
    assert GUIDE.read_text() == text, ("docs/geometry.md's key-frame conclusions differ from what results/keyframe/*.json "
                                       "render to; run `python scripts/keyframe_study.py render` and commit the page")


def test_the_committed_figures_are_their_data_rendered(rendered):
    out, paths = rendered
    figures = [p for p in paths if p.suffix == ".png"]
    assert figures
    for p in figures:
        assert (FIGURES / p.name).read_bytes() == p.read_bytes(), f"{p.name} differs from its data rendered"


def test_every_result_carries_its_provenance():
    docs = [json.loads(p.read_text()) for p in sorted(RESULTS.rglob("*.json"))]
    assert docs
    for d in docs:
        p = d["provenance"]
        assert p["command"].startswith("python scripts/") and len(p["commit"]) == 40 and p["started"]
        assert {"platform", "cpu_count", "torch"} <= set(p["machine"])
        assert "load1_mean" in p["load_while_running"] and "other_busy_processes" in p["load_while_running"]
