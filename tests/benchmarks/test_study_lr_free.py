"""benchmarks/study_lr_free.py: a case judged as the search study judges a pick."""

from __future__ import annotations

from _benchmark_script import load

study = load("study_lr_free")


def test_a_run_agrees_within_two_percent_of_the_full_winner_or_better():
    row = {"full_winner": 0.00316, "final_probe_kl": {"0.001": 0.0300, "0.00316": 0.0200, "0.01": None}}
    case = {"task": "kalman", "model": "gru"}
    assert study.judged({**case, "final_probe_kl": 0.0204}, row)["agrees"]  # 2.0% above the winner
    assert not study.judged({**case, "final_probe_kl": 0.0205}, row)["agrees"]  # 2.5% above
    better = study.judged({**case, "final_probe_kl": 0.0150}, row)
    assert better["agrees"] and better["ratio_to_winner"] == 0.75 and better["full_winner_probe_kl"] == 0.02
    assert not study.judged({**case, "final_probe_kl": None}, row)["agrees"]  # a run without a final probe


def test_this_machines_finals_are_the_ground_where_the_study_trained_them():
    row = {"full_winner": 0.01, "final_probe_kl": {"0.01": 0.5}, "final_probe_kl_here": {"0.01": 0.4, "0.001": 0.45}}
    assert study.judged({"task": "t", "model": "m", "final_probe_kl": 0.41}, row)["full_winner_probe_kl"] == 0.4


def test_a_case_reads_as_a_row_of_the_results_page():
    row = {"full_winner": 0.00316, "final_probe_kl": {"0.00316": 0.0200}, "final_probe_kl_here": None}
    r = study.judged({"task": "kalman", "model": "gru", "final_probe_kl": 0.03, "seconds": 181.4}, row)
    assert study.table_row(r) == {"task": "kalman", "model": "gru", "prodigy": "0.0300", "winner": "0.00316, 0.0200",
                                  "ratio": "1.50", "agrees": "no", "seconds": "181"}
    assert [c["key"] for c in study.COLUMNS] == list(study.table_row(r))
    assert study.table_row({"task": "t", "model": "m", "error": "boom"})["prodigy"] == "failed: boom"
