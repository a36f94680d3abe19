"""windtunnel scorecard: a user's mixer from a file outside the package, trained, scored and diagnosed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.geometry.diagnose import run_diagnostics
from windtunnel.scorecard.score import PRIMITIVES, ScorecardRuns, scorecard_doc, scorecard_sweep
from windtunnel.sweep import expand
from windtunnel.sweep.config import load_sweep
from windtunnel.train.config import load_profile, tuned_train
from windtunnel.train.trainer import build

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
USER = "my_mixer:EMAMixer"
TINY = ["train.steps=3", "train.batch_size=8", "train.checkpoints=2", "train.threads=1", "eval.n_sequences=32",
        "eval.batch_size=32", "eval.n_boot=10", "model_params.n_layers=1", "model_params.d_model=32"]


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("my_mixer", None)


def test_the_scorecard_sweep_covers_the_tunnels_of_its_profile(examples_on_path):
    quick = scorecard_sweep(USER, "quick", seeds=2, rungs=False)
    assert [e.task for e in quick.experiments] == [task for task, _ in PRIMITIVES.values()]
    assert all(e.models == ["transformer", USER] and e.match_capacity == "transformer" for e in quick.experiments)
    assert quick.grid == {"train.seed": [0, 1]} and set(quick.primitives.rules) == set(PRIMITIVES)
    paper = scorecard_sweep(USER, "paper")  # the paper profiles have Paper I's three tunnels
    assert set(paper.primitives.rules) == {"accumulation", "transport", "binding"}
    with pytest.raises(ConfigError, match="has no config for task"):
        scorecard_sweep(USER, "paper", primitives=["sula"])
    with pytest.raises(ConfigError, match="choose from accumulation"):
        scorecard_sweep(USER, primitives=["memory"])
    # the user model, named by no profile, is sized on its knob to the transformer's count
    runs = expand(scorecard_sweep(USER, primitives=["transport"], rungs=False))
    counts = {r.config.model: build(r.config)[1].n_params() for r in runs}
    assert runs[1].config.model_params["init"] == "torch"  # the quick HMM profile's model_defaults
    assert abs(counts[USER] - counts["transformer"]) / counts["transformer"] <= 0.02


def test_the_ladders_are_rungs_of_each_tunnels_own_parameters():
    """Every rung is a parameter setting of the same task; the profile's own rung keeps the plain
    experiment name, so its runs are paper1-quick's (the same content hashes)."""
    card = scorecard_sweep("mamba")
    exps = {e.label(e.task): e for e in card.experiments}
    assert list(exps) == ["bijection@V5_L4", "bijection@V10_L9", "bijection", "hmm@S2_O2", "hmm@S3_O3", "hmm",
                          "recall@N4_M4", "recall", "recall@N16_M16", "regression@d2", "regression@d4", "regression",
                          "sula", "kalman@n1", "kalman", "kalman@n4", "dirichlet@n_cat4", "dirichlet",
                          "dirichlet@n_cat16", "changepoint@h0.02", "changepoint", "changepoint@h0.1"]
    assert exps["hmm@S2_O2"].override_pairs == [("task_params.S", 2), ("task_params.O", 2)]
    assert card.primitives.rules["transport@S3_O3"].experiment == "hmm@S3_O3"
    assert card.primitives.rules["transport"].experiment == "hmm"
    runs = expand(card)
    own = {r.name for r in runs if r.experiment in ("bijection", "hmm", "recall")}  # Paper I's tunnels
    assert len(own) == 6 and own <= {r.name for r in expand(load_sweep("paper1-quick"))}
    hmm3 = next(r.config for r in runs if r.experiment == "hmm@S3_O3" and r.config.model == "mamba")
    assert (hmm3.task_params["S"], hmm3.task_params["O"], hmm3.task_params["K"]) == (3, 3, 20)
    # a tuned learning rate reaches that model's runs on every rung of its tunnel, and no other's
    point = {"hmm": {"mamba": {"train.lr": 3.16e-4}}}
    tuned = expand(scorecard_sweep("mamba", primitives=["transport"], runs=ScorecardRuns(point)))
    prof = load_profile("quick", "hmm")  # the transformer at the rate its profile gives it
    assert {(r.config.model, r.config.train.lr) for r in tuned} == {
        ("mamba", 3.16e-4), ("transformer", {**prof["train"], **tuned_train(prof, "transformer")}["lr"])}
    assert len(tuned) == 6


def test_scorecard_sweep_and_doc_take_their_old_keywords_with_a_warning(tmp_path):
    """scorecard_sweep's tuned, train_reference, decide_early and model_sets are ScorecardRuns now,
    scorecard_doc's out, tuned, overrides, skipped and reference ScorecardProvenance: the keywords
    (and the old positional place of the first) still give the same sweep and document."""
    from windtunnel.scorecard.score import ScorecardProvenance, ScorecardRuns

    point = {"hmm": {"mamba": {"train.lr": 3.16e-4}}}
    new = scorecard_sweep("mamba", "quick", 1, ["transport"], True, ScorecardRuns(point, decide_early=True))
    with pytest.warns(DeprecationWarning, match=r"scorecard_sweep\(tuned=..., decide_early=...\) is deprecated"):
        assert scorecard_sweep("mamba", primitives=["transport"], tuned=point, decide_early=True) == new
    with pytest.warns(DeprecationWarning, match="scorecard_sweep"):  # tuned in its old place
        assert scorecard_sweep("mamba", "quick", 1, ["transport"], True, point, decide_early=True) == new
    with pytest.raises(TypeError, match="not both"):
        scorecard_sweep("mamba", runs=ScorecardRuns(point), decide_early=True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        scorecard_sweep("mamba", seed=1)
    summary = {"finished": 0, "n_runs": 6, "missing": [], "primitives": {}}
    doc = scorecard_doc(summary, new, "mamba", ScorecardProvenance(tmp_path, skipped={"hmm@S2_O2"}, reference="none"))
    with pytest.warns(DeprecationWarning, match="scorecard_doc"):
        assert scorecard_doc(summary, new, "mamba", tmp_path, skipped={"hmm@S2_O2"}, reference="none") == doc
    assert doc["reference_source"] == "none" and doc["ladder"]["transport"][0]["needed"] is False


def test_scorecard_json_reads_every_rung_and_the_highest_realised():
    card = scorecard_sweep("mamba", primitives=["transport"])
    verdict = {"transport@S2_O2": "yes", "transport@S3_O3": "yes", "transport": "no"}
    summary = {"finished": 6, "n_runs": 6, "missing": [],
               "primitives": {"mamba": {k: {"score": 0.9 if v == "yes" else 0.1, "verdict": v} for k, v in verdict.items()},
                              "transformer": {k: {"score": 0.1, "verdict": "no"} for k in verdict}}}
    doc = scorecard_doc(summary, card, "mamba")
    assert [s["experiment"] for s in doc["ladder"]["transport"]] == ["hmm@S2_O2", "hmm@S3_O3", "hmm"]
    assert doc["ladder"]["transport"][0]["params"] == {"task_params.S": 2, "task_params.O": 2}
    assert doc["primitives"]["transport"]["model"]["verdict"] == "no"
    assert doc["highest"] == {"mamba": {"transport": "hmm@S3_O3"}, "transformer": {"transport": None}}
    # each verdict names where the rate came from: HMM commits both (each entry names its table)
    prof = load_profile("quick", "hmm")["tuned"]
    delta = scorecard_doc(summary | {"primitives": {"deltanet": summary["primitives"]["mamba"],
                                                    "transformer": summary["primitives"]["transformer"]}},
                          scorecard_sweep("deltanet", primitives=["transport"]), "deltanet")
    tuning = delta["primitives"]["transport"]["tuning"]
    assert tuning == {who: {"source": prof[who]["_source"], "cautions": [], "best": {"train.lr": prof[who]["lr"]}}
                      for who in ("deltanet", "transformer")}
    assert prof["deltanet"]["lr"] != prof["transformer"]["lr"]  # so a swap would show


def test_a_scorecard_verdict_carries_the_cautions_of_the_search_behind_it(tmp_path):
    """A model the profile commits nothing for takes its search's best point and cautions from the
    folder's tune table; without a search (or a profile task) it has none."""
    from windtunnel.scorecard.score import scorecard_cautions, tuning_of

    (tmp_path / "tune-bijection-my_mixer.EMAMixer.json").write_text(json.dumps(
        {"best": {"train.lr": 1e-2}, "cautions": ["best train.lr = 0.01 is the grid's upper edge"]}))
    mine = tuning_of(tmp_path, "quick", "bijection", "my_mixer:EMAMixer", searched=True)
    assert mine == {"source": "tune-bijection-my_mixer.EMAMixer.json", "best": {"train.lr": 1e-2},
                    "cautions": ["best train.lr = 0.01 is the grid's upper edge"]}
    # a search left in the folder that this scorecard did not use (--no-tune) is not its source
    assert tuning_of(tmp_path, "quick", "bijection", "my_mixer:EMAMixer") is None
    assert tuning_of(tmp_path, "quick", "recall", "my_mixer:EMAMixer", searched=True) is None
    assert tuning_of(None, "paper", "sula", "gru") is None  # the paper profile has no SULA config
    # a committed value wins over a search file, and a --set train.lr over both (it applies last)
    (tmp_path / "tune-hmm-gru.json").write_text(json.dumps({"best": {"train.lr": 1e-2}, "cautions": ["x"]}))
    assert tuning_of(tmp_path, "quick", "hmm", "gru", searched=True)["source"] == "docs/sweeps.md#what-the-searches-found"
    assert tuning_of(tmp_path, "quick", "hmm", "gru", True, {"train.lr": 5e-4}) == {
        "source": "--set", "best": {"train.lr": 5e-4}, "cautions": []}
    with pytest.raises(ConfigError, match="unknown profile"):
        tuning_of(tmp_path, "fast", "hmm", "gru")
    row = {"task": "bijection", "tuning": {"my_mixer:EMAMixer": mine, "transformer": None}}
    assert scorecard_cautions(row) == ["my_mixer:EMAMixer's bijection search (tune-bijection-my_mixer.EMAMixer.json): "
                                       "best train.lr = 0.01 is the grid's upper edge"]


def test_scorecard_tunes_each_model_the_profile_commits_nothing_for(tmp_path, examples_on_path):
    out = tmp_path / "card"
    args = ["scorecard", USER, "--primitives", "accumulation", "--out", str(out), "--quiet", "--no-rungs", "--jobs", "1",
            "--reference", "train", "--search", "annealed"]  # the annealed search: its branches are reused too
    for o in TINY:
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    tuned = {p.name for p in out.glob("tune-*.json")}
    committed = "transformer" in load_profile("quick", "bijection").get("tuned", {})
    assert tuned == {"tune-bijection-my_mixer.EMAMixer.json"} | (set() if committed else {"tune-bijection-transformer.json"})
    best = json.loads((out / "tune-bijection-my_mixer.EMAMixer.json").read_text())["best"]["train.lr"]
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert {r["config"]["train"]["lr"] for r in runs if r["config"]["model"] == USER} == {best}
    assert "## Tuning" in (out / "report.md").read_text()
    card = json.loads((out / "scorecard.json").read_text())["primitives"]["accumulation"]["tuning"][USER]
    assert card["source"] == "tune-bijection-my_mixer.EMAMixer.json" and card["best"]["train.lr"] == best
    # a second scorecard reuses the first's search candidates (paused or finished) and runs: nothing trains
    again = tmp_path / "again"
    res = CliRunner().invoke(app, [*args[:5], str(again), *args[6:], "--reuse", str(out)])
    assert res.exit_code == 0, res.output
    candidates = [c["run"] for c in json.loads((out / "tune-bijection-my_mixer.EMAMixer.json").read_text())["candidates"]]
    branches = [d for d in out.iterdir() if (d / "config.json").is_file() and "cooldown" in (d / "config.json").read_text()]
    assert branches  # each candidate's annealed branch at the comparison, reused too
    assert f"reused {len(candidates) + len(branches) + (0 if committed else 5)} run(s)" in res.output
    for run in candidates:
        assert (again / run / "metrics.jsonl").read_bytes() == (out / run / "metrics.jsonl").read_bytes()
    assert json.loads((again / "tune-bijection-my_mixer.EMAMixer.json").read_text())["best"]["train.lr"] == best
    # a fixed learning rate and tuning exclude each other: refused before anything is written
    res = CliRunner().invoke(app, ["scorecard", USER, "--out", str(tmp_path / "no"), "--set", "train.lr=1e-3"])
    assert res.exit_code == 2 and "--no-tune" in res.output and not (tmp_path / "no").exists()


def test_scorecard_trains_scores_and_diagnoses_a_user_mixer(tmp_path, examples_on_path):
    out = tmp_path / "card"
    args = ["scorecard", USER, "--primitives", "accumulation,continuous", "--out", str(out), "--quiet", "--no-tune",
            "--jobs", "1", "--reference", "train"]
    for o in TINY:
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    card = json.loads((out / "scorecard.json").read_text())
    assert card["model"] == USER and card["reference"] == "transformer" and card["finished"] == card["n_runs"] == 12
    assert [s["rung"] for s in card["ladder"]["continuous"]] == ["d2", "d4", "profile"]
    for prim in ("accumulation", "continuous"):
        row = card["primitives"][prim]
        for who in ("model", "transformer"):
            assert row[who]["verdict"] in ("yes", "partial", "no") and row[who]["score_lo"] <= row[who]["score_hi"]
    page = (out / "report.md").read_text()
    assert f"## Scorecard: {USER}" in page and "| accumulation | bijection" in page
    # the ladder table once (the summary's), then a heat map per laddered primitive
    assert page.count("Difficulty ladders") == 1 and "| continuous (regression@d2, " in page.replace("\\_", "_")
    assert all((out / "report_files" / f).is_file() for f in ("ladder-0_accumulation.png", "ladder-1_continuous.png"))
    assert page.index("## Difficulty ladders") < page.index("### Ladder heat maps") < page.index("## Scorecard")
    assert (out / "report.html").is_file()
    # the user model's run folder opens, and every analysis that applies runs; the rest say why not
    run = next(p for p in out.iterdir() if p.name.startswith("bijection-my_mixer.EMAMixer-"))
    doc = run_diagnostics(run, progress=False)
    assert "value_manifold" in doc["analyses_run"] and "logit_lens" in doc["analyses_run"]
    assert "attention" in doc["skipped"] and doc["skipped"]["attention"]
    # a second scorecard in a new folder reuses the first's finished runs, stage by stage of its
    # ladder search: nothing trains again
    res = CliRunner().invoke(app, [*args[:5], str(tmp_path / "again"), *args[6:], "--reuse", str(out)])
    assert res.exit_code == 0, res.output
    import re

    assert sum(int(n) for n in re.findall(r"reused (\d+) run\(s\)", res.output)) == 12
    assert "12 finished (skipped), 0 to run" in res.output and "started" not in res.output
    assert json.loads((tmp_path / "again" / "scorecard.json").read_text())["primitives"] == card["primitives"]


def test_docs_show_the_example_mixer_whole():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    assert (EXAMPLES / "my_mixer.py").read_text().rstrip("\n") in docs


def test_the_report_lists_the_cautions_behind_the_scorecard(tmp_path):
    from windtunnel.report.scorecard import scorecard_section

    search = {"source": "tune-hmm-my_mixer.EMAMixer.json", "best": {"train.lr": 1e-4},
              "cautions": ["the 3 candidates compared at step 450 were within 0.5% of each other"]}
    verdict = {"score": -2.6, "verdict": "no"}
    doc = {"model": USER, "reference": "transformer", "seeds": [0], "finished": 2, "n_runs": 2, "realised": 0.9,
           "partial": 0.5, "primitives": {"transport": {"task": "hmm", "metric": "kl_bayes_model", "model": verdict,
                                                        "transformer": verdict, "tuning": {USER: search, "transformer": None}}},
           "ladder": {"transport": [{"rung": "profile"}]}, "highest": {}}
    (tmp_path / "scorecard.json").write_text(json.dumps(doc))
    page = "\n".join(scorecard_section(tmp_path))
    assert "Cautions of the learning-rate searches" in page
    assert f"- {USER}'s hmm search (tune-hmm-my_mixer.EMAMixer.json): the 3 candidates compared" in page
    doc["primitives"]["transport"]["tuning"][USER] = {**search, "cautions": []}
    (tmp_path / "scorecard.json").write_text(json.dumps(doc))
    assert "Cautions" not in "\n".join(scorecard_section(tmp_path))


def test_the_scorecards_search_takes_the_finalists_spread_and_refuses_it_without_a_last_comparison(tmp_path):
    from windtunnel.scorecard.score import ScorecardRequest
    from windtunnel.tune.search import SEARCH

    annealed = {"model": "gru", "lr_search": {"search": "annealed"}}
    assert ScorecardRequest.build(annealed).search_spec("kl_bayes_model").finalists == SEARCH["finalists"]
    wider = {"model": "gru", "lr_search": {"search": "annealed", "finalists": 0.3}}
    assert ScorecardRequest.build(wider).search_spec("kl_bayes_model").finalists == 0.3
    with pytest.raises(ConfigError, match="lr_search: finalists = 0.3: .*the plain halving.* has no such comparison"):
        ScorecardRequest.build({"model": "gru", "lr_search": {"finalists": 0.3, "search": "halving"}})
    with pytest.raises(ConfigError, match="lr_search: finalists = 0.3: .*the full search .* has no such comparison"):
        ScorecardRequest.build({"model": "gru", "lr_search": {"finalists": 0.3}})
    with pytest.raises(ConfigError, match=r"lr_search.finalists = 0.3: .*tune = false \(no search\) runs none"):
        ScorecardRequest.build({**wider, "tune": False})
    assert SEARCH["finalists"] == 0.15
    res = CliRunner().invoke(app, ["scorecard", "gru", "--search", "full", "--finalists", "0.3", "--out",
                                   str(tmp_path / "no")])
    assert res.exit_code == 2 and "finalists = 0.3" in res.output and not (tmp_path / "no").exists()


def test_the_scorecards_default_search_trains_the_three_central_rates_to_the_end():
    """By default each candidate of SCORECARD_LRS trains to the end (decisive by construction: no
    rate is stopped); --lrs and --search choose others; bad values are refused before anything runs."""
    from windtunnel.scorecard.score import SCORECARD_LRS, ScorecardRequest
    from windtunnel.tune.search import DEFAULT_LRS

    spec = ScorecardRequest.build({"model": "gru"}).search_spec("accuracy")
    assert spec.full and spec.decide_early and spec.grid == {"train.lr": [1e-3, 3.16e-3, 1e-2]} == {
        "train.lr": SCORECARD_LRS}
    assert set(SCORECARD_LRS) < set(DEFAULT_LRS)
    two = {"model": "gru", "lr_search": {"search": "annealed", "lrs": [1e-3, 1e-2]}}
    spec = ScorecardRequest.build(two).search_spec("accuracy")
    assert not spec.full and spec.guard == 0.5 and spec.grid == {"train.lr": [1e-3, 1e-2]}
    assert not ScorecardRequest.build({"model": "gru", "lr_search": {"search": "halving"}}).search_spec("accuracy").guard
    for bad, why in (([0.0], "positive"), ([1e-3, 1e-3], "distinct"), ([], "at least 1")):
        with pytest.raises(ConfigError, match=why):
            ScorecardRequest.build({"model": "gru", "lr_search": {"lrs": bad}})
    with pytest.raises(ConfigError, match=r"lr_search.lrs = \[0.001\]: .*tune = false \(no search\) runs none"):
        ScorecardRequest.build({"model": "gru", "lr_search": {"lrs": [1e-3]}, "tune": False})


def test_the_old_search_flags_read_as_search_with_a_warning():
    from windtunnel.scorecard.score import ScorecardRequest

    for old, new in (({"full": True}, "full"), ({"halving": True}, "halving"), ({"full": False}, "annealed")):
        with pytest.warns(DeprecationWarning, match="search = "):
            assert ScorecardRequest.build({"model": "gru", **old}).lr_search.search == new
    with pytest.raises(ConfigError, match="choose one search"):
        ScorecardRequest.build({"model": "gru", "full": True, "halving": True})
    with pytest.raises(ConfigError, match="disagree"):
        ScorecardRequest.build({"model": "gru", "full": True, "search": "annealed"})


def test_the_flat_search_settings_of_a_scorecard_request_read_into_lr_search_with_a_warning():
    """Before ``lr_search``, a ScorecardRequest took its search settings flat: they still load (and
    read back under their old names), each with a DeprecationWarning, into the same request."""
    from windtunnel.scorecard.score import ScorecardRequest, ScorecardSearch

    flat = {"model": "gru", "search": "annealed", "lrs": [1e-3, 1e-2], "settle": False, "finalists": 0.3}
    with pytest.warns(DeprecationWarning, match=r"ScorecardRequest\(search=\.\.\., lrs=.*lr_search="):
        old = ScorecardRequest.build(flat)
    nested = ScorecardRequest.build({"model": "gru", "lr_search": {k: v for k, v in flat.items() if k != "model"}})
    assert old == nested and old.search_spec("accuracy") == nested.search_spec("accuracy")
    assert old.lr_search == ScorecardSearch(search="annealed", lrs=[1e-3, 1e-2], settle=False, finalists=0.3)
    for name in ("search", "lrs", "settle", "finalists"):
        with pytest.warns(DeprecationWarning, match=f"ScorecardRequest.{name} is deprecated; use "
                                                    f"ScorecardRequest.lr_search.{name}"):
            assert getattr(old, name) == flat[name]
    with pytest.raises(ConfigError, match="lrs: given flat and in lr_search"):
        ScorecardRequest.build({"model": "gru", "lrs": [1e-3], "lr_search": {"lrs": [1e-2]}})
    with pytest.warns(DeprecationWarning):  # the rest of lr_search stays
        assert ScorecardRequest.build({"model": "gru", "lrs": [1e-3], "lr_search": {"search": "halving"}}).lr_search \
            == ScorecardSearch(search="halving", lrs=[1e-3])


def test_the_scorecard_and_tune_share_one_search_settings_model():
    """``ScorecardSearch`` is ``SearchSettings`` with the scorecard's defaults (every rate to the end,
    settled where annealed); both make their TuneSpec the same way, and ``windtunnel tune`` takes
    the scorecard's search options (--search, --lrs) as well as its own --full and --halving."""
    from windtunnel.scorecard.score import ScorecardSearch
    from windtunnel.tune.settings import SEARCH, SearchSettings, TuneSpec

    assert issubclass(ScorecardSearch, SearchSettings)
    assert (ScorecardSearch().search, ScorecardSearch().settle) == ("full", True)
    assert (SearchSettings().search, SearchSettings().settle) == ("annealed", False)
    assert SearchSettings().spec() == TuneSpec(**SEARCH)
    assert SearchSettings(search="halving").spec(lrs=[1e-3]) == TuneSpec(grid={"train.lr": [1e-3]})
    assert SearchSettings(search="full", lrs=[1e-2]).spec(lrs=[1e-3]) == TuneSpec(full=True, grid={"train.lr": [1e-2]})
    with pytest.raises(ConfigError, match="give the learning rates once"):
        SearchSettings(lrs=[1e-3]).named(grid={"train.lr": [1e-2]})
    with pytest.raises(ConfigError, match="finalists = 0.3: .*the full search"):
        SearchSettings.build({"search": "full", "finalists": 0.3})


def test_the_scorecards_lrs_option_is_checked_before_anything_runs(tmp_path):
    res = CliRunner().invoke(app, ["scorecard", "gru", "--lrs", "1e-3,fast", "--out", str(tmp_path / "no")])
    assert res.exit_code == 2 and "--lrs '1e-3,fast': comma-separated numbers" in res.output
    assert not (tmp_path / "no").exists()
