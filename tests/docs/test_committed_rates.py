"""docs/sweeps.md's table of committed learning rates says what the quick profiles' `tuned` blocks
hold: every cell's first rate ("c 3.16e-3 ...") is the profile's `lr` for that tunnel and model,
and every tunnel with a `tuned` block has its row."""

from __future__ import annotations

import re
from pathlib import Path

from windtunnel.train.config import load_profile, profile_tasks

SWEEPS = Path(__file__).resolve().parents[2] / "docs" / "sweeps.md"


def _table() -> dict[str, dict[str, float]]:
    lines = SWEEPS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| tunnel | transformer |"))
    models = [c.strip() for c in lines[start].strip("|").split("|")][1:]
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        task = cells[0].split()[0]
        rows[task] = {m: float(re.match(r"c ([\d.e-]+)", c)[1]) for m, c in zip(models, cells[1:])}
    return rows


def test_the_committed_rates_table_is_the_profiles():
    table = _table()
    tuned = {task: load_profile("quick", task).get("tuned") for task in profile_tasks("quick")}
    tuned = {task: block for task, block in tuned.items() if block}
    assert set(table) == set(tuned), (sorted(table), sorted(tuned))
    for task, block in tuned.items():
        for model, entry in block.items():
            assert table[task][model] == entry["lr"], (task, model, table[task][model], entry["lr"])
