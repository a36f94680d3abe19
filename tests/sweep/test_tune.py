"""windtunnel tune: successive halving over a grid, each candidate the very run a sweep would train."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.engine import jobs as jobs_module
from windtunnel.sweep import Execution
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import TrainingError, Until, train
from windtunnel.tune import search as tune_module
from windtunnel.tune.outputs import tune_markdown
from windtunnel.tune.rules import cautions, curriculum_cautions
from windtunnel.tune.rules import rank_key as _rank_key
from windtunnel.tune.search import Candidate, TuneRequest, TuneSpec, probe_at, rung_steps, tune, tune_many
from windtunnel.tune.settings import SEARCH


def tiny(**train_fields) -> RunConfig:
    """A 1-layer transformer on a 6-symbol bijection: 20 steps in about a second."""
    return RunConfig.build({
        "task": "bijection", "task_params": {"V": 6, "L": 5}, "model": "transformer",
        "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
        "train": {"steps": 20, "batch_size": 8, "lr": 3e-3, "checkpoints": 2, "threads": 1, **train_fields},
        "eval": {"n_sequences": 32, "batch_size": 32, "n_boot": 10},
    })


def test_a_paused_run_continues_to_the_weights_of_an_uninterrupted_one(tmp_path):
    cfg = tiny()
    straight = train(cfg, tmp_path / "straight", progress=False)
    paused = train(cfg, tmp_path / "paused", progress=False, until=Until(step=7))
    assert paused.steps == 7 and paused.eval == {} and RunDir(tmp_path / "paused").eval() is None
    assert probe_at(tmp_path / "paused", 7, "kl_bayes_model") is not None  # the pause has its probe
    resumed = train(cfg, tmp_path / "paused", progress=False)
    assert resumed.steps == 20
    ev_a, ev_b = straight.eval["lengths"], resumed.eval["lengths"]
    assert json.dumps(ev_a, sort_keys=True) == json.dumps(ev_b, sort_keys=True)  # bit-identical evaluation
    straight_rows = {r["step"]: r["loss"] for r in RunDir(tmp_path / "straight").metrics()}
    resumed_rows = {r["step"]: r["loss"] for r in RunDir(tmp_path / "paused").metrics()}
    assert straight_rows == resumed_rows


def test_rungs_sit_on_the_probe_grid():
    assert rung_steps(tiny(steps=1500), [0.1, 0.3]) == [150, 450]
    assert rung_steps(tiny(steps=1500, eval_every=100), [0.1, 0.33]) == [200, 500]
    assert rung_steps(tiny(steps=20), [0.01, 0.02, 0.99]) == [2]  # at least one probe in, before the end, no repeats
    with pytest.raises(ConfigError, match="compare_at"):
        TuneSpec.build({"compare_at": [0.3, 0.1]})
    # the name the comparison points had before ladder rungs took it is still read, and still written
    assert TuneSpec.build({"rungs": [0.2]}).compare_at == [0.2] and TuneSpec().to_json()["rungs"] == [0.1, 0.3]
    with pytest.raises(ConfigError, match="eta"):
        TuneSpec.build({"eta": 1})


def test_ranking_puts_failed_candidates_last_and_reads_accuracy_upwards():
    keys = {lr: _rank_key("kl_bayes_model", v, v) for lr, v in {"a": 0.2, "b": None, "c": math.nan, "d": 0.1}.items()}
    assert sorted(keys, key=keys.get)[:2] == ["d", "a"]
    acc = {lr: _rank_key("accuracy", v, kl) for lr, (v, kl) in {"a": (0.5, 0.1), "b": (0.9, 0.3), "c": (0.9, 0.2)}.items()}
    assert sorted(acc, key=acc.get) == ["c", "b", "a"]  # ties broken by the lower probe KL


def test_successive_halving_keeps_the_best_at_each_rung_and_trains_the_winner(tmp_path, monkeypatch):
    spec = TuneSpec.build({"grid": {"train.lr": [1e-4, 1e-3, 1e-2, 3e-2]}, "rungs": [0.1, 0.3]})
    res = tune(tiny(), tmp_path, spec, Execution.quiet())
    assert res.rung_steps == [2, 6, 20]
    by_lr = {c["point"]["train.lr"]: c for c in res.candidates}
    at2 = sorted(by_lr, key=lambda lr: by_lr[lr]["scores"][2])
    assert {lr for lr in by_lr if 6 in by_lr[lr]["scores"]} == set(at2[:2])  # ceil(4 / 2) go on
    survivors = [lr for lr in by_lr if 6 in by_lr[lr]["scores"]]
    best6 = min(survivors, key=lambda lr: by_lr[lr]["scores"][6])
    assert res.best == {"train.lr": best6} and by_lr[best6]["status"] == "winner"
    for lr, c in by_lr.items():  # each stopped candidate paused where it was stopped, with a checkpoint to resume
        run = RunDir(tmp_path / c["run"])
        last = max(r["step"] for r in run.metrics())
        assert last == (20 if lr == best6 else 6 if lr in survivors else 2)
        assert (run.eval() is not None) == (lr == best6)
    doc = json.loads((tmp_path / "tune-bijection-transformer.json").read_text())
    assert doc["best"] == {"train.lr": best6} and len(doc["candidates"]) == 4
    assert "| train.lr |" in (tmp_path / "tune-bijection-transformer.md").read_text()
    assert (tmp_path / "tune-bijection-transformer.csv").read_text().count("\n") == 5
    # a second call reuses every run: nothing trains again
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("checkpoints/*")}
    started = []
    run_jobs = tune_module.run_jobs
    monkeypatch.setattr(tune_module, "run_jobs", lambda jobs, *a, **k: started.extend(jobs) or run_jobs(jobs, *a, **k))
    again = tune(tiny(), tmp_path, spec, Execution.quiet())
    assert again.best == res.best and {p: p.stat().st_mtime_ns for p in tmp_path.rglob("checkpoints/*")} == stamps
    assert started == []


def test_searches_run_together_share_each_stage_and_find_what_each_finds_alone(tmp_path, monkeypatch):
    spec = TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2, 3e-2]}, "rungs": [0.3]})
    other = tiny().replace(task="hmm", task_params={"S": 2, "O": 2, "K": 6})
    alone = [tune(cfg, tmp_path / "alone", spec, Execution.quiet()) for cfg in (tiny(), other)]
    pools = []
    run_jobs = jobs_module.run_jobs

    def pooled(work, execution, stop):
        pools.append(len(work))
        return run_jobs(work, execution, stop)

    monkeypatch.setattr(tune_module, "run_jobs", pooled)
    together = tune_many([(tiny(), tmp_path / "together", spec), (other, tmp_path / "together", spec)], Execution.quiet())
    assert pools == [3 + 3, 1 + 1]  # each stage of both searches in one pool
    for a, b in zip(alone, together):
        assert (a.task, a.best, a.rung_steps) == (b.task, b.best, b.rung_steps)
        assert [c["scores"] for c in a.candidates] == [c["scores"] for c in b.candidates]
        assert [c["status"] for c in a.candidates] == [c["status"] for c in b.candidates]
    assert {p.name for p in (tmp_path / "together").glob("tune-*.json")} == {"tune-bijection-transformer.json",
                                                                            "tune-hmm-transformer.json"}


def test_searches_together_refuse_a_shared_candidate_and_keep_the_others_results(tmp_path, monkeypatch):
    spec = TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2]}, "rungs": [0.3]})
    full = TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2]}, "full": True})
    with pytest.raises(ConfigError, match="belongs to two searches"):
        tune_many([(tiny(), tmp_path, spec), (tiny(), tmp_path, full)], Execution.quiet())
    other = tiny().replace(task="hmm", task_params={"S": 2, "O": 2, "K": 6})
    real = tune_module.train_to

    def diverging(config, run_dir, *args):
        if config["task"] == "hmm":
            raise TrainingError("non-finite loss (nan) at step 1")
        return real(config, run_dir, *args)

    monkeypatch.setattr(tune_module, "train_to", diverging)
    with pytest.raises(ConfigError, match="tune hmm transformer: every candidate failed"):
        tune_many([(tiny(), tmp_path / "t", spec), (other, tmp_path / "t", spec)], Execution.quiet())
    doc = json.loads((tmp_path / "t" / "tune-bijection-transformer.json").read_text())
    assert doc["together"] == 2 and "searches run together" in (tmp_path / "t" / "tune-bijection-transformer.md").read_text()


def test_a_curriculum_compared_before_it_reaches_the_full_task_is_cautioned(tmp_path):
    spec = TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2]}, "rungs": [0.3]})
    doc = tiny().model_dump(mode="json")
    doc.update(task="regression", task_params={"d": 3, "n_points": 4})
    doc["train"]["curriculum"] = {"param": "d_active", "start": 2, "end": 3}  # the full task from step 10 of 20
    base = RunConfig.build(doc, where="test")
    res = tune(base, tmp_path, spec, Execution.quiet())
    assert any("compared at step 6, before its curriculum reaches the full task (step 10)" in c and "--full" in c
               for c in res.cautions)
    assert not curriculum_cautions([base], [])  # --full: compared at the end only


def test_the_full_search_and_the_halving_share_their_runs(tmp_path):
    grid = {"train.lr": [1e-3, 1e-2, 3e-2]}
    full = tune(tiny(), tmp_path, TuneSpec.build({"grid": grid, "full": True}), Execution.quiet())
    assert all(c["status"] in ("winner", "finished") for c in full.candidates)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("checkpoints/*")}
    halving = tune(tiny(), tmp_path, TuneSpec.build({"grid": grid}), Execution.quiet())  # read from the logs alone
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("checkpoints/*")} == stamps
    assert (tmp_path / "tune-bijection-transformer-full.json").is_file()
    assert (tmp_path / "tune-bijection-transformer.json").is_file()
    assert halving.best["train.lr"] in grid["train.lr"]
    # each table says how it was searched
    assert "Every candidate trained to the end over train.lr" in (tmp_path / "tune-bijection-transformer-full.md").read_text()
    assert "Successive halving over train.lr" in (tmp_path / "tune-bijection-transformer.md").read_text()


def tiny_tune_args(models: str, out) -> list[str]:
    """`windtunnel tune bijection MODELS` over two learning rates, each run 10 steps."""
    args = ["tune", "bijection", models, "--out", str(out), "--jobs", "1", "--grid", "train.lr=1e-3,1e-2",
            "--compare-at", "0.2"]
    for o in ("train.steps=10", "train.batch_size=8", "train.checkpoints=2", "eval.n_sequences=32",
              "eval.batch_size=32", "eval.n_boot=10", "task_params.V=5", "task_params.L=4"):
        args += ["--set", o]
    return args


def test_the_tune_command_writes_its_table_and_page_and_checks_its_arguments(tmp_path):
    out = tmp_path / "t"
    res = CliRunner().invoke(app, tiny_tune_args("mlp", out))
    assert res.exit_code == 0, res.output
    assert "### tune: mlp on bijection" in res.output
    assert (out / "report.html").is_file() and "## Tuning" in (out / "report.md").read_text()
    spec = json.loads((out / "tune-bijection-mlp.json").read_text())["spec"]
    assert (spec["cooldown"], spec["guard"], spec["keep_ties"], spec["finalists"]) == (0.2, 0.5, True, 0.15)  # SEARCH
    for bad, match in ((["--compare-at", "x"], "--compare-at"), (["--compare-at", "0.5,0.2"], "compare_at"),
                       (["--rungs", "0.5,0.2"], "compare_at"), (["--metric", "bits"], "metric"),
                       (["--jobs", "0"], "jobs")):
        fresh = tmp_path / "bad"
        res = CliRunner().invoke(app, ["tune", "bijection", "mlp", "--out", str(fresh), *bad])
        assert res.exit_code == 2 and match in res.output, res.output
        assert not fresh.exists()


def test_the_tune_command_searches_several_models_together(tmp_path):
    out = tmp_path / "t"
    res = CliRunner().invoke(app, tiny_tune_args("mlp,lstm", out))
    assert res.exit_code == 0, res.output
    assert "### tune: mlp on bijection" in res.output and "### tune: lstm on bijection" in res.output
    for m in ("mlp", "lstm"):
        doc = json.loads((out / f"tune-bijection-{m}.json").read_text())
        assert doc["together"] == 2 and doc["base"]["model"] == m
    # again, from another folder that has them all: nothing trains, the same winners
    res = CliRunner().invoke(app, [*tiny_tune_args("mlp,lstm", tmp_path / "u"), "--reuse", str(out)])
    assert res.exit_code == 0, res.output
    # the four candidates and the cooldown branch of each at the comparison: every run of the first folder
    trained = [d for d in out.iterdir() if (d / "config.json").is_file()]
    assert len(trained) == 8 and f"reused {len(trained)} run(s)" in res.output
    for m in ("mlp", "lstm"):
        assert (json.loads((tmp_path / "u" / f"tune-bijection-{m}.json").read_text())["best"]
                == json.loads((out / f"tune-bijection-{m}.json").read_text())["best"])


def test_a_curriculum_is_a_setting_the_search_tries(tmp_path):
    out = tmp_path / "t"
    args = ["tune", "regression", "transformer", "--out", str(out), "--jobs", "1", "--full", "--grid", "train.lr=1e-3",
            "--grid", 'train.curriculum=[null, {"param": "d_active", "start": 1, "end": 3}]']
    for o in ("train.steps=8", "train.batch_size=8", "train.checkpoints=1", "eval.n_sequences=16", "eval.batch_size=16",
              "eval.n_boot=10", "task_params.d=3", "task_params.n_points=4", "model_params.n_layers=1",
              "model_params.d_model=16"):
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "tune-regression-transformer-full.json").read_text())
    points = [c["point"]["train.curriculum"] for c in doc["candidates"]]
    assert points == [None, {"param": "d_active", "start": 1, "end": 3}]  # as the grid gives them
    runs = {c["run"] for c in doc["candidates"]}
    assert len(runs) == 2 and all((out / r / "eval.json").is_file() for r in runs)
    from windtunnel.report.page import tune_section

    page = "\n".join(tune_section(out))
    assert "tune_regression.png" in page and (out / "report_files" / "tune_regression.png").is_file()


def test_a_profile_commits_tuned_settings_per_architecture(monkeypatch):
    """The ``tuned`` block of a profile completes its ``train`` section for that model alone;
    ``_``-keys are notes, and overrides still win."""
    from windtunnel.train import config as train_config

    real = train_config.load_profile

    def with_tuned(profile, task):
        prof = real(profile, task)
        return {**prof, "tuned": {"lstm": {"lr": 3.16e-4, "_source": "docs/sweeps.md#tuning"}}}

    monkeypatch.setattr(train_config, "load_profile", with_tuned)
    assert train_config.resolve_run("bijection", "lstm").train.lr == 3.16e-4
    assert train_config.resolve_run("bijection", "transformer").train.lr == 3e-3
    assert train_config.resolve_run("bijection", "lstm", overrides={"train.lr": 1e-2}).train.lr == 1e-2


def cand(lr, **scores):
    return Candidate({"train.lr": lr}, tiny(lr=lr), {int(k[1:]): v for k, v in scores.items()})


def test_cautions_name_a_winner_at_the_grid_edge_and_a_plateau_at_the_last_comparison():
    spec = TuneSpec()  # lr 1e-4 .. 1e-2, compared at 10% and 30%
    # the HMM search of the MLP: 1e-2 (the upper edge) best at every rung, the best three well apart at 450
    mlp = [cand(1e-4, s150=0.4097), cand(3.16e-4, s150=0.3982, s450=0.3822), cand(1e-3, s150=0.3988),
           cand(3.16e-3, s150=0.3883, s450=0.3423), cand(1e-2, s150=0.3561, s450=0.3383, s1500=0.3259)]
    (edge,) = cautions(spec, mlp, {"train.lr": 0.01}, [150, 450])
    assert "train.lr = 0.01 is the grid's upper edge" in edge and "--grid train.lr=0.01,0.0316,0.1" in edge
    # the LSTM's: the best three within 1% at 450, and the winner 1e-4 is the lower edge
    lstm = [cand(1e-4, s150=0.4183, s450=0.4179), cand(3.16e-4, s150=0.4199, s450=0.4202),
            cand(1e-3, s150=0.4196, s450=0.4221), cand(3.16e-3, s150=0.4227), cand(1e-2, s150=0.4305)]
    edge, plateau = cautions(spec, lstm, {"train.lr": 1e-4}, [150, 450])
    assert "lower edge" in edge and "--grid train.lr=1e-05,3.16e-05,0.0001" in edge
    assert "3 candidates compared at step 450 were within 1.0%" in plateau and "--full" in plateau
    # the transformer's: an inner winner, well ahead at 450: nothing to say
    tf = [cand(1e-4, s150=0.4179, s450=0.4166), cand(3.16e-4, s150=0.4280), cand(1e-3, s150=0.4217),
          cand(3.16e-3, s150=0.3913, s450=0.0556), cand(1e-2, s150=0.3410, s450=0.2909)]
    assert cautions(spec, tf, {"train.lr": 3.16e-3}, [150, 450]) == []
    # a full search has no comparison before the end; a failed candidate (no score) is not counted
    assert cautions(spec.replace(full=True), lstm, {"train.lr": 1e-3}, []) == []
    assert cautions(spec, [cand(1e-3, s450=0.5), cand(1e-2, s450=None)], {"train.lr": 1e-3}, [450]) == []
    # two values are no edge to speak of; text axes are not numbers
    two = TuneSpec(grid={"train.lr": [1e-3, 1e-2], "train.schedule": ["cosine", "constant", "linear"]})
    assert cautions(two, [cand(1e-2, s5=1.0)], {"train.lr": 1e-2, "train.schedule": "linear"}, []) == []


def test_the_search_table_lists_its_cautions(tmp_path):
    result = tune(tiny(), tmp_path / "t", TuneSpec(grid={"train.lr": [1e-3, 3e-3, 1e-2]}), Execution.quiet())
    doc = json.loads((tmp_path / "t" / "tune-bijection-transformer.json").read_text())
    assert doc["cautions"] == result.cautions == cautions(
        TuneSpec(grid={"train.lr": [1e-3, 3e-3, 1e-2]}),
        [Candidate(c["point"], tiny(), {int(k): v for k, v in c["scores"].items()}) for c in doc["candidates"]],
        doc["best"], doc["rung_steps"][:-1])
    md = tune_markdown({**doc, "cautions": ["one", "two"]})
    assert md.rstrip().endswith("- Caution: one\n- Caution: two")


def test_an_annealed_search_compares_each_candidate_after_a_cooldown_branch(tmp_path, monkeypatch):
    """Each comparison branches every candidate from its paused run, anneals it, and ranks the
    annealed probes; the branches and the kept states live beside the runs; the same search
    again trains nothing and starts no job (nor a process) to find that out."""
    spec = TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2, 3e-2]}, "compare_at": [0.5], "cooldown": 0.2, "guard": 0.5,
                           "keep_ties": True, "keep_points": True})
    res = tune(tiny(), tmp_path, spec, Execution.quiet())
    doc = json.loads(res.files["json"].read_text())
    assert doc["spec"]["cooldown"] == 0.2 and doc["rung_steps"] == [10, 20]
    for c in doc["candidates"]:
        assert set(c["annealed"]) == {"10"} and c["annealed"]["10"] is not None and "10" in c["probe_score"]
    branches = sorted(d for d in tmp_path.iterdir() if (d / "config.json").is_file()
                      and RunConfig.build(json.loads((d / "config.json").read_text())).train.cooldown is not None)
    assert len(branches) == 3
    cfg = RunConfig.build(json.loads((branches[0] / "config.json").read_text()))
    assert cfg.train.cooldown.at == 10 and cfg.train.cooldown.steps == 2
    assert [r["step"] for r in RunDir(branches[0]).metrics()][-1] == 12  # paused after its cooldown, probed there
    assert len(list((tmp_path / "points").iterdir())) == 3
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("checkpoints/*")}
    started = []
    run_jobs = tune_module.run_jobs
    monkeypatch.setattr(tune_module, "run_jobs", lambda jobs, *a, **k: started.extend(jobs) or run_jobs(jobs, *a, **k))
    again = tune(tiny(), tmp_path, spec, Execution.quiet())
    assert again.best == res.best and {p: p.stat().st_mtime_ns for p in tmp_path.rglob("checkpoints/*")} == stamps
    assert started == []


def test_the_plateau_guard_keeps_every_candidate_while_the_leader_has_not_left_the_plateau():
    from windtunnel.tune.rules import survivors

    ranked = [("a", 0.50, 0.05), ("b", 0.51, 0.03), ("c", 0.60, -0.1), ("d", math.nan, None)]
    assert survivors(ranked, 1) == (["a"], False)  # halving as before
    assert survivors(ranked, 1, ties=True) == (["a", "b"], False)  # b within 2% of a
    assert survivors(ranked, 1, guard=0.5) == (["a", "b", "c"], True)  # the leader closes 5% of the gap: nobody stops
    assert survivors([("a", 0.1, 0.8), *ranked[1:]], 1, guard=0.5) == (["a"], False)  # left the plateau
    assert survivors([("d", math.nan, None)], 1, guard=0.5) == (["d"], False)
    assert survivors(ranked, 1, ties=True, spread=0.2) == (["a", "b", "c"], False)  # c is 17% behind a
    assert survivors(ranked, 1, spread=0.2) == (["a"], False)  # a spread without ties keeps nobody more


def test_wider_finalists_train_every_candidate_within_the_spread_to_the_end_and_the_best_there_wins(tmp_path):
    spec = TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2, 3e-2]}, "compare_at": [0.5], "keep_ties": True,
                           "finalists": 0.99})
    res = tune(tiny(), tmp_path, spec, Execution.quiet())
    ended = {c["point"]["train.lr"]: c["scores"][20] for c in res.candidates if 20 in c["scores"]}
    assert len(ended) == 3  # every probe within 99% of the leader's at step 10: all three to the end
    assert res.best == {"train.lr": min(ended, key=ended.get)}
    assert json.loads(res.files["json"].read_text())["spec"]["finalists"] == 0.99
    narrow = TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2, 3e-2]}, "compare_at": [0.5]}).to_json()
    assert "finalists" not in narrow  # the default is not written, as searches were before it
    with pytest.raises(ConfigError, match="finalists"):
        TuneSpec.build({"finalists": 1.5})
    with pytest.raises(ConfigError, match="finalists = 0.15: .*keep_ties"):
        TuneSpec.build({"finalists": 0.15})  # without ties it would change nothing: said, not ignored
    assert TuneRequest(task="hmm", models=["mlp"]).spec.finalists == 0.15  # the default search's spread
    wider = TuneRequest.build({"task": "hmm", "models": ["mlp"], "spec": {"finalists": 0.3}}).spec
    assert (wider.finalists, wider.keep_ties, wider.cooldown) == (0.3, True, 0.2)  # the annealed search, wider

    def spec(**named):
        return TuneRequest.build({"task": "hmm", "models": ["mlp"], "spec": named}).spec

    longer = spec(cooldown=0.5)  # the annealed search with a longer cooldown, as `tune --cooldown 0.5`
    assert (longer.cooldown, longer.guard, longer.keep_ties, longer.finalists) == (0.5, 0.5, True, 0.15)
    no_ties = spec(keep_ties=False)
    assert (no_ties.cooldown, no_ties.guard, no_ties.keep_ties, no_ties.finalists) == (0.2, 0.5, False, 0.02)
    assert spec(halving=False) == spec() and spec().finalists == 0.15
    plain = spec(halving=True)
    assert (plain.cooldown, plain.guard, plain.keep_ties, plain.finalists) == (0.0, None, False, 0.02)
    res = CliRunner().invoke(app, ["tune", "bijection", "transformer", "--full", "--finalists", "0.15",
                                   "--out", str(tmp_path / "x")])
    assert res.exit_code != 0 and "finalists = 0.15" in res.output and "the full search" in res.output


def test_tune_takes_the_scorecards_search_options_beside_its_own(monkeypatch, tmp_path):
    """``windtunnel tune`` names its search with --search as the scorecard does (--full and --halving
    are its short forms), takes --lrs for the grid's learning rates, and --settle / --no-settle."""
    from windtunnel.cli import runs

    seen = []
    monkeypatch.setattr(runs, "_tune", lambda request, out, how: seen.append(request.spec))
    calls = [["--halving"], ["--search", "halving"], ["--full"], ["--search", "full"], [], ["--search", "annealed"],
             ["--lrs", "1e-3,1e-2"], ["--grid", "train.lr=1e-3,1e-2"], ["--no-settle"],
             ["--settle", "--finalists", "0.3", "--cooldown", "0.5"], ["--halving", "--cooldown", "0.5"]]
    for args in calls:
        res = CliRunner().invoke(app, ["tune", "hmm", "gru", "--out", str(tmp_path), *args])
        assert res.exit_code == 0, res.output
    halving, halving2, full, full2, annealed, annealed2, lrs, grid, unsettled, wider, plain = seen
    assert halving == halving2 == plain == TuneSpec()
    assert full == full2 == TuneSpec(full=True) and annealed == annealed2 == unsettled == TuneSpec(**SEARCH)
    assert lrs == grid == TuneSpec(**SEARCH, grid={"train.lr": [1e-3, 1e-2]})
    assert wider == TuneSpec(**{**SEARCH, "finalists": 0.3, "cooldown": 0.5, "settle": True})
    for args, why in ((["--full", "--halving"], "choose one search"), (["--halving", "--finalists", "0.3"], "finalists = 0.3"),
                      (["--lrs", "1e-3", "--grid", "train.lr=1e-2"], "give the learning rates once")):
        res = CliRunner().invoke(app, ["tune", "hmm", "gru", "--out", str(tmp_path), *args])
        assert res.exit_code == 2 and why in res.output, res.output


def test_a_candidate_counts_as_finished_only_at_its_end_or_decided_under_the_searchs_own_rule(tmp_path):
    from windtunnel.train.decide import Decision
    from windtunnel.tune.candidates import reached as _reached

    config, run = tiny(), RunDir(tmp_path / "run")
    assert not _reached(run.path, config, None, None) and not _reached(run.path, config, 10, None)
    rule = Decision("kl_bayes_model")
    run.path.mkdir()
    run.write_eval({"steps": 12, "decided": rule.to_json()})
    assert _reached(run.path, config, None, rule)
    assert not _reached(run.path, config, None, Decision("kl_bayes_model", threshold=0.8))  # another rule's decision
    assert not _reached(run.path, config, None, None)  # a search that does not decide trains it on
    run.write_eval({"steps": 20})
    assert _reached(run.path, config, None, None)


def test_finalists_stopped_by_early_decisions_are_compared_at_the_same_step(tmp_path):
    """A finalist that decided early is not ranked against another's later probe: all are
    compared at the earliest step where one of them stopped (recorded as finalists_compared_at)."""
    from windtunnel.evaluate.record import METRICS
    from windtunnel.tune.search import _Search

    key = kl = METRICS["kl_bayes_model"].probe_key
    search = _Search(tiny(), tmp_path, TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2]}, "full": True}), print)
    early, late = search.candidates

    def log(c, rows):
        (tmp_path / c.run).mkdir()
        (tmp_path / c.run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, key: v}) + "\n" for s, v in rows))

    log(early, [(10, 0.09), (12, 0.05)])  # decided at step 12
    log(late, [(10, 0.08), (12, 0.06), (20, 0.03)])  # trained on: lower at 20 only for training longer
    early.scores[20], late.scores[20] = 0.05, 0.03  # each one's last probe, as advance() records it
    assert search.rank_finalists([late, early], 20) == [early, late] and search.compared_at == 12
    (tmp_path / early.run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, kl: v}) + "\n" for s, v in [(10, 0.09), (12, 0.05), (20, 0.04)]))
    early.scores[20], search.compared_at = 0.04, None
    assert search.rank_finalists([early, late], 20) == [late, early] and search.compared_at is None  # both at the end


def test_the_comparison_is_a_pure_function_of_the_probes_and_the_settings():
    """tune_rules.compare: what the live search and the studies decide by (no run, no file)."""
    from windtunnel.tune.rules import Probe, compare, rank

    probes = [Probe("a", 0.100, 0.1, 0.3), Probe("b", 0.101, 0.1, 0.29), Probe("c", 0.2, 0.2, 0.1),
              Probe("d", None), Probe("e", float("nan"))]
    halving = TuneSpec()
    v = compare(probes, halving, last=False)  # ceil(5 / 2) = 3 go on; the failed and the diverged rank last
    assert (v.go_on, v.stopped, v.unsettled, v.held) == (["a", "b", "c"], ["d", "e"], [], False)
    assert compare(probes, halving, last=True).go_on == ["a"]
    guarded = TuneSpec(guard=0.5, keep_ties=True)  # the leader's score 0.3 < 0.5: the guard holds
    v = compare(probes, guarded, last=False)
    assert v.held and v.go_on == ["a", "b", "c"]
    v = compare(probes, guarded, last=True)  # at the last comparison the leader goes on alone
    assert (v.go_on, v.unsettled, v.stopped) == (["a"], ["b", "c"], ["b", "c", "d", "e"])
    assert compare(probes, guarded.model_copy(update={"settle": True}), last=True).go_on == ["a", "b", "c"]
    ties = TuneSpec(keep_ties=True, finalists=0.15)  # no guard: "b" within 15% of the leader trains to the end
    assert compare(probes, ties, last=True).go_on == ["a", "b"]
    assert rank(probes[::-1], "kl_bayes_model") == ["a", "b", "c", "e", "d"]  # the last two tie: as given


def test_the_race_pauses_the_rivals_of_the_first_decision_and_changes_no_pick(tmp_path, monkeypatch):
    """Under early decisions the finalists are compared at the earliest decided step, so a rival
    pauses there (resumable) rather than training on: the same winner and the same evaluation as
    the search without the race, and fewer steps trained."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
    from test_decide import EASY
    from test_decide import tiny as tiny_decide

    from windtunnel.train.checkpoint import resumable_steps

    monkeypatch.setattr(tune_module, "Decision", lambda metric: EASY)  # reached by this tiny model (test_decide)
    spec = TuneSpec.build({"grid": {"train.lr": [3e-2, 1e-2, 3e-3]}, "full": True, "decide_early": True})
    raced = tune(tiny_decide(), tmp_path / "race", spec, Execution.quiet())
    with monkeypatch.context() as m:
        m.setattr(tune_module, "Race", lambda path: None)
        plain = tune(tiny_decide(), tmp_path / "plain", spec, Execution.quiet())
    assert raced.best == plain.best and raced.winner["eval"] == plain.winner["eval"]
    doc = json.loads(raced.files["json"].read_text())
    first = doc["finalists_compared_at"]
    assert first == json.loads(plain.files["json"].read_text())["finalists_compared_at"] < 120
    paused = [c for c in raced.candidates if c["status"].startswith("paused")]
    assert paused and all(c["status"] == f"paused at step {first}: another rate was decided realised there first"
                          for c in paused)
    for c in paused:  # resumable where the race was won, not evaluated; the plain search trained it on
        assert resumable_steps(tmp_path / "race" / c["run"])[-1] == first
        assert RunDir(tmp_path / "race" / c["run"]).eval() is None
        assert RunDir(tmp_path / "plain" / c["run"]).eval()["steps"] > first
    assert not list((tmp_path / "race").glob("*.race.json"))  # the race is over
    again = tune(tiny_decide(), tmp_path / "race", spec, Execution.quiet().but(log=(lines := []).append))
    assert again.best == raced.best and not any(line.startswith("[") for line in lines)  # nothing trains again


def test_a_winner_the_race_paused_goes_on_to_its_end(tmp_path, monkeypatch):
    from windtunnel.tune.search import _Search

    search = _Search(tiny(), tmp_path, TuneSpec.build({"grid": {"train.lr": [1e-3, 1e-2]}, "full": True,
                                                       "decide_early": True}), print)
    winner, rival = search.candidates
    search.race.record(12, rival.run)
    done = {rival.run}
    monkeypatch.setattr(_Search, "finished", lambda self, c: c.run in done)
    search.finish([winner, rival])
    assert search.alive == [winner] and not search.done and winner.status == "running"
    assert rival.status == "running" and not search.race.path.exists()  # finished: it keeps its place
    done.add(winner.run)
    search.finish([winner])
    assert search.done and search.alive == [winner]
    search.race.record(12, rival.run)
    done.discard(rival.run)
    search.i = 0
    search.finish([winner, rival])  # a winner at its end: done, the paused rival marked
    assert search.done and rival.status == "paused at step 12: another rate was decided realised there first"
