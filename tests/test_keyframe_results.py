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
def render_module():
    spec = importlib.util.spec_from_file_location("keyframe_render", ROOT / "scripts" / "keyframe_render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, render_module):
    out = tmp_path_factory.mktemp("keyframe")
    (out / "geometry.md").write_text(GUIDE.read_text())
    paths = render_module.render(RESULTS, out / "keyframe.md", out / "figures", out / "geometry.md")
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
    assert "keyframe:conclusions" in text and "**The paper's number is the whole layer's.**" in text
    assert GUIDE.read_text() == text, ("docs/geometry.md's key-frame conclusions differ from what results/keyframe/*.json "
                                       "render to; run `python scripts/keyframe_study.py render` and commit the page")


def test_the_page_and_the_guide_give_the_same_conclusions(rendered):
    """The results page's "What it found" and docs/geometry.md's block are the same bullets (the
    page's links made relative to docs/results/): each reads the authors' runs and the random
    models too."""
    out, _ = rendered
    def bullets(text: str) -> list[str]:
        return [line.replace("](results/", "](") for line in text.splitlines() if line.startswith("- **")]
    block = (out / "geometry.md").read_text().split("<!-- keyframe:conclusions")[1].split("<!-- /keyframe:conclusions")[0]
    page = (out / "keyframe.md").read_text().split("**What it found.**")[1].split("## How it was measured")[0]
    assert bullets(block) and bullets(page) == bullets(block)
    assert bullets(page)[0].startswith("- **The paper's number is the whole layer's.**")


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


def _budget_line(module, docs) -> str:
    lines = module.conclusions(module.by_cell(docs), docs)
    return next(x for x in lines if x.startswith("- **Precision without a frame.**"))


def test_the_budget_conclusion_gives_each_model_its_own_budgets_when_they_differ(render_module):
    docs = render_module.load(RESULTS)
    assert any(d["job"] == "tinygpt-10x-s0" for d in docs)
    shared = _budget_line(render_module, docs)  # the committed study: both models at 1x, 3x and 10x, said once
    assert shared.count("over 1x, 3x, 10x") + shared.count("Over 1x, 3x, 10x") == 1
    uneven = _budget_line(render_module, [d for d in docs if d["job"] != "tinygpt-10x-s0"])
    assert "Over 1x, 3x, 10x (1,200, 3,600, 12,000 steps) `transformer`" in uneven
    assert "over 1x, 3x (1,200, 3,600 steps) `tinygpt`" in uneven
    # a model measured at one budget only is left out of the line, not printed with a one-point path
    alone = _budget_line(render_module, [d for d in docs if not d["job"].startswith("transformer-")
                                         or d["budget"] == 1])
    assert "`transformer`" not in alone and "`tinygpt`" in alone


def test_the_budget_conclusion_reads_the_precision_not_a_line(render_module):
    """No line through a statistic at its ceiling: the bullet sets the run that reaches the authors'
    reported precision beside its whole layer's keys; without that run it says none reaches it."""
    docs = render_module.load(RESULTS)
    t10 = next(d for d in docs if d["job"] == "transformer-10x-s0")
    line = _budget_line(render_module, docs)
    assert "per decade" not in line and "slope" not in line
    assert f"`transformer` reaches {render_module.error(t10):.4f} bits" in line
    assert f"whole layer's keys at {render_module.whole_layer(t10)['mean']:.3f}" in line
    assert str(render_module.AUTHORS_PRODUCTION["error"]) in line
    short = _budget_line(render_module, [d for d in docs if d["budget"] < 10])
    assert "No model reaches the authors' reported precision" in short


def test_the_whole_layers_random_value_is_its_closed_form(render_module):
    """The page's whole-layer reference is the closed form of random keys (m = d = d_model), which
    the fresh models of results/keyframe/random agree with; not the Gaussian value of d_model."""
    from windtunnel import stats

    docs = render_module.load(RESULTS)
    d = next(d for d in docs if d["job"] == "transformer-1x-s0")
    assert render_module.closed_form(d, True, False) == pytest.approx(stats.random_key_abs_cosine(128, 128))
    assert render_module.closed_form(d, False, False) == pytest.approx(stats.random_key_abs_cosine(32, 128))
    random_docs = render_module.load(RESULTS / "random")
    assert random_docs
    for model, fresh, closed in render_module.paper_size_whole_layer(random_docs):
        assert fresh == pytest.approx(closed, abs=0.005), model
        assert abs(fresh - stats.gaussian_abs_cosine(192)) > 0.01  # the old reference, 0.058 at d 192


def test_the_authors_code_numbers_come_from_their_runs(render_module):
    """No number of the authors' code is typed into the renderer: the format bullet cites their
    code only when a run of it is in the data, and then its own numbers."""
    import inspect

    source = inspect.getsource(render_module)
    assert "0.365" not in source and "0.332" not in source
    docs = render_module.load(RESULTS)
    groups = render_module.by_cell(docs)
    fmt = [x for x in render_module.conclusions(groups, docs) if x.startswith("- **The format.**")][0]
    assert "authors' own code" not in fmt
    final = {"per_head_raw": 0.4242, "per_head_centred": 0.1111, "entropy_error": 0.05}
    fake = {"with_replacement": False, "steps": 1200, "final": final,
            "provenance": {"command": "python scripts/keyframe_authors.py"}}
    fmt = [x for x in render_module.conclusions(groups, docs, [fake]) if x.startswith("- **The format.**")][0]
    assert "0.424 (centred 0.111" in fmt


def test_a_run_that_falls_onto_the_plateau_from_above_has_not_left_it(render_module):
    """A larger initial embedding starts a run higher (2.3 bits) and it falls onto the same 1.87-bit
    plateau: a fall that ends on the plateau is not learning, a fall to a tenth is."""
    assert not render_module.left_plateau([2.32, 2.0, 1.87])
    assert not render_module.left_plateau([1.85, 1.86, 1.87])
    assert render_module.left_plateau([1.07, 0.3, 0.043])
    assert render_module.left_plateau([2.8, 0.5, 0.02])
    # every run of the study with keys drawn with replacement is on its plateau, and no other is
    for path in RESULTS.glob("*.json"):
        doc = json.loads(path.read_text())
        assert render_module.learned(doc) != doc["task_params"].get("with_replacement", False), path.name
