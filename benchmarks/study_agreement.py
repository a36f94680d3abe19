"""Does the decisive scorecard give the full-budget verdicts? The nine built-in mixers, every cell.

    python benchmarks/study_agreement.py run [--jobs 2] [--root runs/agreement] [--models gru,lstm]
    python benchmarks/study_agreement.py analyse [--root runs/agreement] [--concurrent TEXT]

``run`` scores each built-in mixer with the scorecard's default protocol: the shipped reference,
runs that decide early, each ladder searched from the profile's own rung (every rate is committed
by the quick profile, so no search runs). One folder per model under ``--root``; a folder resumes.
The transformer's scorecard is the shipped reference itself (every rung at the full budget), so
it is read from the package, not trained.

``analyse`` compares every cell (mixer x rung, 22 rungs) with the full-budget verdicts of
``mixers-quick`` (full ladders, full budgets): the profile's rung from
``results/mixers-scorecard/scorecard.json``, the other rungs from ``results/ladders/``. A cell the
ladder search did not need is compared by what the search concludes from it: a rung below a
realised one counts as realised, a rung above one not realised as not realised. Every difference
is classified (decided early, a ladder that is not monotone, the same run's score moved across a
threshold) and written with both scores to ``results/scorecard-agreement/`` for the generated page.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
from pathlib import Path

from windtunnel.provenance import provenance as record_provenance
from windtunnel.sweep import Execution
from windtunnel.sweep.markdown import _MARK

ROOT = Path(__file__).resolve().parents[1]

MIXERS = ["transformer", "mamba", "lstm", "mlp", "gru", "linear_attention", "deltanet", "swa_transformer", "hybrid"]
#: each primitive's full-budget ladder, easiest rung first: (record under results/, column) per rung;
#: None is the profile's own rung, read from the mixers-quick scorecard
LADDERS = {
    "accumulation": [("ladders/bijection", "v_5"), ("ladders/bijection", "v_10"), None],
    "transport": [("ladders/hmm", "s_o_2"), ("ladders/hmm", "s_o_3"), None],
    "binding": [("ladders/recall-4", "4_pairs"), None, ("ladders/recall-16", "eval_accuracy_score_against_1_16")],
    "continuous": [("ladders/regression", "d_2"), ("ladders/regression", "d_4"), None],
    "sula": [None],
    "continuous_transport": [("ladders/kalman", "n_1"), None, ("ladders/kalman", "n_4")],
    "counting": [("ladders/dirichlet", "4_categories"), None, ("ladders/dirichlet", "16_categories")],
    "revision": [("ladders/changepoint", "h_0_02"), None, ("ladders/changepoint", "h_0_1")],
}
FULL = "mixers-scorecard/scorecard"
REALISED, PARTIAL = 0.9, 0.5  # the profile's thresholds (SweepConfig.primitives), unchanged


def run(root: Path, jobs: int, models: list[str]) -> None:
    """Each mixer's scorecard under the default protocol, one after the other."""
    from windtunnel.scorecard.score import ScorecardRequest, run_scorecard

    for model in models:
        if model == "transformer":
            continue  # the shipped reference is its scorecard
        run_scorecard(ScorecardRequest.build({"model": model}), root / model, Execution(workers=jobs))


@functools.cache
def _record(name: str) -> dict[str, dict]:
    doc = json.loads((ROOT / "results" / f"{name}.json").read_text())
    return {row["model"]: row for row in doc["rows"]}


def full_budget(model: str, prim: str) -> list[dict]:
    """The mixers-quick cells of ``prim``'s ladder for ``model``, easiest first: verdict mark and score."""
    cells = []
    for where in LADDERS[prim]:
        cell = _record(FULL)[model][prim] if where is None else _record(where[0])[model][where[1]]
        score = cell["score"]
        mark = cell.get("verdict") or ("✓" if score >= REALISED else "~" if score >= PARTIAL else "✗")
        cells.append({"mark": mark, "score": score})
    return cells


def new_protocol(root: Path, model: str) -> dict[str, list[dict | None]]:
    """The decisive scorecard's cells per primitive, easiest rung first (None: not needed; a rung
    it needed without a result is ``{"missing": True}``)."""
    if model == "transformer":
        from windtunnel.scorecard.reference import load_reference
        from windtunnel.scorecard.score import _rung_order

        by_rule = load_reference("quick").by_rule()  # every rung trained to its full budget
        return {prim: [{"verdict": by_rule[n].verdict, "score": by_rule[n].score, "how": "shipped reference"}
                       for n in _rung_order("quick", prim, [r for r in by_rule if r.partition("@")[0] == prim])]
                for prim in LADDERS}
    card = json.loads((root / model / "scorecard.json").read_text())
    return {prim: [None if not c.get("needed", True) else c["model"] or {"missing": True} for c in card["ladder"][prim]]
            for prim in LADDERS}


def compare(model: str, prim: str, full: list[dict], new: list[dict | None]) -> list[dict]:
    """Each rung's full-budget verdict beside the decisive scorecard's (run, or implied by the
    search), whether they agree, and why not where they do not."""
    if len(full) != len(new):
        raise ValueError(f"{model} {prim}: {len(full)} full-budget rungs against {len(new)} in the scorecard")
    rows = []
    for i, (f, n) in enumerate(zip(full, new)):
        row = {"model": model, "primitive": prim, "rung": i, "full": f"{f['mark']} {f['score']:.2f}"}
        if n is None:  # not needed: below a realised rung it counts as realised, above one not realised as not
            source = next((j for j in range(i + 1, len(new)) if new[j] and new[j].get("verdict") == "yes"), None)
            source = source if source is not None else next(j for j in range(i - 1, -1, -1) if new[j])
            below_realised = source > i
            mark = "✓" if below_realised else "not ✓"
            row.update(new=f"{mark} (not needed)", how=f"implied by rung {source}", source=source,
                       agrees=(f["mark"] == "✓") == below_realised)
        elif n.get("missing"):
            row.update(new="-", how="missing", agrees=False)
        else:
            mark = _MARK[n["verdict"]]
            stop = n.get("steps_to_realise")
            how = n.get("how") or (f"decided early (realised by step {stop:g} of {n['budget_steps']})"
                                   if stop is not None and stop < n["budget_steps"] else "trained to the end")
            row.update(new=f"{mark} {n['score']:.2f}", how=how, agrees=mark == f["mark"])
        rows.append(row)
    for row in rows:
        if not row["agrees"]:
            row["why"] = _why(row, full[row["rung"]], new[row["rung"]], rows)
    return rows


def _why(row: dict, f: dict, n: dict | None, rows: list[dict]) -> str:
    if row["how"] == "missing":
        return "the scorecard needed this rung and has no result for it (its run did not finish)"
    if n is None:
        source = rows[row["source"]]
        if not source["agrees"]:
            return f"implied by rung {row['source']}, which itself differs ({source['full']} at the full budget)"
        return ("the ladder is not monotone at the full budget: this easier rung scored "
                f"{f['score']:.2f} below a harder one realised" if f["mark"] != "✓" else
                "a harder rung is realised at the full budget although this easier one was not")
    if row["how"].startswith("decided"):
        return (f"realised (full evaluation {n['score']:.2f}) when it was decided, the full-budget run ends at "
                f"{f['score']:.2f}: it unlearns after realising")
    return f"the same run scored {n['score']:.2f} here and {f['score']:.2f} in mixers-quick, across a threshold"


def analyse(root: Path, concurrent: str) -> dict:
    cells, missing = [], []
    for model in MIXERS:
        if model != "transformer" and not (root / model / "scorecard.json").is_file():
            missing.append(model)
            continue
        new = new_protocol(root, model)
        for prim in LADDERS:
            cells += compare(model, prim, full_budget(model, prim), new[prim])
    summary = [{"model": m, "cells": len(rs), "agree": sum(r["agrees"] for r in rs),
                "scored": sum(not r["how"].startswith(("implied", "missing")) for r in rs),
                "decided_early": sum(r["how"].startswith("decided") for r in rs)}
               for m in MIXERS if (rs := [r for r in cells if r["model"] == m])]
    agree = sum(r["agrees"] for r in cells)
    provenance = record_provenance(f"python benchmarks/study_agreement.py run --root {root} && "
                                   f"python benchmarks/study_agreement.py analyse --root {root}",
                                   concurrent=concurrent, root=ROOT, date=datetime.date.today().isoformat())
    title = (f"The decisive scorecard against mixers-quick's full-budget verdicts: {agree} of {len(cells)} cells "
             f"agree ({100 * agree / max(1, len(cells)):.1f}%)" + (f"; not yet scored: {', '.join(missing)}" if missing else ""))
    out = ROOT / "results" / "scorecard-agreement"
    out.mkdir(parents=True, exist_ok=True)
    doc = {"title": title, "provenance": provenance,
           "columns": [{"key": k, "label": k.replace("_", " ")} for k in ("model", "cells", "agree", "scored", "decided_early")],
           "rows": summary, "missing": missing}
    (out / "agreement.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    diffs = [{k: r[k] for k in ("model", "primitive", "rung", "full", "new", "how", "why")} for r in cells if not r["agrees"]]
    (out / "differences.json").write_text(json.dumps({
        "title": "Every cell where the decisive scorecard differs from the full-budget verdict, and why",
        "provenance": provenance,
        "columns": [{"key": k, "label": k} for k in ("model", "primitive", "rung", "full", "new", "how", "why")],
        "rows": diffs}, indent=1, ensure_ascii=False) + "\n")
    return {"agree": agree, "cells": len(cells), "differences": diffs, "missing": missing}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("phase", choices=["run", "analyse"])
    ap.add_argument("--root", type=Path, default=Path("runs/agreement"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--models", default=",".join(MIXERS))
    ap.add_argument("--concurrent", default="not stated", help="what else ran on the machine (for the record)")
    args = ap.parse_args()
    if args.phase == "run":
        run(args.root, args.jobs, args.models.split(","))
        return
    res = analyse(args.root, args.concurrent)
    for d in res["differences"]:
        print(f"{d['model']:<16} {d['primitive']:<20} rung {d['rung']}: full {d['full']}, now {d['new']} "
              f"({d['how']}): {d['why']}")
    print(f"agree {res['agree']}/{res['cells']}" + (f"; not yet scored: {', '.join(res['missing'])}" if res["missing"] else ""))


if __name__ == "__main__":
    main()
