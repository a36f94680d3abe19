"""scripts/compare_outputs.py: two output trees equal but for the clock, or the files that differ."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_outputs.py"
spec = importlib.util.spec_from_file_location("compare_outputs", SCRIPT)
compare_outputs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_outputs)


def tree(root: Path, seconds: float, kl: float, steps_kept: list[int]) -> None:
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "eval.json").write_text(json.dumps({"kl": kl, "train_seconds": seconds, "steps": 10}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 10, "seconds": seconds, "loss": 1.0}) + "\n")
    (root / "results.csv").write_text(f"run,kl,train_seconds\nrun,{kl},{seconds}\n")
    (root / "summary.md").write_text(f"| model | train s |\n|---|---|\n| a | {seconds:.0f} |\nran in {seconds:.0f} s\n")
    for s in steps_kept:  # resumable checkpoints are written at moments that depend on the clock
        (run / "checkpoints" / f"step_{s:07d}").mkdir()
        (run / "checkpoints" / f"step_{s:07d}" / "state.json").write_text(json.dumps({"step": s, "train_seconds": seconds}))


def test_trees_that_differ_only_in_times_and_resumable_checkpoints_agree(tmp_path):
    tree(tmp_path / "a", 12.5, 0.25, [0, 4, 10])
    tree(tmp_path / "b", 99.0, 0.25, [0, 7, 10])
    assert compare_outputs.compare(tmp_path / "a", tmp_path / "b") == []


def test_a_number_or_a_missing_final_checkpoint_is_a_difference(tmp_path):
    tree(tmp_path / "a", 12.5, 0.25, [0, 10])
    tree(tmp_path / "b", 12.5, 0.2500001, [0, 10])
    tree(tmp_path / "c", 12.5, 0.25, [0])
    assert sorted(compare_outputs.compare(tmp_path / "a", tmp_path / "b")) == ["differs: results.csv", "differs: run/eval.json"]
    assert compare_outputs.compare(tmp_path / "a", tmp_path / "c") == [
        "missing in " + str(tmp_path / "c") + ": the final checkpoint run/checkpoints/step_0000010"]
