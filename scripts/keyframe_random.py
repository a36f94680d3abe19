"""The key frame's random value, in seconds and without training (issue 57): the layer-0 keys of
freshly initialised models, per head (the authors' code) and for the whole layer (every head's
keys together), raw and centred, beside the closed form of random keys
(:func:`windtunnel.stats.random_key_abs_cosine`) and its Monte Carlo.

    python scripts/keyframe_random.py            # -> results/keyframe/random/random-keys.json
    python scripts/keyframe_random.py --draws 5 --out /tmp/random-keys.json   # a quicker look

Shapes: the paper's (6 layers x 6 heads x d_model 192, the ``repo`` profile's) and the CPU study's
(3 x 4 x 128), for our ``transformer`` and the authors' ``tinygpt``, on the bijection's 20 key
tokens. The paper's random value, 0.082, is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from windtunnel.provenance import measuring, provenance
from windtunnel.sweep.studies.keyframe_plan import SHAPE

ROOT = Path(__file__).resolve().parents[1]

PAPER_RANDOM = 0.082  # Paper I v3 (summary C): the random value of the layer-0 key statistic
SHAPES = {"paper": {"n_layers": 6, "n_heads": 6, "d_model": 192, "d_ffn": 768}, "study": SHAPE}
MODELS = ("transformer", "tinygpt")
#: the readings: (name, key-frame variant)
READINGS = (("per head, raw", "tokens_raw"), ("per head, centred", "tokens_centred"),
            ("whole layer, raw", "layer_raw"), ("whole layer, centred", "layer_centred"))
OUT = ROOT / "results" / "keyframe" / "random" / "random-keys.json"


def measure(model: str, shape: dict, draws: int, mc_draws: int) -> dict:
    """Layer-0 statistic of ``draws`` fresh initialisations (seeds 0..draws-1) of ``model`` at
    ``shape`` on the bijection (V = 20), each reading with its closed form and Monte Carlo."""
    import numpy as np
    import torch

    from windtunnel import stats
    from windtunnel.geometry import key_frame
    from windtunnel.models import make_model
    from windtunnel.tasks import make_task

    task = make_task("bijection", {"V": 20, "L": 19})
    tokens, _ = key_frame.hypothesis_tokens(task)
    values: dict[str, list[float]] = {v: [] for _, v in READINGS}
    for seed in range(draws):
        torch.manual_seed(seed)
        m = make_model(model, task.spec, dict(shape))
        with torch.no_grad():
            for _, v in READINGS:
                values[v].append(float(key_frame.per_head(m, tokens, v)[0].mean()))
    d, n = shape["d_model"], len(tokens)
    out = {}
    for name, v in READINGS:
        dim = d if v.startswith("layer") else d // shape["n_heads"]
        centred = v.endswith("centred")
        mc, se = stats.random_key_abs_cosine_mc(dim, d, n, centred=centred, draws=mc_draws, seed=dim + d)
        x = np.asarray(values[v])
        out[v] = {"reading": name, "keys_dim": dim, "d_model": d, "n_tokens": n,
                  "effective_dim": stats.key_effective_dim(dim, d),
                  "closed_form": stats.random_key_abs_cosine(dim, d, n, centred=centred),
                  "monte_carlo": mc, "monte_carlo_se": se, "monte_carlo_draws": mc_draws,
                  "models_mean": float(x.mean()), "models_sd": float(x.std(ddof=1)) if x.size > 1 else 0.0,
                  "models_draws": int(x.size)}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=20, help="fresh initialisations per model and shape")
    ap.add_argument("--mc-draws", type=int, default=300, help="Monte Carlo draws of the closed form's law")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.draws < 1 or args.mc_draws < 2:
        raise SystemExit(f"--draws must be >= 1 and --mc-draws >= 2, got {args.draws} and {args.mc_draws}")
    import torch

    torch.set_num_threads(1)
    with measuring(every=5.0) as measured:
        rows = [{"model": model, "shape": shape, **SHAPES[shape],
                 "readings": measure(model, SHAPES[shape], args.draws, args.mc_draws)}
                for shape in SHAPES for model in MODELS]
    cmd = " ".join(["python scripts/keyframe_random.py", *(argv if argv is not None else sys.argv[1:])])
    doc = {"paper_random": PAPER_RANDOM, "rows": rows,
           "provenance": provenance(cmd, measured=measured, root=ROOT)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"layer-0 mean |off-diagonal cos| of the 20 key tokens' keys at initialisation; the paper's random: "
          f"{PAPER_RANDOM}")
    for r in rows:
        for x in r["readings"].values():
            print(f"{r['model']:12} {r['shape']:5} {r['n_layers']}x{r['n_heads']}x{r['d_model']:<4} {x['reading']:21} "
                  f"models {x['models_mean']:.4f} ± {x['models_sd']:.4f}  closed form {x['closed_form']:.4f}  "
                  f"Monte Carlo {x['monte_carlo']:.4f} ± {x['monte_carlo_se']:.4f}")
    print(f"-> {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out} "
          f"({doc['provenance']['wall_seconds']} s)")


if __name__ == "__main__":
    main()
