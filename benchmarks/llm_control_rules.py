"""How often do Paper III's claim rules pass a network with random weights? Tiny random models of
two families (MHA: GPT-NeoX; GQA: Llama), several seeds each, every one judged against its
control (a re-initialisation of the same shape) by the rules users get (``windtunnel.llm.claims``).
Nothing was learned, so every verdict should be "does not hold" or "not testable": a rule that
passes here would pass an untrained network.

    python benchmarks/llm_control_rules.py --out runs/control-rules --seeds 4 [--record]

Runs resume from ``--out``. ``--record`` writes results/llm/control-rules.json (every verdict, the
counts, provenance); docs/llm.md shows its table (rendered by ``make results``).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the shapes of paper3-offline's random models
SHAPES = {"gpt_neox": {"family": "gpt_neox", "n_layers": 6, "d_model": 128, "n_heads": 8, "n_kv_heads": None},
          "llama": {"family": "llama", "n_layers": 6, "d_model": 128, "n_heads": 8, "n_kv_heads": 2}}
#: every analysis but the interventions (a random model is never calibrated: its entropy axis is not testable)
ANALYSES = ["value_manifold", "key_orthogonality", "attention_focusing", "domain_restriction", "sula"]
OPTIONS = {"sula_n_per_k": 30, "plots": False}
#: the claims these analyses judge
CLAIMS = ("value_manifold", "key_orthogonality", "focusing", "domain_restriction", "sula")


def run(out: Path, seeds: int) -> list[dict]:
    from windtunnel.llm.config import LLMOptions
    from windtunnel.llm.control import finished_controls
    from windtunnel.llm.run import run_llm
    from windtunnel.llm.tiny import build_saved

    rows = []
    for family, shape in SHAPES.items():
        for seed in range(seeds):
            spec = {**shape, "sliding_window": None, "seed": seed}
            name = f"{family}-seed{seed}"
            path = build_saved(spec, out / "models" / name)
            doc = run_llm(str(path), ANALYSES, out / name, resume=True, **OPTIONS)
            controls = finished_controls(out / name, doc["analyses"], LLMOptions.build(doc["options"]))
            seconds = doc["timing"]["total_s"] + sum(c["timing"]["total_s"] for c in controls)
            rows.append({"model": name, "control": doc["control"]["rests_on"],
                         **{c["claim"]: c["verdict"] for c in doc["claims"] if c["claim"] in CLAIMS},
                         "seconds": round(seconds, 1)})
            print(name, {c: rows[-1][c] for c in CLAIMS}, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/control-rules"))
    ap.add_argument("--seeds", type=int, default=4, help="random models per family")
    ap.add_argument("--record", action="store_true", help="write results/llm/control-rules.json")
    ap.add_argument("--concurrent", default="not recorded", help="what else ran meanwhile (for the record)")
    args = ap.parse_args()
    rows = run(args.out, args.seeds)
    counts = Counter(r[c] for r in rows for c in CLAIMS)
    passed = [f"{r['model']}: {c}" for r in rows for c in CLAIMS if r[c] in ("holds", "partly")]
    print(f"{len(rows)} random models, {sum(counts.values())} verdicts: {dict(counts)}; held or partly: {passed or 'none'}")
    if args.record:
        from windtunnel.provenance import provenance

        command = f"python benchmarks/llm_control_rules.py --out {args.out} --seeds {args.seeds} --record"
        record = {"title": "Paper III's claim rules on random-weight models, each against its control",
                  "provenance": provenance(command, concurrent=args.concurrent, root=ROOT),
                  "analyses": ANALYSES, "options": OPTIONS, "shapes": SHAPES,
                  "columns": [{"key": "model", "label": "random model"}]
                  + [{"key": c, "label": c.replace("_", " ")} for c in CLAIMS]
                  + [{"key": "control", "label": "control"},
                     {"key": "seconds", "label": "seconds (model and control, their own timings)"}],
                  "rows": rows, "counts": dict(counts), "held_or_partly": passed}
        path = ROOT / "results" / "llm" / "control-rules.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"written: {path}; now run: make results")


if __name__ == "__main__":
    main()
