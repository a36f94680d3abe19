"""`windtunnel report`: one self-contained page for a sweep or a run, checked in headless Chromium."""

import base64
import re
import shutil

import pytest
import torch
from headless import broken_images, rendered
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.geometry.diagnose import run_diagnostics
from windtunnel.report.page import write_report
from windtunnel.sweep import Execution, SweepConfig, run_sweep

runner = CliRunner()
TINY = ["train.steps=12", "train.batch_size=8", "train.checkpoints=2", "train.threads=1",
        "eval.n_sequences=48", "eval.batch_size=48", "eval.n_boot=20", "model_params.n_layers=1", "model_params.d_model=32"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """Bijection (2 seeds, and a lower rung), HMM with a longer evaluation length, recall; diagnostics on one run."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    doc = {
        "name": "tiny-report", "description": "a tiny sweep for the report tests", "profile": "quick",
        "overrides": TINY, "paper": "paper1", "grid": {"train.seed": [0]},
        "experiments": [
            {"task": "bijection", "name": "bijection@V4_L3", "models": ["transformer", "lstm"],
             "overrides": ["task_params.V=4", "task_params.L=3"]},
            {"task": "bijection", "models": ["transformer", "lstm"], "grid": {"train.seed": [0, 1]},
             "overrides": ["task_params.V=6", "task_params.L=5"]},
            {"task": "hmm", "models": ["transformer", "mlp"], "overrides": ["eval.lengths=[30]"]},
            {"task": "recall", "models": ["transformer", "lstm"], "match_capacity": None,
             "overrides": ["task_params.N=4", "task_params.M=2", "task_params.F=2", "task_params.n_keys=8",
                           "task_params.n_values=8"]},
        ],
        "primitives": {"rules": {"accumulation@V4_L3": {"experiment": "bijection@V4_L3", "metric": "kl_bayes_model"},
                                 "accumulation": {"experiment": "bijection", "metric": "kl_bayes_model"},
                                 "transport": {"experiment": "hmm", "metric": "kl_bayes_model"},
                                 "binding": {"experiment": "recall", "metric": "accuracy"}}},
    }
    out = tmp_path_factory.mktemp("sweep")
    outcome = run_sweep(SweepConfig.build(doc), out, Execution.quiet())
    diag = next(r for r in outcome.runs if r.experiment == "bijection" and r.config.model == "transformer")
    run_diagnostics(out / diag.name, ["attention", "value_manifold"], n_sequences=32, progress=False)
    torch.set_num_threads(before)
    return out, diag.name


def _images(page: str) -> list[str]:
    return re.findall(r'<img\b[^>]*\bsrc="([^"]*)"', page)


def test_sweep_report_is_one_self_contained_page(sweep_dir):
    out, diag = sweep_dir
    data = {name: (out / name).read_bytes() for name in ("summary.json", "summary.md", "results.csv", "table.csv")}
    stamps = {name: (out / name).stat().st_mtime_ns for name in data}
    paths = write_report(out)
    # the report only reads: the sweep's data files are as the sweep wrote them
    assert {name: (out / name).read_bytes() for name in data} == data
    assert {name: (out / name).stat().st_mtime_ns for name in data} == stamps
    page = paths["html"].read_text()
    md = paths["markdown"].read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>windtunnel report: sweep tiny-report</title>" in page
    imgs = _images(page)
    assert len(imgs) >= 8 and all(src.startswith("data:image/png;base64,") for src in imgs)
    for src in imgs:  # every inlined image is a real PNG
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "missing image" not in page and "src=\"report_files" not in page
    # a primitive scored at two rungs: the hardest rung realised per model, and its heat map
    assert "## Difficulty ladders" in md and "accumulation (bijection@V4_L3, bijection)" in md
    assert "### Ladder heat maps" in md and "report_files/ladder-0_accumulation.png" in md
    assert (out / "report_files" / "ladder-0_accumulation.png").is_file()
    for heading in ("## Comparison", "## Inference primitives", "### Per-position calibration",
                    "### Length generalisation", "### Accuracy", "### Training", f"### Geometry: {diag}"):
        assert heading in md, heading
    assert page.count("<table>") >= 6
    assert "v3 table" in page and "1.000 (acc.)" in page  # the paper's numbers beside ours
    assert "value manifold" in md.lower()
    # the diagnosed bijection transformer gives the attention-focusing claim its verdict
    assert "## Paper I's geometric claims at this scale" in md and "attention focusing (bijection)" in md
    # each experiment's learning curve shows its primitive's metric
    assert "training (kl_bayes_model)" not in md  # titles live in the PNGs; the text names the metric
    assert "The held-out probe's KL(Bayes‖model) during training." in md  # the metric's label (METRICS)
    assert "The held-out probe's accuracy during training." in md


def test_still_learning_compares_the_last_quarter():
    from windtunnel.report.page import still_learning

    steps = [0, 25, 50, 75, 100]
    assert still_learning(steps, [1.0, 0.5, 0.3, 0.2, 0.1], "kl_bayes_model") == (0.2, 0.1)  # halved: learning
    assert still_learning(steps, [1.0, 0.5, 0.3, 0.2, 0.19], "kl_bayes_model") is None  # 5% better: levelled off
    assert still_learning(steps, [0.1, 0.2, 0.5, 0.8, 0.85], "accuracy") == (0.8, 0.85)
    assert still_learning(steps, [0.1, 0.2, 0.5, 0.8, 0.81], "accuracy") is None
    assert still_learning([0, 10], [1.0, 0.1], "entropy_error") is None  # too short to say


def test_run_report(sweep_dir):
    out, diag = sweep_dir
    res = runner.invoke(app, ["report", str(out / diag)])
    assert res.exit_code == 0, res.output
    page = (out / diag / "report.html").read_text()
    md = (out / diag / "report.md").read_text()
    assert "## Calibration against the exact posterior" in md and "## Geometry" in md and "## Run config" in md
    assert len(_images(page)) >= 3 and all(s.startswith("data:image/png") for s in _images(page))
    assert "uniform" in page  # the baselines table


def test_report_of_an_unfinished_run_and_a_wrong_folder(tmp_path, sweep_dir):
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "neither a sweep folder" in res.output
    out, diag = sweep_dir
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(out / diag / "config.json", run / "config.json")
    res = runner.invoke(app, ["report", str(run)])
    assert res.exit_code == 0 and "no evaluation yet" in (run / "report.md").read_text()


def test_report_renders_in_headless_chromium(sweep_dir, browser):
    out, _ = sweep_dir
    seen = rendered(browser, write_report(out)["html"])  # from disk: no server
    assert seen["title"] == "windtunnel report: sweep tiny-report"
    assert seen["tables"] >= 6 and seen["rows"] >= 20
    assert len(seen["images"]) >= 8 and not broken_images(seen["images"])
    assert "Comparison" in seen["headings"] and "Inference primitives" in seen["headings"]


def test_the_browser_check_sees_a_broken_image(sweep_dir, browser, tmp_path):
    out, _ = sweep_dir
    page = write_report(out)["html"].read_text()
    first = _images(page)[0]
    bad = tmp_path / "bad.html"
    bad.write_text(page.replace(first, "data:image/png;base64,AAAA", 1))
    seen = rendered(browser, bad)
    assert len(broken_images(seen["images"])) == 1


def test_the_report_reads_its_metric_labels_from_metrics():
    """report/plots.py's probe axes and the run page's tables take their keys, headings, decimals and
    directions from windtunnel.evaluate.record.METRICS."""
    from windtunnel.evaluate.record import METRICS
    from windtunnel.report.plots import _probe_axis
    from windtunnel.report.run_page import _calibration_tables

    for name, spec in METRICS.items():
        assert _probe_axis(name, "?") == (spec.lower_is_better, f"probe {spec.heading}")
    assert _probe_axis("nosuch", "probe nosuch") == (True, "probe nosuch")
    ci = {"value": 0.123456, "lo": 0.1, "hi": 0.2}
    summary = {spec.eval_key: ci for spec in METRICS.values()} | {"entropy_error_abs_mean": ci}
    ev = {"main_length": 5, "lengths": {"5": summary},
          "baselines": {"5": {"uniform": {spec.eval_key: 0.5 for spec in METRICS.values()}}}}
    head, _, row, _, base_head, _, base_row = _calibration_tables(ev)
    at = [head.index(f"| {m.heading} |") for m in METRICS.values()]
    assert at == sorted(at) and head.index("mean dH") < at[1]  # METRICS' order, |mean dH| after the entropy error
    assert "0.123 [0.100, 0.200]" in row and "0.1235 [0.1000, 0.2000]" in row and "0.500 |" in base_row
    assert all(METRICS[m].heading in base_head for m in ("entropy_error", "kl_bayes_model", "accuracy"))
