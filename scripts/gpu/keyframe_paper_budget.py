"""The key-frame study at the paper's budget, for a GPU (issue 44; the CPU study is
``scripts/keyframe_study.py``).

Trains our ``transformer`` (its default options, LayerNorm, biases, a head tied over the answers,
at the paper's size 6 layers x 6 heads x d 192) and ``tinygpt`` (the authors' TinyGPT, whose
defaults are that size) with the same protocol, in both task formats:

* ``paired`` at the ``paper`` profile's budget (Paper I v1: 100k steps, batch 128, AdamW
  constant 1e-3, weight decay 0.01);
* ``sepvocab`` at the ``repo`` profile's budget (the authors' production run behind the 0.052
  key-frame figure: 50k steps, batch 256, lr 3e-4, 2000 warmup steps then cosine, weight decay 0.1,
  betas (0.9, 0.95)), with keys drawn with replacement as the authors' data code draws them (the
  profile's ``with_replacement``; ``--keys without`` draws them without, as the main job).

The job's name carries the keys (``-repl`` when drawn with replacement), and its record the task
parameters.

Each run is diagnosed (key_frame, ablation, dynamics) and lands as
``results/keyframe/gpu/<job>.json`` (the CPU study's record, with the device in the provenance);
``python scripts/keyframe_study.py render`` then shows them on docs/results/keyframe.md. It
prints one line per run: the layer-0 statistic per head and for the whole layer (raw and centred)
against its random value, every layer's, the entropy error and the ablation's frame-head verdict.

    python scripts/gpu/keyframe_paper_budget.py                       # all four runs, full budgets
    python scripts/gpu/keyframe_paper_budget.py --formats paired --models tinygpt --steps 20000
    python scripts/gpu/keyframe_paper_budget.py --formats sepvocab --keys without   # the main job's keys
    python scripts/gpu/keyframe_paper_budget.py --steps 4 --checkpoints 2 --probe 8 --device cpu \\
        --out /tmp/kf --results /tmp/kf/res                              # dry run on a CPU

A run resumes from its folder when the command is given again (the device's 10-minute command
limit: rerun until every line is printed). Time: an H100 does roughly 100-200 steps/s on this
2.7M-parameter model (not measured here); the four full runs need of the order of an hour.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from windtunnel.provenance import machine_info, measuring, provenance
from windtunnel.sweep.studies.keyframe_plan import ANALYSES, PROBE
from windtunnel.sweep.studies.keyframe_record import summarise

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from keyframe_render import frame_verdict, to_second  # noqa: E402

PROFILES = {"paired": "paper", "sepvocab": "repo"}
PAPER_SHAPE = {"n_layers": 6, "n_heads": 6, "d_model": 192, "d_ffn": 768}
MODEL_PARAMS = {"transformer": dict(PAPER_SHAPE, tie_head=True), "tinygpt": dict(PAPER_SHAPE)}


#: --keys: the profile's draw, or keys with / without replacement in every format
KEYS = {"profile": None, "with": True, "without": False}


def overrides(model: str, fmt: str, steps: int | None, device: str, checkpoints: int, keys: str = "profile") -> dict:
    out = {"model_params": MODEL_PARAMS[model], "task_params.format": fmt, "train.device": device,
           "train.checkpoints": checkpoints}
    if KEYS[keys] is not None:
        out["task_params.with_replacement"] = KEYS[keys]
    if steps is not None:
        out["train.steps"] = steps
    return out


def device_name(device: str) -> str:
    import torch

    if device != "cpu" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return "cpu"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="transformer,tinygpt")
    ap.add_argument("--formats", default="paired,sepvocab")
    ap.add_argument("--steps", type=int, default=None, help="override the profiles' budgets (default: theirs)")
    ap.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--keys", default="profile", choices=tuple(KEYS),
                    help="keys drawn with or without replacement (profile: repo's with, paper's without)")
    ap.add_argument("--checkpoints", type=int, default=30)
    ap.add_argument("--probe", type=int, default=PROBE["n_sequences"], help="probe sequences of the diagnostics")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "keyframe-gpu")
    ap.add_argument("--results", type=Path, default=ROOT / "results" / "keyframe" / "gpu")
    args = ap.parse_args(argv)

    from windtunnel.geometry.diagnose import run_diagnostics
    from windtunnel.train.config import resolve_run
    from windtunnel.train.trainer import train

    args.results.mkdir(parents=True, exist_ok=True)
    for fmt in args.formats.split(","):
        for model in args.models.split(","):
            cfg = resolve_run("bijection", model, PROFILES[fmt],
                              overrides(model, fmt, args.steps, args.device, args.checkpoints, args.keys))
            repl = "-repl" if cfg.task_params.get("with_replacement", False) else ""
            job = f"{model}-{fmt}{repl}-{cfg.train.steps}"
            run_dir = args.out / job
            print(f"{job}: training {cfg.train.steps} steps ({PROFILES[fmt]} profile) in {run_dir}", flush=True)
            with measuring() as measured:
                train(cfg, run_dir, progress=False)
                diag = run_diagnostics(run_dir, ANALYSES, progress=False, n_sequences=args.probe, seed=PROBE["seed"])
            probe = {"n_sequences": args.probe, "seed": PROBE["seed"]}
            doc = summarise(run_dir, diag, job=job, probe=probe, cell=f"{model}-{fmt}-paper-budget", budget=None,
                            seed=cfg.train.seed, factor="paper budget",
                            what=f"{model}, {fmt}{', keys with replacement' if repl else ''}, the "
                                 f"{PROFILES[fmt]} profile's budget")
            cmd = " ".join(["python scripts/gpu/keyframe_paper_budget.py", *(argv if argv is not None else sys.argv[1:])])
            doc["provenance"] = provenance(cmd, measured=measured, root=ROOT,
                                           machine={**machine_info(), "device": device_name(args.device)})
            (args.results / f"{job}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            kf = doc["key_frame"]
            print(f"{job}: L0 raw {kf['tokens_raw']['mean'][0]:.3f} (random {kf['tokens_raw']['random'][0]:.3f}, "
                  f"step 0 {kf['tokens_raw']['init'][0]:.3f}), centred {kf['tokens_centred']['mean'][0]:.3f}; "
                  f"whole layer {kf['layer_raw']['mean'][0]:.3f} (random {kf['layer_raw']['random'][0]:.3f}), "
                  f"centred {kf['layer_centred']['mean'][0]:.3f}; "
                  f"layers {' / '.join(f'{v:.3f}' for v in kf['tokens_raw']['mean'])}; "
                  f"entropy error {doc['entropy_error']['value']:.4f} bits; {frame_verdict(doc).strip('*')} "
                  f"({doc['ablation']['frame_head']['name']}, {to_second(doc):.2f}x "
                  f"the runner-up)", flush=True)


if __name__ == "__main__":
    main()
