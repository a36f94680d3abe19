"""Which learning rates should a scorecard's search try? Candidate sets judged on the sixteen
recorded reversals and on the rates the built-in mixers' own searches found.

    python benchmarks/study_candidates.py [--out results/search-study]

It trains nothing. Each candidate set is searched the simplest way: every rate in it trained to the
end, the best at the end wins. On each of the sixteen cases where training every rate to the end
overturned the plain halving's pick, the pick of a set is read from the ground truth of
``benchmarks/study_search.py`` (``results/search-study/study.json``: every rate's final probe KL,
from the record or trained on this machine); it agrees when its final probe KL is within 2% of the
winner's of all five rates (the study's criterion). A rate the record lacks cannot be the winner
(the record names the best of all five), so a set agrees where it holds the winner. The cost is
the set's size in runs (an upper bound: a run that realises its primitive stops early). The
committed rates are the quick profiles' ``tuned`` blocks (every built-in architecture on every
tunnel, each from its own search): how many of them each set holds.
"""

from __future__ import annotations

import argparse
import json
import math
from importlib import resources
from pathlib import Path

from windtunnel.provenance import provenance
from windtunnel.scorecard.score import SCORECARD_LRS
from windtunnel.tune.search import DEFAULT_LRS

ROOT = Path(__file__).resolve().parents[1]

#: the study's criterion: a pick agrees when its final probe KL is within 2% of the winner's
WITHIN = 0.02
#: one step of the tuning grid (half a decade)
STEP = math.sqrt(10)


def committed() -> dict[str, dict[str, float]]:
    """``{tunnel: {model: lr}}`` as the quick profiles commit them."""
    out = {}
    for p in sorted(resources.files("windtunnel.configs").joinpath("quick").iterdir(), key=lambda p: p.name):
        if p.name.endswith(".json"):
            tuned = json.loads(p.read_text()).get("tuned", {})
            out[p.name.removesuffix(".json")] = {m: float(v["lr"]) for m, v in tuned.items() if not m.startswith("_")}
    return out


def same(a: float, b: float) -> bool:
    """Two rates of the grid, written to three significant digits (3.16e-3 is sqrt(10) x 1e-3)."""
    return abs(a - b) <= 0.01 * max(a, b)


def candidate_sets(rates: dict[str, dict[str, float]]) -> dict[str, callable]:
    """Each set as a function of the tunnel (the bracket depends on the transformer's rate there)."""
    def bracket(task: str) -> list[float]:
        t = rates[task]["transformer"]
        return [t / STEP, t, t * STEP]

    return {
        "the tuning grid's five (1e-4 to 1e-2)": lambda task: list(DEFAULT_LRS),
        "the three central (1e-3, 3.16e-3, 1e-2)": lambda task: list(SCORECARD_LRS),
        "the upper two (3.16e-3, 1e-2)": lambda task: list(SCORECARD_LRS[1:]),
        "the lower two (1e-3, 3.16e-3)": lambda task: list(SCORECARD_LRS[:2]),
        "the central rate alone (3.16e-3)": lambda task: [SCORECARD_LRS[1]],
        "the transformer's rate there and one step either side": bracket,
        "the transformer's rate there alone": lambda task: [rates[task]["transformer"]],
    }


def case_finals(row: dict) -> dict[float, float]:
    """A case's ground truth: every rate's final probe KL (trained here where the record was not reproduced)."""
    finals = row.get("final_probe_kl_here") or row["final_probe_kl"]
    return {float(k): float(v) for k, v in finals.items()}


def pick(finals: dict[float, float], winner: float, candidates: list[float]) -> tuple[float | None, bool | None]:
    """The set's pick (the best of its rates at the end) and whether it agrees with the winner; a
    set that holds the winner picks it; one whose rates the record lacks altogether is unknown."""
    if any(same(c, winner) for c in candidates):
        return winner, True
    known = [(finals[r], r) for r in finals if any(same(r, c) for c in candidates)]
    if not known:
        return None, None
    kl, rate = min(known)
    return rate, kl <= finals[winner] * (1 + WITHIN)


def study(cases: list[dict], rates: dict[str, dict[str, float]]) -> tuple[list[dict], list[dict]]:
    """The summary per candidate set and the pick of each set in each case."""
    sets = candidate_sets(rates)
    per_case = []
    for row in cases:
        finals, winner = case_finals(row), float(row["full_winner"])
        entry = {"task": row["task"], "model": row["model"], "winner": f"{winner:g}"}
        for i, of in enumerate(sets.values()):
            rate, ok = pick(finals, winner, of(row["task"]))
            entry[f"set_{i}"] = "unknown" if ok is None else f"{rate:g} ({'agrees' if ok else 'differs'})"
        per_case.append(entry)
    pairs = [(task, model, lr) for task, block in rates.items() for model, lr in block.items()]
    summary = []
    for name, of in sets.items():
        picks = [pick(case_finals(r), float(r["full_winner"]), of(r["task"]))[1] for r in cases]
        held = sum(any(same(lr, c) for c in of(task)) for task, _, lr in pairs)
        sizes = {len(of(task)) for task in rates}
        summary.append({"candidates": name, "agree": f"{sum(p is True for p in picks)} of {len(cases)}",
                        "unknown": sum(p is None for p in picks), "cost_runs": max(sizes),
                        "committed_held": f"{held} of {len(pairs)}"})
    return summary, per_case


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "search-study",
                    help="folder of candidates.json (the summary) and candidates-cases.json (each case)")
    args = ap.parse_args()
    cases = json.loads((ROOT / "results" / "search-study" / "study.json").read_text())["rows"]
    rates = committed()
    summary, per_case = study(cases, rates)
    names = list(candidate_sets(rates))
    prov = provenance("python benchmarks/study_candidates.py", root=ROOT,
                      concurrent="trains nothing (reads results/search-study/study.json and the quick profiles' tuned blocks)")
    doc = {
        "title": "Candidate sets for a scorecard's search, each rate trained to the end: the sixteen reversals and "
                 "the committed rates",
        "provenance": prov,
        "columns": [{"key": "candidates", "label": "candidates"},
                    {"key": "agree", "label": "picks the winner (or within 2%)"},
                    {"key": "unknown", "label": "cases the record cannot judge"},
                    {"key": "cost_runs", "label": "cost (runs, at most)"},
                    {"key": "committed_held", "label": "committed rates it holds"}],
        "rows": summary,
    }
    cases_doc = {
        "title": "Each candidate set's pick on the sixteen reversals (every rate in the set trained to the end)",
        "provenance": prov,
        "columns": [{"key": "task", "label": "tunnel"}, {"key": "model", "label": "model"},
                    {"key": "winner", "label": "full winner"},
                    *({"key": f"set_{i}", "label": n} for i, n in enumerate(names))],
        "rows": per_case,
    }
    outside = {
        "title": "The committed rates that the scorecard's three candidates do not hold",
        "provenance": prov,
        "columns": [{"key": "tunnel", "label": "tunnel"}, {"key": "model", "label": "model"},
                    {"key": "lr", "label": "committed lr"}],
        "rows": [{"tunnel": task, "model": model, "lr": f"{lr:g}"} for task, block in rates.items()
                 for model, lr in block.items() if not any(same(lr, c) for c in SCORECARD_LRS)],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "candidates-outside.json").write_text(json.dumps(outside, indent=1) + "\n")
    (args.out / "candidates.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "candidates-cases.json").write_text(json.dumps(cases_doc, indent=1) + "\n")
    for r in summary:
        print(f"{r['candidates']:<55} agree {r['agree']:>9}  unknown {r['unknown']}  cost {r['cost_runs']} runs  "
              f"committed {r['committed_held']}")


if __name__ == "__main__":
    main()
