"""The results pages' figures (and the package's, through windtunnel.figures.line_styles)
explain themselves: every line told apart by colour and marker (an
architecture in its colour of every page, a model's two rates in two styles), a title on every
figure, and the score ruler's labels never on top of each other."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "results" / "figures"


@pytest.fixture(scope="module")
def plots():
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(ROOT / "scripts" / "results"))
    import _figures
    import _plots

    return _plots, _figures


def test_nine_settings_get_nine_looks():
    from windtunnel.figures import line_styles

    labels = ["profile (3e-3)", "lr 6e-3", "lr 1e-2", "constant", "warm-up 300", "batch 64, 750 steps",
              "4L d64, 3000 steps", "8L d64, 2000 steps", "6L d96, 1500 steps"]
    look = line_styles(labels)
    assert len({look[label]["color"] for label in labels}) == 9
    assert len({look[label]["marker"] for label in labels}) == 9


def test_a_models_two_rates_share_its_colour_and_differ_in_style():
    from windtunnel.figures import colour, line_styles

    labels = ["lstm (lr 3.16e-3)", "gru (lr 3.16e-3)", "lstm (lr 1e-3)", "gru (lr 1e-3)"]
    look = line_styles(labels)
    assert look["lstm (lr 3.16e-3)"]["color"] == look["lstm (lr 1e-3)"]["color"] == colour("lstm")
    assert look["lstm (lr 3.16e-3)"]["ls"] != look["lstm (lr 1e-3)"]["ls"]
    assert look["lstm (lr 3.16e-3)"]["marker"] != look["lstm (lr 1e-3)"]["marker"]
    # the same rate, the same style, whatever the model
    assert look["lstm (lr 1e-3)"]["ls"] == look["gru (lr 1e-3)"]["ls"]
    assert look["lstm (lr 1e-3)"]["color"] != look["gru (lr 1e-3)"]["color"]


def _label_boxes(fig):
    from matplotlib.text import Text

    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    fig.canvas.draw()
    return [Text.get_window_extent(t, renderer) for t in ax.texts]


def test_the_rulers_labels_do_not_overlap_even_when_the_scores_crowd(plots):
    _plots, _figures = plots
    crowded = {"title": "t", "points": [["a, HMM", 0.97], ["b, HMM", 0.98], ["c, HMM", 0.99], ["d, HMM", 0.69],
                                        ["e, recall", -0.01]]}
    with _figures.style():
        boxes = _label_boxes(_plots.ruler(crowded))
    assert len(boxes) == 5 + 5  # the five fixed labels and one per point
    overlaps = [(i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])]
    assert not overlaps


def test_the_overlap_check_sees_labels_on_top_of_each_other(plots):
    """The other edge: two labels drawn at one place are caught by the same check."""
    _plots, _figures = plots
    with _figures.style():
        fig, ax = _figures.figure()
        ax.text(0.5, 0.5, "one label")
        ax.text(0.52, 0.5, "another label")
        boxes = _label_boxes(fig)
    assert boxes[1].overlaps(boxes[0])


def test_every_committed_figure_has_a_title():
    titled = [json.loads(p.read_text())["data"].get("title") for p in sorted(FIGURES.glob("*.json"))]
    assert titled and all(titled)


def test_a_mixer_of_ones_own_is_told_apart_from_the_architectures_beside_it():
    from windtunnel.figures import colour, line_styles

    look = line_styles(["transformer", "my_mixer (0.60M)"])
    assert look["transformer"]["color"] == colour("transformer")
    assert look["my_mixer (0.60M)"]["color"] != look["transformer"]["color"]
    assert look["my_mixer (0.60M)"]["marker"] != look["transformer"]["marker"]
