"""A learning-rate-free optimiser against the search: Prodigy, one run per case, on the recorded
reversals (a pilot of issue 54's candidate; the protocol is unchanged).

    pip install prodigyopt==1.1.2
    python benchmarks/study_lr_free.py [--cases kalman:gru,kalman:mamba] [--jobs 2] [--runs runs/lr-free]
                                       [--out results/search-study/lr-free.json]

Each case of ``results/search-study/study.json`` (the sixteen cases where training every rate to
the end overturned the plain halving's pick) starts from the search's own base config
(:func:`windtunnel.sweep.primitives.tune_configs`: the quick profile at the scorecard's budget
and shape), and is trained once to the end with Prodigy in place of AdamW: the same two parameter
groups, betas, weight decay, warm-up and cosine schedule, with ``train.lr = 1`` (the schedule's
factor is Prodigy's multiplier of its own step-size estimate, as its authors advise). Its final
probe KL is judged as the study judges a pick: it agrees when it is within 2% of the full winner's
(the best of all five rates trained to the end), or better. One run instead of three to five:
were it to agree on at least 14 of the 16, it would go on to the nine mixers' cells.

The optimiser is swapped in this process alone (``windtunnel.train.loop.make_optimizer``): the
package's runs, their configs and content hashes are untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "results" / "search-study" / "study.json"
#: the study's criterion: a pick agrees when its final probe KL is within 2% of the winner's
WITHIN = 0.02


def prodigy_optimizer(model, tc):
    """Prodigy over the trainer's two parameter groups (weight decay on the matrices only)."""
    from prodigyopt import Prodigy

    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return Prodigy(groups, lr=tc.lr, betas=tuple(tc.betas), safeguard_warmup=True, use_bias_correction=True)


def train_case(task: str, model: str, runs: Path) -> dict:
    """One case trained with Prodigy (in this process): its final probe KL and seconds."""
    from windtunnel.sweep.primitives import tune_configs
    from windtunnel.train import loop
    from windtunnel.train.config import RunConfig
    from windtunnel.train.trainer import train
    from windtunnel.tune.rules import probe_at

    loop.make_optimizer = prodigy_optimizer
    base = tune_configs(task, [model], "quick")[0]
    doc = base.model_dump(mode="json")
    doc["train"]["lr"] = 1.0
    config = RunConfig.build(doc, where="lr-free case")
    folder = runs / f"{task}-{model}"
    train(config, folder, progress=False)  # a finished run is read, not trained again
    last = json.loads((folder / "metrics.jsonl").read_text().splitlines()[-1])
    return {"task": task, "model": model, "steps": config.train.steps,
            "final_probe_kl": probe_at(folder, config.train.steps, "kl_bayes_model"),
            "seconds": round(last["seconds"], 1)}  # the run's own training time, over its resumes


def judged(case: dict, row: dict) -> dict:
    """The case against the study's ground truth (every rate's final probe KL)."""
    finals = {float(k): v for k, v in row["final_probe_kl"].items() if v is not None}
    if row.get("final_probe_kl_here"):
        finals = {float(k): v for k, v in row["final_probe_kl_here"].items() if v is not None}
    best = min(finals.values())
    kl = case["final_probe_kl"]
    return {**case, "full_winner": row["full_winner"], "full_winner_probe_kl": best,
            "ratio_to_winner": None if kl is None else round(kl / best, 4),
            "agrees": kl is not None and kl <= best * (1 + WITHIN)}


COLUMNS = [{"key": "task", "label": "tunnel"}, {"key": "model", "label": "model"},
           {"key": "prodigy", "label": "Prodigy: final probe KL"},
           {"key": "winner", "label": "full winner: rate, final probe KL"},
           {"key": "ratio", "label": "Prodigy / winner"}, {"key": "agrees", "label": "agrees (within 2%)"},
           {"key": "seconds", "label": "train s"}]


def table_row(r: dict) -> dict:
    """A case as the results page's table shows it."""
    if "agrees" not in r:
        return {"task": r["task"], "model": r["model"], "prodigy": f"failed: {r.get('error', '?')}", "winner": "-",
                "ratio": "-", "agrees": "-", "seconds": "-"}
    kl = r["final_probe_kl"]
    return {"task": r["task"], "model": r["model"], "prodigy": "-" if kl is None else f"{kl:.4f}",
            "winner": f"{r['full_winner']:g}, {r['full_winner_probe_kl']:.4f}",
            "ratio": "-" if r["ratio_to_winner"] is None else f"{r['ratio_to_winner']:.2f}",
            "agrees": "yes" if r["agrees"] else "no", "seconds": f"{r['seconds']:.0f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", help="task:model,... (default: all sixteen)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "lr-free")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "search-study" / "lr-free.json")
    ap.add_argument("--concurrent", help="what else ran on the machine meanwhile (default: the cases beside each other)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # task:model, trained in this process (a worker)
    a = ap.parse_args()
    if a.one:
        task, model = a.one.split(":")
        print(json.dumps(train_case(task, model, a.runs)))
        return
    rows = {(r["task"], r["model"]): r for r in json.loads(STUDY.read_text())["rows"]}
    cases = [tuple(c.split(":")) for c in a.cases.split(",")] if a.cases else list(rows)
    unknown = [c for c in cases if c not in rows]
    if unknown:
        raise SystemExit(f"--cases: {unknown} are not cases of {STUDY.relative_to(ROOT)}; allowed: "
                         + ", ".join(f"{t}:{m}" for t, m in rows))

    def one(case):  # a process per case: one torch thread each, the optimiser swapped there alone
        out = subprocess.run([sys.executable, __file__, "--one", ":".join(case), "--runs", str(a.runs)],
                             capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if out.returncode:
            return {"task": case[0], "model": case[1], "error": out.stderr.strip().splitlines()[-1]}
        return json.loads(out.stdout.strip().splitlines()[-1])

    from windtunnel.provenance import provenance

    with ThreadPoolExecutor(a.jobs) as pool:
        results = [judged(r, rows[(r["task"], r["model"])]) if "error" not in r else r for r in pool.map(one, cases)]
    for r in results:
        print(json.dumps(r))
    done = [r for r in results if "agrees" in r]
    doc = {"title": f"Prodigy, one run per case, agrees with the full search's winner in "
                    f"{sum(r['agrees'] for r in done)} of {len(done)} recorded reversals"
                    + (f" ({len(results) - len(done)} failed)" if len(done) < len(results) else ""),
           "criterion": f"final probe KL within {WITHIN:.0%} of the full winner's, or better",
           "columns": COLUMNS, "rows": [table_row(r) for r in results], "runs": results,
           "provenance": provenance(" ".join(["python", "benchmarks/study_lr_free.py", *sys.argv[1:]]),
                                    concurrent=a.concurrent or f"{a.jobs} cases at a time, one thread each")}
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(doc["title"])


if __name__ == "__main__":
    main()
