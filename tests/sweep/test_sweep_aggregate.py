"""Aggregation over seeds, primitive scores and the paper lookup, against hand-computed values."""

import math

import pytest

from windtunnel.sweep.aggregate import _mean_ci, aggregate, primitive_score, primitives, read_csv, write_csv
from windtunnel.sweep.config import Primitives
from windtunnel.sweep.paper import Cell, paper_names, paper_value


def _row(model, seed, err, acc=None, lo=None, hi=None, length=20, main=20, **extra):
    row = {"experiment": "hmm", "task": "hmm", "task_params": '{"K": 20}', "model": model, "run": f"{model}-{seed}", "seed": seed,
           "length": length, "main_length": main, "is_main": length == main, "n_params": 1000, "steps": 10,
           "train_seconds": 1.0, "entropy_error": err, "entropy_error_lo": lo if lo is not None else err - 0.01,
           "entropy_error_hi": hi if hi is not None else err + 0.01,
           "baseline_entropy_error": 0.5, "baseline_entropy_error_name": "uniform", **extra}
    if acc is not None:
        row.update(accuracy=acc, accuracy_lo=acc - 0.1, accuracy_hi=acc + 0.1)
    return row


def test_mean_ci_by_hand():
    # values 1, 2, 3: mean 2, sd 1, t_{0.975, 2} = 4.302653 -> half width 4.302653 / sqrt(3) = 2.484138
    mean, lo, hi, sd = _mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and sd == pytest.approx(1.0)
    assert (hi - mean) == pytest.approx(4.302653 / math.sqrt(3), abs=1e-5)
    assert lo == pytest.approx(2 - 2.484138, abs=1e-5)


def test_aggregate_over_seeds_and_lengths():
    rows = [_row("transformer", 0, 0.1), _row("transformer", 1, 0.3), _row("transformer", 2, 0.2),
            _row("transformer", 0, 0.4, length=30), _row("lstm", 0, 0.45, lo=0.44, hi=0.46)]
    table = aggregate(rows, paper="paper1")
    by = {(r["model"], r["length"]): r for r in table}
    t = by[("transformer", 20)]
    assert t["n_seeds"] == 3 and t["seeds"] == "0 1 2" and t["entropy_error"] == pytest.approx(0.2)
    assert t["entropy_error_sd"] == pytest.approx(0.1)
    assert t["entropy_error_hi"] - 0.2 == pytest.approx(4.302653 * 0.1 / math.sqrt(3), abs=1e-5)
    assert t["ci"] == "t over 3 seeds"
    # one seed: the run's own bootstrap interval
    lstm = by[("lstm", 20)]
    assert (lstm["entropy_error_lo"], lstm["entropy_error_hi"]) == (0.44, 0.46) and "bootstrap" in lstm["ci"]
    # the paper's numbers: v3 K = 20 for the training length, the v1 model at K = 30
    assert t["paper_entropy_error"] == 0.049 and by[("transformer", 30)]["paper_entropy_error"] == 0.012
    assert lstm["paper_entropy_error"] == 0.411
    assert t["baseline_entropy_error"] == 0.5


def test_interval_is_clipped_to_the_metric_range():
    rows = [_row("transformer", s, 0.01 * s, acc=a) for s, a in enumerate([0.2, 0.99, 0.999])]
    t = aggregate(rows)[0]
    assert t["entropy_error_lo"] >= 0 and t["accuracy_lo"] >= 0 and t["accuracy_hi"] <= 1


def test_primitive_score_by_hand():
    assert primitive_score("kl_bayes_model", 0.1, 1.0) == pytest.approx(0.9)
    assert primitive_score("entropy_error", 0.6, 0.5) == pytest.approx(-0.2)  # worse than the baseline
    # Paper I's Mamba recall: 97.8% against a 1/256 chance level
    assert primitive_score("accuracy", 0.978, 1 / 256) == pytest.approx((0.978 - 1 / 256) / (1 - 1 / 256))


def test_primitives_verdicts():
    table = aggregate([_row("transformer", 0, 0.01), _row("mamba", 0, 0.2), _row("lstm", 0, 0.45)])
    rules = Primitives.build({"rules": {"transport": {"experiment": "hmm", "metric": "entropy_error"}},
                              "realised": 0.9, "partial": 0.5})
    prims = primitives(table, rules)
    assert prims["transformer"]["transport"]["verdict"] == "yes"  # 1 - 0.01/0.5 = 0.98
    assert prims["mamba"]["transport"]["verdict"] == "partial"  # 0.6
    assert prims["lstm"]["transport"]["verdict"] == "no"  # 0.1
    assert prims["mamba"]["transport"]["score"] == pytest.approx(0.6)


def test_csv_round_trip(tmp_path):
    rows = [_row("transformer", 0, 0.1), {**_row("lstm", 1, 0.2), "extra": "x"}]
    write_csv(tmp_path / "t.csv", rows)
    back = read_csv(tmp_path / "t.csv")
    assert back[0]["entropy_error"] == 0.1 and back[0]["is_main"] is True and back[0]["extra"] is None
    assert back[1]["extra"] == "x" and back[1]["seed"] == 1


def test_paper_lookup():
    assert "paper1" in paper_names()
    assert paper_value("paper1", Cell("bijection", "mlp", "entropy_error", 19, 19))["value"] == 1.85
    assert paper_value("paper1", Cell("recall", "mamba", "accuracy"))["value"] == 0.978
    assert paper_value("paper1", Cell("hmm", "mamba", "entropy_error", 50, 20)) is None
    assert paper_value(None, Cell("hmm", "mamba", "entropy_error", 20, 20)) is None
    # a run trained at another setting than the paper's gets no paper number beside it
    assert paper_value("paper1", Cell("hmm", "mamba", "entropy_error", 20, 20, {"K": 20}))["value"] == 0.024
    assert paper_value("paper1", Cell("hmm", "mamba", "entropy_error", 50, 50, {"K": 50})) is None
    assert paper_value("paper1", Cell("bijection", "mlp", "entropy_error", 9, 9, {"V": 10, "L": 9})) is None


def test_paper_value_in_its_old_form_warns():
    """compat.legacy_call: paper_value(paper, task, model, metric, length, main_length[, task_params])."""
    with pytest.warns(DeprecationWarning, match=r"paper_value\(paper, task, .*\) is deprecated; use paper_value\(paper, Cell"):
        assert paper_value("paper1", "bijection", "mlp", "entropy_error", 19, 19)["value"] == 1.85
    with pytest.warns(DeprecationWarning):
        assert paper_value("paper1", "hmm", "mamba", "entropy_error", 20, 20, task_params={"K": 20})["value"] == 0.024
    with pytest.warns(DeprecationWarning):
        assert paper_value(None, "hmm", "mamba", "entropy_error", 20, 20) is None
    with pytest.raises(TypeError, match="missing argument"):
        paper_value("paper1", "hmm", "mamba", "entropy_error")


def test_primitive_nan_score_is_replaced_by_a_real_one():
    rows = [_row("transformer", 0, 0.1, **{"grid:train.lr": "0.1"}), _row("transformer", 0, 0.05, **{"grid:train.lr": "0.01"})]
    rows[0]["baseline_entropy_error"] = 0.0  # a degenerate baseline: score nan
    rules = Primitives.build({"rules": {"transport": {"experiment": "hmm", "metric": "entropy_error"}}})
    assert primitives(aggregate(rows), rules)["transformer"]["transport"]["score"] == pytest.approx(0.9)


def test_primitive_variants_are_labelled_and_spread_is_given():
    rows = [_row("transformer", s, 0.01 + 0.01 * s) for s in (0, 1, 2)]
    rows += [{**_row("mlp", s, 0.25), "experiment": "hmm-per-position"} for s in (0, 1, 2)]
    rules = Primitives.build({"rules": {"transport": {"experiment": "hmm", "metric": "entropy_error",
                                                      "variants": ["hmm-per-position"]}}})
    prims = primitives(aggregate(rows), rules)
    tf, mlp = prims["transformer"]["transport"], prims["mlp (per-position)"]["transport"]
    assert mlp["score"] == pytest.approx(0.5) and mlp["experiment"] == "hmm-per-position"
    # mean 0.02 over seeds 0.01, 0.02, 0.03: sd 0.01, t(2) = 4.303, interval 0.02 -+ 0.0248 (clipped at 0)
    half = 4.302652729911275 * 0.01 / 3 ** 0.5
    assert tf["score"] == pytest.approx(1 - 0.02 / 0.5)
    assert tf["score_lo"] == pytest.approx(1 - (0.02 + half) / 0.5) and tf["score_hi"] == pytest.approx(1.0)
    assert tf["n_seeds"] == 3


def test_primitive_variant_experiments_must_be_named_after_the_rule():
    from windtunnel.sweep.config import SweepConfig
    doc = {"name": "s", "experiments": [{"task": "hmm", "models": ["mlp"]},
                                        {"task": "hmm", "name": "other", "models": ["mlp"]}],
           "primitives": {"rules": {"transport": {"experiment": "hmm", "metric": "entropy_error", "variants": ["other"]}}}}
    with pytest.raises(Exception, match="hmm-VARIANT"):
        SweepConfig.build(doc)


def test_primitives_table_gives_the_papers_claims_only_where_it_makes_some():
    from windtunnel.sweep.markdown import primitives_table

    cell = {"verdict": "yes", "score": 0.95}
    prims = {"transformer": {"transport": cell, "counting": cell}, "gru": {"transport": cell}}
    claims = {"transformer": {"transport": "yes", "binding": "yes"}}
    lines = primitives_table(prims, ["transport", "counting"], claims).splitlines()
    assert lines[0].split("|")[-2].strip() == "paper"
    assert lines[2].split("|")[-2].strip() == "✓ - (1/2)"  # claims transport, not counting
    assert lines[3].split("|")[-2].strip() == "-"  # no claim for the gru
    only_new = primitives_table(prims, ["counting"], claims).splitlines()
    assert only_new[2].split("|")[-2].strip() == "-"  # the paper claims nothing about counting


def test_primitives_table_counts_each_primitive_once_at_the_profiles_rung():
    from windtunnel.sweep.markdown import primitives_table

    yes, no = {"verdict": "yes", "score": 0.95}, {"verdict": "no", "score": 0.1}
    prims = {"gru": {"transport@S2_O2": yes, "transport": no, "binding": {"verdict": "partial", "score": 0.6}}}
    claims = {"gru": {"transport": "yes", "binding": "no"}}
    row = primitives_table(prims, ["transport@S2_O2", "transport", "binding"], claims).splitlines()[2]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[1:4] == ["✓ 0.95", "✗ 0.10", "~ 0.60"]  # every rung has its column
    assert cells[4] == "0.5/2"  # the easy rung's ✓ does not count: two primitives, binding half
    assert cells[5] == "✓ ✗ (1/2)"  # the paper's claims over the same two
    only_rungs = primitives_table({"gru": {"transport@S2_O2": yes}}, ["transport@S2_O2"], None).splitlines()[2]
    assert only_rungs.split("|")[-2].strip() == "1/1"  # a sweep of rungs alone counts them


def test_ladders_table_gives_the_hardest_rung_realised_and_every_rungs_score():
    from windtunnel.sweep.markdown import highest_realised, ladder_rules, ladders_table

    rules = ["transport@S2_O2", "transport", "binding", "counting@n_cat4", "counting"]
    assert ladder_rules(rules) == {"transport": ["transport@S2_O2", "transport"], "counting": ["counting@n_cat4", "counting"]}
    exps = {"transport@S2_O2": "hmm@S2_O2", "transport": "hmm", "binding": "recall",
            "counting@n_cat4": "dirichlet@n_cat4", "counting": "dirichlet"}
    yes, part, no = ({"verdict": v, "score": s} for v, s in (("yes", 0.97), ("partial", 0.81), ("no", -1.5)))
    prims = {"gru": {"transport@S2_O2": yes, "transport": no, "binding": no, "counting@n_cat4": yes, "counting": yes},
             "lstm": {"transport@S2_O2": part, "transport": no, "counting@n_cat4": no}}
    lines = ladders_table(prims, rules, exps).splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == [
        "model", "transport (hmm@S2_O2, hmm)", "counting (dirichlet@n_cat4, dirichlet)"]
    assert [c.strip() for c in lines[2].split("|")[1:-1]] == ["gru", "hmm@S2_O2 (0.97, -1.50)", "dirichlet (0.97, 0.97)"]
    # not realised at any rung, and a rung that was not run
    assert [c.strip() for c in lines[3].split("|")[1:-1]] == ["lstm", "none (0.81, -1.50)", "none (-1.50, -)"]
    # a row run at no rung of a ladder (a variant of one task) reads "-", not "none"
    prims["mlp (per-position)"] = {"binding": no}
    assert [c.strip() for c in ladders_table(prims, rules, exps).splitlines()[4].split("|")[1:-1]] == [
        "mlp (per-position)", "-", "-"]
    # the hardest rung realised, not the first: a ✓ above a ✗ counts
    assert highest_realised([("a", yes), ("b", no), ("c", yes)]) == "c"
    assert highest_realised([("a", part), ("b", None)]) is None
