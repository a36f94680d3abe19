"""The scorecard of any architecture a user brings: the capacity pre-flight, the transformer's
shape for a user's model, --model-set, and a scorecard that completes around a failing primitive."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.models import count_params
from windtunnel.scorecard.score import ScorecardRequest, plan_scorecard, scorecard_sweep
from windtunnel.sweep import expand
from windtunnel.sweep.primitives import tune_configs
from windtunnel.sweep.shape import SOURCES
from windtunnel.tasks import make_task
from windtunnel.train.build import sized_model_params
from windtunnel.train.config import load_profile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROPE = "rope_mixer:RoPEMixer"
# tiny runs at the profiles' own shapes (the shape is what these tests are about)
TINY = ["train.steps=3", "train.batch_size=8", "train.checkpoints=2", "train.threads=1", "eval.n_sequences=32",
        "eval.batch_size=32", "eval.n_boot=10", "train.eval_probe_size=8"]
FLAKY = '''
import os

from my_mixer import EMAMixer


class Flaky(EMAMixer):
    """The example mixer, but its loss turns NaN on SULA and its code raises on the Dirichlet tunnel."""

    def mix(self, x):
        if self.training and self.spec.name == "dirichlet":
            with open(os.environ["FLAKY_LOG"], "a") as log:  # one line per attempt
                log.write("raised\\n")
            raise RuntimeError("boom in the user's code")
        y = super().mix(x)
        return y * float("nan") if self.training and self.spec.name == "sula" else y


class Peeking(EMAMixer):
    """Not causal: every position sees the last input."""

    def mix(self, x):
        return super().mix(x + x[:, -1:])
'''


@pytest.fixture
def user_models(monkeypatch, tmp_path):
    (tmp_path / "flaky_mixer.py").write_text(FLAKY)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("my_mixer", "rope_mixer", "flaky_mixer"):
        sys.modules.pop(name, None)


def _count(cfg) -> int:
    task = make_task(cfg.task, cfg.task_params)
    return count_params(cfg.model, task.spec, sized_model_params(cfg, task))


def test_a_user_model_takes_each_tunnels_transformer_shape_and_keeps_what_is_pinned(user_models):
    runs = expand(scorecard_sweep(ROPE, primitives=["transport", "sula"], rungs=False))
    mine = {r.config.task: r.config.model_params for r in runs if r.config.model == ROPE}
    for task, params in mine.items():
        ref = load_profile("quick", task)["models"]["transformer"]
        assert {k: params[k] for k in ("n_layers", "n_heads", "d_model")} == {
            k: ref[k] for k in ("n_layers", "n_heads", "d_model")}
    assert (mine["sula"]["n_layers"], mine["sula"]["d_model"]) == (2, 64)  # not its own 4 x 128
    # pinned: on every tunnel, and on one (that tunnel's wins); the other fields still inherited
    req = ScorecardRequest.build({"model": ROPE, "primitives": ["transport", "sula"], "rungs": False,
                                  "model_sets": ["n_heads=2", "sula.n_layers=1", "transport.n_heads=8"]})
    pinned = {r.config.task: r.config.model_params for r in expand(req.sweep()) if r.config.model == ROPE}
    assert (pinned["sula"]["n_heads"], pinned["sula"]["n_layers"], pinned["sula"]["d_model"]) == (2, 1, 64)
    assert (pinned["hmm"]["n_heads"], pinned["hmm"]["n_layers"]) == (8, 4)
    # every model is still matched to its tunnel's transformer, and a search starts from the very run
    for run in expand(req.sweep()):
        if run.config.model == ROPE:
            ref = next(r for r in expand(req.sweep(reference=True)) if r.experiment == run.experiment
                       and r.config.model == "transformer")
            assert abs(_count(run.config) - _count(ref.config)) <= 0.02 * _count(ref.config)
            assert tune_configs(run.config.task, [ROPE], "quick", [], req.sets)[0].model_params == run.config.model_params
    # a built-in keeps its profile's shape: no shape overrides, the runs of before
    gru = scorecard_sweep("gru", primitives=["transport"])
    assert all(not e.model_overrides for e in gru.experiments)


def test_the_preflight_sizes_every_tunnel_and_leaves_out_what_cannot_be_matched(user_models, tmp_path):
    req = ScorecardRequest.build({"model": ROPE, "primitives": ["accumulation", "sula", "counting"], "rungs": False,
                                  "model_sets": ["n_layers=4", "d_model=128", "sula.n_heads=2"]})  # its own shape
    plan = plan_scorecard(req)
    assert plan.scored.model_sets == ["n_layers=4", "d_model=128"]  # what applies to the tunnels scored
    assert all(v["from"] in SOURCES for s in plan.sizings for v in s.shape.values())
    by = {s.primitive: s for s in plan.sizings}
    assert by["accumulation"].ok and abs(by["accumulation"].matched - by["accumulation"].target) <= 0.02 * by[
        "accumulation"].target
    assert by["accumulation"].shape["n_layers"] == {"value": 4, "from": "--model-set"}
    assert by["accumulation"].shape["n_heads"] == {"value": 4, "from": "transformer"}
    assert by["accumulation"].shape["d_ffn"]["from"] == "capacity knob"
    assert set(plan.left_out) == {"sula", "counting"} and plan.scored.primitives == ["accumulation"]
    sula = by["sula"]
    assert "cannot match 105,344 parameters" in sula.error and sula.target == 105_344 and sula.matched is None
    # what would fit does fit: each suggestion, applied, lands within 2% of the target
    assert sula.fits and sula.fits[0].startswith("sula.n_layers=")
    for fit in sula.fits:
        item = fit.split(" ")[0]
        again = ScorecardRequest.build({**req.model_dump(), "primitives": ["sula"], "model_sets": [*req.model_sets, item]})
        s = plan_scorecard(again).sizings[0]
        assert s.ok and abs(s.matched - s.target) <= 0.02 * s.target and f"{s.matched:,} parameters" in fit
    # the same model at the transformer's shape matches every tunnel (the default)
    assert not plan_scorecard(ScorecardRequest.build({"model": ROPE, "rungs": False})).left_out
    # --dry-run prints the table and the plan, and writes nothing
    out = tmp_path / "card"
    res = CliRunner().invoke(app, ["scorecard", ROPE, "--primitives", "accumulation,sula", "--no-rungs", "--dry-run",
                                   "--model-set", "n_layers=4", "--model-set", "d_model=128", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "| tunnel | primitive | target | matched | knob | shape (from) |" in res.output
    assert "| sula | sula | 105,344 | not matched | d_ffn | - |" in res.output
    assert "not scored: capacity: sula (sula): cannot match" in res.output and "would fit with --model-set sula." in res.output
    assert "search: rope_mixer:RoPEMixer on bijection" in res.output and "nothing trained (--dry-run)" in res.output
    assert not out.exists()


def test_a_scorecard_goes_on_without_the_tunnel_it_cannot_match(user_models, tmp_path):
    out = tmp_path / "card"
    args = ["scorecard", ROPE, "--primitives", "accumulation,sula", "--no-rungs", "--no-tune", "--quiet", "--jobs", "1",
            "--reference", "none", "--model-set", "n_layers=4", "--model-set", "d_model=128", "--out", str(out)]
    for o in TINY:
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert res.output.index("Capacity pre-flight") < res.output.index("accumulation  (bijection")
    assert "sula          (sula, kl_bayes_model): not scored: capacity: sula: cannot match" in res.output
    card = json.loads((out / "scorecard.json").read_text())
    assert list(card["primitives"]) == ["accumulation", "sula"]
    assert card["primitives"]["accumulation"]["model"]["verdict"] in ("yes", "partial", "no")
    sula = card["primitives"]["sula"]
    assert sula["not_scored"] == "capacity" and sula["model"] is None and sula["fits"]
    assert {s["experiment"] for s in card["preflight"]} == {"bijection", "sula"}
    assert next(s for s in card["preflight"] if s["experiment"] == "bijection")["shape"]["n_layers"]["from"] == "--model-set"
    assert card["ladder"]["accumulation"][0]["shape"]["n_heads"] == {"value": 4, "from": "transformer"}
    assert card["n_runs"] == 1  # the SULA run was never planned
    page = (out / "report.md").read_text()
    assert "| sula | sula (kl bayes model) | not scored: capacity |" in page and "Not scored: the capacity pre-flight" in page


def test_a_scorecard_completes_around_a_failing_primitive(user_models, tmp_path, monkeypatch):
    """A NaN run and a run whose code raises leave their errors in their cells; the bijection's
    ladder is searched on (stage after stage), and the failed runs are not tried again meanwhile."""
    monkeypatch.setenv("FLAKY_LOG", str(tmp_path / "attempts"))
    out = tmp_path / "card"
    args = ["scorecard", "flaky_mixer:Flaky", "--primitives", "accumulation,sula,counting", "--no-tune",
            "--quiet", "--jobs", "1", "--reference", "none", "--out", str(out)]
    for o in TINY:
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "scorecard.json").read_text())
    card = doc["primitives"]
    assert card["accumulation"]["model"]["verdict"] in ("yes", "partial", "no")
    assert sum(1 for r in doc["ladder"]["accumulation"] if r.get("needed") is not False) >= 2  # climbed on
    assert (tmp_path / "attempts").read_text() == "raised\n"  # the Dirichlet run tried once
    assert sorted(n.partition("-")[0] for n in doc["failed"]) == ["dirichlet", "sula"]
    assert set(doc["failed"]) <= set(doc["missing"]) and doc["finished"] == doc["n_runs"] - 2
    assert "non-finite loss" in card["sula"]["model"]["error"]
    assert "RuntimeError: boom in the user's code" in card["counting"]["model"]["error"]
    assert "sula          (sula, kl_bayes_model): model: failed: TrainingError: non-finite loss" in res.output
    assert "failed: RuntimeError: boom" in (out / "report.md").read_text()


def test_a_failed_search_leaves_its_error_and_the_rest_is_scored(user_models, tmp_path):
    out = tmp_path / "card"
    args = ["scorecard", "flaky_mixer:Flaky", "--primitives", "accumulation,sula", "--no-rungs", "--quiet", "--jobs", "1",
            "--reference", "none", "--no-settle", "--out", str(out)]
    for o in TINY:
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    card = json.loads((out / "scorecard.json").read_text())["primitives"]
    assert card["accumulation"]["model"]["verdict"] in ("yes", "partial", "no")
    assert card["sula"]["model"]["error"].startswith("the learning-rate search failed: tune sula flaky_mixer:Flaky: "
                                                     "every candidate failed")
    assert (out / "tune-bijection-flaky_mixer.Flaky-full.json").is_file()


def test_a_default_scorecard_is_decisive_and_no_settle_keeps_the_fast_search(user_models, tmp_path):
    """Three steps leave every rate on the plateau. The default search trains each rate to the end
    (no ?); the annealed search settles the rates the guard kept (no ?); with --no-settle it stops
    them and marks the verdict ?."""
    cards = {}
    for name, extra in (("default", []), ("settled", ["--search", "annealed"]),
                        ("fast", ["--search", "annealed", "--no-settle"])):
        out = tmp_path / name
        args = ["scorecard", "my_mixer:EMAMixer", "--primitives", "accumulation", "--no-rungs", "--quiet", "--jobs",
                "1", "--reference", "none", "--out", str(out), *extra]
        for o in TINY:
            args += ["--set", o]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        search = json.loads((out / f"tune-bijection-my_mixer.EMAMixer{'-full' if name == 'default' else ''}.json")
                            .read_text())
        cards[name] = (res.output, search, json.loads((out / "scorecard.json").read_text()))
    output, search, card = cards["default"]
    assert search["spec"]["full"] is True and "unsettled" not in search
    assert sorted(c["point"]["train.lr"] for c in search["candidates"]) == [1e-3, 3.16e-3, 1e-2]
    assert not any(c["status"].startswith("stopped") for c in search["candidates"])
    assert "unsettled" not in card["primitives"]["accumulation"]["model"] and "?" not in output.split("\n\n")[-1]
    output, search, card = cards["settled"]
    assert search["spec"]["settle"] is True and "unsettled" not in search
    assert not any(c["status"].startswith("stopped") for c in search["candidates"])
    assert "unsettled" not in card["primitives"]["accumulation"]["model"] and "?" not in output.split("\n\n")[-1]
    output, search, card = cards["fast"]
    assert "settle" not in search["spec"] and search["unsettled"]
    assert card["primitives"]["accumulation"]["model"]["unsettled"] == search["unsettled"]
    assert "model: no? " in output and "run again without --no-settle" in output


def test_the_preflights_the_docs_show_are_the_commands_output():
    """docs/scorecard.md and docs/models.md show the pre-flight as the command prints it
    (scripts/render_preflight.py writes the blocks)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "render_preflight.py"
    spec = importlib.util.spec_from_file_location("render_preflight", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for page in script.PAGES:
        text = page.read_text()
        assert script.BLOCK.search(text), page
        assert script.render(text) == text, f"{page}: stale pre-flight; run python scripts/render_preflight.py"
    sys.modules.pop("rope_mixer", None)


def test_built_in_mixers_keep_their_runs_and_the_shipped_reference_serves_every_scorecard(user_models):
    """The scorecard of every built-in mixer trains the runs of mixers-quick (the same content
    hashes, so the same verdicts), and the transformer's shipped results serve a user's model too."""
    from windtunnel.sweep.config import load_sweep

    mixers = load_sweep("mixers-quick")
    shipped = {r.name for r in expand(mixers)}
    models = {m for e in mixers.experiments for m in e.models} - {"transformer"}
    assert len(models) >= 8
    for model in sorted(models):
        card = ScorecardRequest.build({"model": model})
        assert card.reference_source == "shipped", model
        assert {r.name for r in expand(card.sweep())} <= shipped, model
    assert ScorecardRequest.build({"model": ROPE, "model_sets": ["sula.n_layers=1"]}).reference_source == "shipped"


def test_a_model_that_breaks_the_contract_stops_the_scorecard_before_anything_is_written(user_models, tmp_path):
    out = tmp_path / "card"
    res = CliRunner().invoke(app, ["scorecard", "flaky_mixer:Peeking", "--primitives", "accumulation", "--no-rungs",
                                   "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "model 'flaky_mixer:Peeking' is not causal" in res.output and not out.exists()


def test_each_ladder_climbs_ahead_on_its_own_and_the_stages_find_its_runs_trained(user_models, tmp_path, monkeypatch,
                                                                                   capfd):
    """climb_ahead trains what the staged ladder search asks for, each primitive's next rung as soon
    as its last is evaluated: the same scorecard and the same runs as the stages alone, and the
    stages then train nothing."""
    from windtunnel.scorecard import climb
    from windtunnel.scorecard.score import run_scorecard
    from windtunnel.sweep import Execution

    request = ScorecardRequest.build({"model": "my_mixer:EMAMixer", "primitives": ["accumulation", "counting"],
                                      "tune": False, "reference": "none", "overrides": TINY})
    lines: list[str] = []
    ahead = run_scorecard(request, tmp_path / "ahead", Execution(workers=2, log=lines.append))  # bars asked for
    assert "steps/s" not in capfd.readouterr().err  # none from runs training side by side
    with monkeypatch.context() as m:
        m.setattr(climb, "climb_ahead", lambda request, stages: {})
        staged = run_scorecard(request, tmp_path / "staged", Execution.quiet(workers=2))

    def runs(folder):
        return sorted(d.name for d in folder.iterdir() if (d / "config.json").is_file())

    assert runs(tmp_path / "ahead") == runs(tmp_path / "staged") and len(runs(tmp_path / "ahead")) >= 4
    assert ahead.doc["primitives"] == staged.doc["primitives"] and ahead.doc["ladder"] == staged.doc["ladder"]
    stage_lines = [line for line in lines if line.startswith("sweep ")]
    assert stage_lines and all(line.endswith("0 to run") for line in stage_lines)
