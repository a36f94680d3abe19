"""benchmarks/study_search.py: the last comparison replayed from the kept states, with longer
cooldown branches and wider ties, and the whole search with another first comparison, on a
hand-built study folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _benchmark_script import load

from windtunnel.train.config import RunConfig
from windtunnel.tune.search import branch_config

study = load("study_search")

STEPS, LAST = 1500, 450
RATES = [1e-3, 3.16e-3, 1e-2]
FINALS = {1e-3: 0.030, 3.16e-3: 0.020, 1e-2: 0.050}  # every rate's final probe KL (the ground truth)


def _run(where: Path, config: RunConfig, rows: list[dict]) -> None:
    where.mkdir(parents=True)
    (where / "config.json").write_text(json.dumps(config.model_dump(mode="json")))
    (where / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_study(root: Path, live: dict[float, float], longer: dict[float, float] | None = None,
               early: dict[float, float] | None = None) -> dict:
    """A study folder of one HMM case: the live search's document (the leader of ``live``, the
    annealed probe KL at the last comparison, trained on to the end), each candidate's kept state
    there, its live cooldown branch and, with ``longer``, its cooldown branch of 0.5 x the step;
    ``early``: the annealed probes at the first comparison (step 150)."""
    base = RunConfig.build({"task": "hmm", "model": "mlp", "train": {"steps": STEPS, "schedule": "cosine"}}, where="t")
    leader = min(live, key=live.get)
    candidates = []
    for i, rate in enumerate(RATES):
        config = RunConfig.build({**base.model_dump(mode="json"), "train": {**base.model_dump(mode="json")["train"],
                                                                           "lr": rate}}, where="t")
        run = f"hmm-mlp-{i}"
        _run(root / "hmm" / "points" / f"{run}-at{LAST}", config, [])
        live_branch = branch_config(config, LAST, 0.2)
        _run(root / "hmm" / live_branch.run_name(), live_branch, [{"step": LAST + 90, "probe_kl_bayes_model": live[rate]}])
        if longer is not None:
            _run(study.cooldown_dir(root, "hmm", root / "hmm" / "points" / f"{run}-at{LAST}", 0.5), config,
                 [{"step": LAST + 225, "probe_kl_bayes_model": longer[rate]}])
        scores = {"150": 0.1, str(LAST): 0.09, **({str(STEPS): FINALS[rate]} if rate == leader else {})}
        candidates.append({"point": {"train.lr": rate}, "run": run, "scores": scores,
                           "annealed": {"150": (early or {}).get(rate, 0.1), str(LAST): live[rate]}})
    doc = {"task": "hmm", "model": "mlp", "metric": "kl_bayes_model", "rung_steps": [150, LAST, STEPS], "spec": {"eta": 2.0},
           "base": base.model_dump(mode="json"), "candidates": candidates}
    (root / "hmm" / "tune-hmm-mlp.json").write_text(json.dumps(doc))
    return {"task": "hmm", "model": "mlp"}


def test_wider_ties_keep_the_runner_up_to_the_end_and_pay_for_it(tmp_path):
    case = make_study(tmp_path, {1e-3: 0.0100, 3.16e-3: 0.0110, 1e-2: 0.0200})
    live = study.replay(tmp_path, case, FINALS)  # ties within 2%: 0.011 is 9% behind, stopped
    assert live["pick"] == 1e-3 and not live["held"] and live["kept"] == [1e-3] and live["added_runs"] == 0
    wide = study.replay(tmp_path, case, FINALS, spread=0.15)  # 3.16e-3 kept, and it is the better at the end
    assert wide["pick"] == 3.16e-3 and wide["kept"] == [1e-3, 3.16e-3]
    assert wide["added_runs"] == pytest.approx((STEPS - LAST) / STEPS)  # one more finalist, from 450 to the end


def test_a_longer_cooldown_reranks_and_costs_its_extra_steps(tmp_path):
    case = make_study(tmp_path, {1e-3: 0.0100, 3.16e-3: 0.0110, 1e-2: 0.0200},
                      longer={1e-3: 0.0080, 3.16e-3: 0.0060, 1e-2: 0.0150})
    out = study.replay(tmp_path, case, FINALS, fraction=0.5)
    assert out["pick"] == 3.16e-3 and out["kept"] == [3.16e-3]
    assert out["added_runs"] == pytest.approx(3 * (225 - 90) / STEPS)  # three branches, each 135 steps longer
    assert study.replay(tmp_path, case, FINALS, fraction=1.0) is None  # not trained: no replay, no guess


def test_where_the_guard_holds_the_leader_goes_on_alone_whatever_the_ties(tmp_path):
    # every rate still at the emission-only plateau (probe score far below 0.5): the guard holds
    case = make_study(tmp_path, {1e-3: 0.400, 3.16e-3: 0.401, 1e-2: 0.402})
    for spread in (0.02, 0.2):
        out = study.replay(tmp_path, case, FINALS, spread=spread)
        assert out["held"] and out["pick"] == 1e-3 and out["added_runs"] == 0


def test_extrapolation_ranks_by_each_probes_power_law_at_the_end(tmp_path):
    # 1e-3 leads at 450 (0.0100) but fell only by 2x from step 150; 3.16e-3 (0.0110) fell by 9x: its power
    # law, 0.011 * (1500/450)^-2, ends far below 0.01 * (1500/450)^-0.63
    case = make_study(tmp_path, {1e-3: 0.0100, 3.16e-3: 0.0110, 1e-2: 0.0200},
                      early={1e-3: 0.0200, 3.16e-3: 0.0990, 1e-2: 0.0400})
    assert study.replay(tmp_path, case, FINALS)["pick"] == 1e-3
    out = study.replay(tmp_path, case, FINALS, extrapolate=True)
    assert out["pick"] == 3.16e-3 and out["kept"] == [3.16e-3] and out["added_runs"] == 0
    rows = study.replays(tmp_path, [case], [{"final_probe_kl_here": None, "agrees": False, "cost_runs": 2.0,
                                             "final_probe_kl": {str(k): v for k, v in FINALS.items()}}])
    by = {(r["variant"], r["ties"]): r for r in rows}
    assert by[("the live search", "2%")]["agree"] == 0 and by[("ranked by each probe's power law to the end", "2%")]["agree"] == 1
    assert by[("wider ties", "15%")]["agree"] == 1 and by[("wider ties", "15%")]["mean_cost_runs"] == 2.7
    assert not any(r["variant"] == "a longer cooldown at 30%" for r in rows)  # no longer branches trained: no row


def test_the_first_comparison_without_the_guard_stops_a_rate_on_the_plateau_and_names_it(tmp_path):
    # at 10% every rate is above the emission-only KL (probe score below 0.5): the plateau
    case = make_study(tmp_path, {1e-3: 0.0100, 3.16e-3: 0.0110, 1e-2: 0.0200},
                      early={1e-2: 0.38, 1e-3: 0.40, 3.16e-3: 0.42})
    guarded = study.replay_first(tmp_path, case, FINALS, spread=0.15)  # the live rules, 15% finalists
    assert guarded["kept_first"] == [1e-2, 1e-3, 3.16e-3] and guarded["plateau_stopped"] == []
    assert guarded["kept"] == [1e-3, 3.16e-3] and guarded["pick"] == 3.16e-3  # 0.011 is 10% behind: a finalist
    # three to 150 and their branches (30 steps), three to 450 and theirs (90), two finalists to the end
    assert guarded["cost_runs"] == pytest.approx((3 * 180 + 3 * 390 + 2 * 1050) / STEPS)
    bare = study.replay_first(tmp_path, case, FINALS, guard=False, spread=0.15)
    assert bare["kept_first"] == [1e-2, 1e-3] and bare["plateau_stopped"] == [3.16e-3]  # ceil(3 / 2) kept
    assert bare["pick"] == 1e-3 and bare["cost_runs"] == pytest.approx((3 * 180 + 2 * 390 + 1050) / STEPS)
    raw = study.replay_first(tmp_path, case, FINALS, probe="raw", guard=False)  # raw probes at 10%: all 0.1, tied
    assert raw["kept_first"] == RATES and raw["cost_runs"] == pytest.approx((3 * 150 + 3 * 390 + 1050) / STEPS)


def test_the_raw_probe_ranks_the_first_comparison_as_the_run_stands_and_costs_no_branches(tmp_path):
    case = make_study(tmp_path, {1e-3: 0.0100, 3.16e-3: 0.0110, 1e-2: 0.0200},
                      early={1e-2: 0.38, 1e-3: 0.40, 3.16e-3: 0.42})
    doc_path = tmp_path / "hmm" / "tune-hmm-mlp.json"
    doc = json.loads(doc_path.read_text())
    for c, raw in zip(doc["candidates"], (0.30, 0.45, 0.46)):  # raw: 1e-3 leads, the annealed order is reversed
        c["scores"]["150"] = raw
    doc_path.write_text(json.dumps(doc))
    out = study.replay_first(tmp_path, case, FINALS, probe="raw", guard=False, spread=0.15)
    assert out["kept_first"] == [1e-3, 3.16e-3] and out["plateau_stopped"] == [1e-2]
    assert out["kept"] == [1e-3, 3.16e-3] and out["pick"] == 3.16e-3
    assert out["cost_runs"] == pytest.approx((3 * 150 + 2 * 390 + 2 * 1050) / STEPS)


def test_a_case_that_cannot_be_judged_is_left_out_not_guessed(tmp_path):
    case = make_study(tmp_path, {1e-3: 0.0100, 3.16e-3: 0.0110, 1e-2: 0.0200},
                      early={1e-2: 0.38, 1e-3: 0.40, 3.16e-3: 0.42})
    doc_path = tmp_path / "hmm" / "tune-hmm-mlp.json"
    doc = json.loads(doc_path.read_text())
    del doc["candidates"][1]["scores"][str(LAST)]  # the live search stopped 3.16e-3 at 150: no state at 450
    doc_path.write_text(json.dumps(doc))
    assert study.replay_first(tmp_path, case, FINALS) is None  # the guard keeps 3.16e-3, which has no state
    assert study.replay_first(tmp_path, case, FINALS, guard=False)["kept_first"] == [1e-2, 1e-3]
    # a rate trained to the end without a final in the ground truth
    assert study.replay_first(tmp_path, case, {1e-3: 0.030}, guard=False, spread=0.15) is not None
    assert study.replay_first(tmp_path, case, {1e-2: 0.050}, guard=False) is None


def test_first_replays_set_each_variant_beside_the_live_search_on_the_same_cases(tmp_path):
    case = make_study(tmp_path, {1e-3: 0.0100, 3.16e-3: 0.0110, 1e-2: 0.0200},
                      early={1e-2: 0.38, 1e-3: 0.40, 3.16e-3: 0.42})
    row = {"final_probe_kl_here": None, "agrees": False, "cost_runs": 0.0,
           "final_probe_kl": {str(k): v for k, v in FINALS.items()}}
    rows = {(r["variant"], r["ties"]): r for r in study.first_replays(tmp_path, [case], [row])}
    live = {(r["variant"], r["ties"]): r for r in study.replays(tmp_path, [case], [row])}
    for ties in ("2%", "15%"):  # the live first comparison: the same picks as the replay of the last one
        theirs = live[("the live search" if ties == "2%" else "wider ties", ties)]
        assert rows[("the live search", ties)]["agree"] == theirs["agree"]
    assert rows[("the live search", "15%")]["agree"] == 1 and rows[("the live search", "2%")]["agree"] == 0
    bare = rows[("annealed probe at 10%, guard off there", "15%")]
    assert (bare["agree"], bare["live_agree"], bare["plateau_stops"], bare["same_verdict"]) == (0, 1, 1, 1)
    assert bare["mean_cost_runs"] == 1.58 and bare["live_mean_cost_runs"] == 2.54  # (540 + 780 + 1050) / 1500; 3810 / 1500


def test_first_title_names_the_cheapest_and_what_agrees_as_often_as_the_live_search():
    def row(variant, agree, cost, most, live_agree, live_cost):
        return {"variant": variant, "ties": "2%", "cases": 16, "agree": agree, "mean_cost_runs": cost,
                "max_cost_runs": most, "live_agree": live_agree, "live_mean_cost_runs": live_cost}

    rows = [row("the live search", 10, 2.47, 2.6, 10, 2.47), row("cheap", 8, 2.07, 2.5, 9, 2.49),
            row("as good", 10, 2.4, 2.5, 10, 2.5)]
    title = study.first_title(rows, 16)
    assert "no variant stays within 2 runs" in title and "the cheapest is cheap" in title
    assert "as good with ties within 2% at 30% (10 of 16, 2.4 runs on average" in title
    rows.append(row("tiny", 5, 1.5, 1.9, 10, 2.47))
    assert study.first_title(rows, 16).startswith("The first comparison replayed on the 16 reversals: 1 of 4 variants")
