"""Sweep configs: validation, grids, expansion into run configs, the shipped sweeps."""

import json

import pytest
from sweep_tiny import tiny_sweep_doc

from windtunnel.config import ConfigError
from windtunnel.sweep import expand, load_sweep, sweep_names
from windtunnel.sweep.config import SweepConfig, parse_grid_option
from windtunnel.sweep.expand import grid_points
from windtunnel.train.config import load_profile, tuned_train
from windtunnel.train.trainer import build


def test_grid_points_is_the_cartesian_product_in_order():
    pts = grid_points({"train.seed": [0, 1], "train.lr": [1e-3, 3e-4, 1e-4]})
    assert len(pts) == 6
    assert pts[0] == {"train.seed": 0, "train.lr": 1e-3} and pts[-1] == {"train.seed": 1, "train.lr": 1e-4}
    assert grid_points({}) == [{}]


def test_expand_crosses_experiments_models_and_grid(tiny_sweep):
    runs = expand(tiny_sweep())
    assert len(runs) == 2 * 2 + 2 * 1
    assert len({r.name for r in runs}) == len(runs)
    bij = [r for r in runs if r.experiment == "bijection"]
    assert {(r.config.model, r.config.train.seed) for r in bij} == {(m, s) for m in ("transformer", "lstm") for s in (0, 1)}
    for r in runs:
        assert r.labels["train.seed"] == r.config.train.seed
        assert r.config.train.steps == 12  # the sweep's overrides reach every run
        assert r.config.profile == "quick"
    hmm = [r for r in runs if r.experiment == "hmm"]
    assert all(r.config.eval.lengths == [30] for r in hmm)


def test_capacity_matching_counts_the_trained_model(tiny_sweep):
    """HMM is evaluated at K = 30, so position tables grow; matching must count them."""
    for r in expand(tiny_sweep()):
        if r.experiment != "hmm":
            continue
        counts = {}
        for rr in expand(tiny_sweep()):
            if rr.experiment == "hmm" and rr.config.train.seed == r.config.train.seed:
                counts[rr.config.model] = build(rr.config)[1].n_params()
        ref = counts["transformer"]
        assert all(abs(c - ref) / ref <= 0.02 for c in counts.values()), counts


def test_override_order_grid_wins_over_experiment(tiny_sweep):
    doc = tiny_sweep_doc(grid={"train.lr": [0.01]})
    doc["experiments"][0]["overrides"].append("train.lr=0.5")
    runs = expand(SweepConfig.build(doc))
    assert all(r.config.train.lr == 0.01 for r in runs)
    runs = expand(SweepConfig.build(doc), overrides={"train.lr": 0.2})  # the command line wins over both
    assert all(r.config.train.lr == 0.2 for r in runs)
    runs = expand(SweepConfig.build(doc), grid={"train.seed": [3]})
    assert {r.config.train.seed for r in runs} == {3}


def test_a_run_shared_by_two_experiments_appears_under_both(tiny_sweep):
    doc = tiny_sweep_doc()
    doc["experiments"].append({**doc["experiments"][0], "name": "again"})
    runs = expand(SweepConfig.build(doc))
    again = [r for r in runs if r.experiment == "again"]
    assert len(runs) == 10 and len(again) == 4
    assert {r.name for r in again} == {r.name for r in runs if r.experiment == "bijection"}
    doc["experiments"].append(doc["experiments"][0])  # the very same experiment twice: dropped
    with pytest.raises(ConfigError, match="experiment names must be unique"):
        SweepConfig.build(doc)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"grid": {"seed": [0]}}, "section.field with section one of task_params"),
        ({"grid": {"train.seed": []}}, "non-empty list"),
        ({"paper": "paper9"}, "paper = 'paper9' is unknown"),
        ({"primitives": {"rules": {"binding": {"experiment": "recall", "metric": "accuracy"}}}}, "refers to experiment 'recall'"),
        ({"primitives": {"rules": {}, "realised": 0.4, "partial": 0.6}}, "partial (0.6) must not exceed realised"),
        ({"bogus": 1}, "unknown field 'bogus'"),
        ({"experiments": []}, "experiments"),
    ],
)
def test_bad_sweeps_name_the_field(change, message):
    with pytest.raises(ConfigError, match="invalid sweep") as err:
        SweepConfig.build(tiny_sweep_doc(**change), where="sweep")
    assert message in str(err.value)


def test_bad_run_fields_surface_at_expansion(tiny_sweep):
    with pytest.raises(ConfigError, match="train.stepz|stepz"):
        expand(tiny_sweep(overrides=["train.stepz=3"]))
    doc = tiny_sweep_doc()
    doc["experiments"][0]["models"] = ["transformer", "nope"]
    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        expand(SweepConfig.build(doc))


def test_parse_grid_option():
    assert parse_grid_option("train.seed=0,1,2") == ("train.seed", [0, 1, 2])
    assert parse_grid_option("train.lr=[0.001,0.0003]") == ("train.lr", [0.001, 0.0003])
    assert parse_grid_option("task_params.format=sepvocab,paired") == ("task_params.format", ["sepvocab", "paired"])
    with pytest.raises(ConfigError, match="must look like"):
        parse_grid_option("train.seed")
    with pytest.raises(ConfigError, match="section one of"):
        parse_grid_option("seed=1,2")


def test_load_sweep_by_name_and_path(tmp_path):
    assert {"paper1", "paper1-quick"} <= set(sweep_names())
    with pytest.raises(ConfigError, match="unknown sweep 'nope'"):
        load_sweep("nope")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_sweep(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_sweep(tmp_path / "missing.json")


def test_paper1_quick_is_the_comparison_on_the_quick_profiles():
    sweep = load_sweep("paper1-quick")
    runs = expand(sweep)
    assert len(runs) == 15
    assert {(r.config.task, r.config.model) for r in runs} == {
        (t, m) for t in ("bijection", "hmm", "recall") for m in ("transformer", "mamba", "lstm", "mlp")}
    pp = [r for r in runs if r.experiment.endswith("-per-position")]  # both MLP variants on every task
    assert sorted(r.experiment for r in pp) == ["bijection-per-position", "hmm-per-position", "recall-per-position"]
    assert all(r.config.model_params["variant"] == "per_position" for r in pp)
    for r in pp:  # matched to the (trained) transformer of its task, which the variant override left alone
        tf = next(t for t in runs if t.config.task == r.config.task and t.config.model == "transformer")
        ref = build(tf.config)[1].n_params()
        assert abs(build(r.config)[1].n_params() - ref) / ref <= 0.02
    hmm = [r for r in runs if r.config.task == "hmm"]
    assert all(r.config.eval.lengths == [30, 50] and r.config.task_params["K"] == 20 for r in hmm)
    assert set(sweep.primitives.rules) == {"accumulation", "transport", "binding"}
    for task in ("bijection", "hmm", "recall"):  # within a task: same steps, data, optimiser and init law
        mine = [r.config for r in runs if r.config.task == task]
        prof = load_profile("quick", task)
        for c in mine:  # each architecture at the rate its profile commits (its search's winner), else the shared one
            assert c.train.lr == {**prof["train"], **tuned_train(prof, c.model)}["lr"], (task, c.model)
        assert len({c.train.model_copy(update={"lr": 0.0}).model_dump_json() for c in mine}) == 1, task
        assert len({json.dumps(c.task_params, sort_keys=True) for c in mine}) == 1, task
        assert len({c.model_params.get("init", "normal") for c in mine}) == 1, task
        assert not any(c.model_params.get("tie_head") for c in mine if task != "bijection"), task
    recall = next(r.config for r in runs if r.config.task == "recall")
    assert recall.task_params["M"] == recall.task_params["N"]  # every stored key queried
    assert sweep.diagnose is not None and set(sweep.diagnose.models) == {"transformer", "mamba"}


def test_mixers_quick_is_every_scorecard_at_once():
    """Every built-in mixer but mamba2 on the scorecard's five tunnels: the runs of each mixer's
    scorecard and of paper1-quick, by content hash, so their folders can be shared."""
    import windtunnel.models  # noqa: F401  (registers the built-in architectures)
    from windtunnel.models.base import model_names
    from windtunnel.scorecard.score import PRIMITIVES, scorecard_sweep

    sweep = load_sweep("mixers-quick")
    names = {r.name for r in expand(sweep)}
    mixers = set(model_names()) - {"mamba2", "tinygpt"}  # tinygpt: the authors' TinyGPT, not a mixer of mixers-quick
    card = scorecard_sweep("transformer")  # every rung of every tunnel: 3 each, SULA one
    assert len(names) == len(mixers) * len(card.experiments) == 9 * 22
    assert {p: (r.experiment, r.metric) for p, r in sweep.primitives.rules.items()} == {
        p: (r.experiment, r.metric) for p, r in card.primitives.rules.items()}
    assert {p: (sweep.primitives.rules[p].experiment, sweep.primitives.rules[p].metric) for p in PRIMITIVES} == PRIMITIVES
    assert {r.name for r in expand(load_sweep("paper1-quick")) if "-per-position" not in r.experiment} <= names
    for model in ("gru", "hybrid"):
        assert {r.name for r in expand(scorecard_sweep(model))} <= names


def test_the_new_tunnels_example_is_mixers_quick_on_those_tunnels():
    """examples/sweeps/new-tunnels-quick.json (the README's three new scorecard columns): the runs of
    mixers-quick for kalman, dirichlet and changepoint at each profile's own rung, by content hash."""
    from pathlib import Path

    example = load_sweep(Path(__file__).parents[2] / "examples" / "sweeps" / "new-tunnels-quick.json")
    mine = {r.name for r in expand(example)}
    full = expand(load_sweep("mixers-quick"))
    assert mine == {r.name for r in full if r.experiment in ("kalman", "dirichlet", "changepoint")}
    assert len(mine) == 27
    assert {p: (r.experiment, r.metric) for p, r in example.primitives.rules.items()} == {
        p: (r.experiment, r.metric) for p, r in load_sweep("mixers-quick").primitives.rules.items()
        if r.experiment in ("kalman", "dirichlet", "changepoint")}


def test_paper1_expands_to_the_paper_settings():
    """44 runs (bijection and recall 3 seeds, HMM 5 seeds), every model within 2% of the transformer."""
    runs = expand(load_sweep("paper1"))
    assert len(runs) == 4 * 3 + 4 * 5 + 4 * 3
    seeds = {r.config.task: set() for r in runs}
    for r in runs:
        seeds[r.config.task].add(r.config.train.seed)
    assert seeds == {"bijection": {0, 1, 2}, "hmm": {0, 1, 2, 3, 4}, "recall": {0, 1, 2}}
    for task in ("bijection", "hmm", "recall"):
        first = [r for r in runs if r.config.task == task and r.config.train.seed == 0]
        counts = {r.config.model: build(r.config)[1].n_params() for r in first}
        ref = counts["transformer"]
        assert all(abs(c - ref) / ref <= 0.02 for c in counts.values()), (task, counts)
    bij = next(r for r in runs if r.config.task == "bijection" and r.config.model == "transformer")
    assert bij.config.task_params["format"] == "paired" and bij.config.train.steps == 100000


def test_overrides_are_parsed_once_on_loading_a_sweep(tiny_sweep):
    sweep = tiny_sweep()
    assert sweep.override_pairs[0] == ("train.steps", 12)
    assert sweep.experiments[1].override_pairs[-1] == ("eval.lengths", [30])
    assert sweep.model_dump()["overrides"][0] == "train.steps=12"  # the file format is unchanged
    with pytest.raises(ConfigError, match="must look like section.field=value"):
        tiny_sweep(overrides=["train.steps"])


def test_grid_and_override_values_reach_run_configs_without_text(tiny_sweep, monkeypatch):
    """Structured values go from the grid and ``overrides`` to the run config as they are: no
    ``key=json`` text is made and parsed back on the way (parsing is the command line's job)."""
    import windtunnel.config

    lr = 0.1 + 0.2  # 0.30000000000000004: a float that a round trip through text could alter
    betas = (0.9, 0.95)
    calls = []
    real_parse = windtunnel.config.parse_override
    monkeypatch.setattr(windtunnel.config, "parse_override", lambda text: calls.append(text) or real_parse(text))
    sweep = tiny_sweep(grid={"train.lr": [lr, 1 / 3]})
    calls.clear()  # loading the sweep file parses its own text once; expansion must not parse
    runs = expand(sweep, overrides=[("train.betas", betas), ("eval.lengths", [])])
    assert calls == []
    assert {r.config.train.lr for r in runs} == {lr, 1 / 3}
    assert all(r.labels["train.lr"] == r.config.train.lr for r in runs)
    assert all(r.config.train.betas == betas for r in runs)
    assert all(r.config.eval.lengths == [] for r in runs)


def test_the_library_refuses_override_text(tiny_sweep):
    with pytest.raises(TypeError, match="parse_overrides"):
        expand(tiny_sweep(), overrides=["train.lr=0.2"])
    with pytest.raises(TypeError, match="parse_overrides"):
        expand(tiny_sweep(), overrides="train.lr=0.2")


def test_model_overrides_apply_to_their_model_alone_and_leave_old_folders_in_place(tiny_sweep):
    """``model_overrides`` set one architecture's fields after the experiment's; a sweep without
    them hashes as before the field existed (its default folder is where it was)."""
    assert load_sweep("paper1-quick").content_hash() == "b0e30e014c"  # the hash before model_overrides
    doc = {"name": "mo", "profile": "quick", "experiments": [
        {"task": "bijection", "models": ["transformer", "lstm"], "overrides": ["train.lr=1e-3"],
         "model_overrides": {"lstm": ["train.lr=3e-4", "train.steps=7"]}}]}
    runs = {r.config.model: r.config for r in expand(SweepConfig.build(doc))}
    assert (runs["lstm"].train.lr, runs["lstm"].train.steps) == (3e-4, 7)
    assert (runs["transformer"].train.lr, runs["transformer"].train.steps) == (1e-3, 1200)
    bad = {**doc, "experiments": [{**doc["experiments"][0], "model_overrides": {"gru": ["train.lr=1"]}}]}
    with pytest.raises(ConfigError, match="model_overrides names 'gru'"):
        SweepConfig.build(bad)


def test_every_committed_tuned_value_names_its_search_and_covers_its_comparisons():
    """A profile's ``tuned`` block holds training fields only, each entry names the section of
    docs/sweeps.md with the search table it came from, and it covers every architecture that a
    shipped sweep on that profile trains on the tunnel (no comparison pits tuned models against
    untuned ones)."""
    import re
    from pathlib import Path

    from windtunnel.train.config import TrainConfig, profile_names, profile_tasks

    docs = Path(__file__).resolve().parents[2] / "docs" / "sweeps.md"
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", docs.read_text(), flags=re.M)}
    sweeps = [load_sweep(name) for name in sweep_names()]
    committed = 0
    for profile in profile_names():
        for task in profile_tasks(profile):
            block = load_profile(profile, task).get("tuned")
            if block is None:
                continue
            for model, entry in block.items():
                settings = {k for k in entry if not k.startswith("_")}
                assert settings and settings <= set(TrainConfig.model_fields), (profile, task, model, entry)
                page, _, anchor = entry.get("_source", "").partition("#")
                assert page == "docs/sweeps.md" and anchor in anchors, (profile, task, model, entry)
                committed += 1
            trained = {m for s in sweeps if s.profile == profile
                       for e in s.experiments if e.task == task for m in e.models}
            assert trained <= set(block), (profile, task, sorted(trained - set(block)))
    assert committed  # at least one tunnel commits its searched values
