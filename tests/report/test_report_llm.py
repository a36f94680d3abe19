"""`windtunnel report` of `windtunnel llm` folders: one model, and a comparison of several, each one
self-contained page, checked in headless Chromium like the sweep report."""

import base64
import re

import pytest
from headless import broken_images, rendered
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.report.page import write_report

runner = CliRunner()
OPTIONS = {"n_per_quintile": 2, "sula_ks": "0,2", "sula_n_per_k": 4, "n_bootstrap": 20, "n_null": 10, "layers": "all",
           "intervention_conditions": "true_cut,random_cut"}


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    """Two tiny random-weight models (MHA and GQA + sliding window) compared, and one that failed."""
    pytest.importorskip("transformers", reason="the llm report needs transformers (the test extra has it)")
    from windtunnel.llm.compare_config import CompareConfig
    from windtunnel.sweep import Execution
    from windtunnel.sweep.llm_compare import run_comparison

    out = tmp_path_factory.mktemp("llm-compare")
    cfg = CompareConfig.build({"name": "tiny-llm", "description": "two tiny models", "options": OPTIONS, "models": [
        {"random": {"family": "gpt_neox", "n_layers": 2, "d_model": 32, "n_heads": 4}},
        {"random": {"family": "mistral", "n_layers": 2, "d_model": 32, "n_heads": 4, "n_kv_heads": 1, "sliding_window": 6}},
        {"random": {"family": "llama", "n_layers": 2, "d_model": 32, "n_heads": 4}, "name": "refused",
         "options": {"memory_limit_gib": 1e-6}}]})
    run_comparison(cfg, out, Execution.quiet())
    return out


def _images(page: str) -> list[str]:
    return re.findall(r'<img\b[^>]*\bsrc="([^"]*)"', page)


def test_comparison_page_is_self_contained(comparison):
    res = runner.invoke(app, ["report", str(comparison)])
    assert res.exit_code == 0, res.output
    page = (comparison / "report.html").read_text()
    md = (comparison / "report.md").read_text()
    assert "<title>windtunnel report: comparison tiny-llm</title>" in page
    imgs = _images(page)
    # the comparison's figures and each model's own plots, all inlined PNGs
    assert len(imgs) >= 6 + 2 * 6 and all(s.startswith("data:image/png;base64,") for s in imgs)
    assert all(base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n" for s in imgs)
    assert "missing image" not in page
    for heading in ("## Models", "## Headline numbers", "## Paper III's claims", "## Dissociation",
                    "## Model: random-gpt_neox-MHA-L2", "## Model: random-mistral-MQA-SW6-L2", "## Comparison config"):
        assert heading in md, heading
    assert "MQA 4:1 + SW 6" in md and "**Failed**" in md and "refused" in md


def test_one_model_page(comparison):
    folder = comparison / "random-gpt_neox-MHA-L2"
    paths = write_report(folder)
    page, md = paths["html"].read_text(), paths["markdown"].read_text()
    assert md.startswith("# windtunnel report: llm ") and "## Paper III criteria" in md and "## Options" in md
    assert len(_images(page)) == 6 and all(s.startswith("data:image/png") for s in _images(page))


def test_llm_pages_render_in_headless_chromium(comparison, browser):
    seen = rendered(browser, write_report(comparison)["html"])
    assert seen["title"] == "windtunnel report: comparison tiny-llm"
    assert seen["tables"] >= 5 and seen["rows"] >= 15
    assert len(seen["images"]) >= 18 and not broken_images(seen["images"])
    assert {"Models", "Headline numbers", "Paper III's claims", "Figures"} <= set(seen["headings"])
    seen = rendered(browser, write_report(comparison / "random-gpt_neox-MHA-L2")["html"])
    assert len(seen["images"]) == 6 and not broken_images(seen["images"]) and "Paper III criteria" in seen["headings"]
