"""The key frame of the authors' own code (issue 57): their TinyGPT and their bijection data
(``../shared/bench/authors``, unchanged, loaded by path), trained with the key-frame study's CPU
protocol, measured their way.

    python scripts/keyframe_authors.py                          # paired, 1x (1200 steps), keys without replacement
    python scripts/keyframe_authors.py --budget 5               # 5x (6000 steps)
    python scripts/keyframe_authors.py --with-replacement       # their data code's default draw
    python scripts/keyframe_authors.py --steps 20 --out /tmp/a.json   # a quick look

Setup (the one issue 44 describes): paired format ``[k1, v1, ..., kL, vL, q]`` from their
``build_sequence`` (V = 20, L = 19, query from the context), a fresh permutation per sequence
(their ``sample_permutation``), their TinyGPT at 3 layers x 4 heads x d 128; batch 64, AdamW lr
3e-3 betas (0.9, 0.999) weight decay 0.01, 100 warm-up steps then cosine to 0, clip 1.0, one
torch thread. Supervision: the value at each key position (the next token) and the query's value
at the query position. Key frame (their ``measure_key_orthogonality``): the raw token embeddings
of the 20 symbols through layer 0's W_K, mean |off-diagonal cosine| per head, the layer's mean;
beside it the centred keys and the whole layer's keys (every head together). Entropy error: mean
|H(model) - H(Bayes)| in bits over the key positions of 2000 held-out sequences (the query left
out, as their evaluation). Writes ``results/keyframe/authors/<job>.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import sys
from pathlib import Path

from windtunnel.provenance import measuring, provenance
from windtunnel.sweep.studies.keyframe_plan import BASE_STEPS

ROOT = Path(__file__).resolve().parents[1]

AUTHORS = Path(os.environ.get("WINDTUNNEL_AUTHORS_DIR", ROOT.parent / "shared" / "bench" / "authors"))
RESULTS = ROOT / "results" / "keyframe" / "authors"
V, L = 20, 19
PROTOCOL = {"batch_size": 64, "lr": 3e-3, "betas": (0.9, 0.999), "weight_decay": 0.01, "warmup": 100,
            "schedule": "cosine", "grad_clip": 1.0, "dim": 128, "n_layers": 3, "n_heads": 4}
N_EVAL, SEED = 2000, 0


def load(relpath: str, name: str):
    path = AUTHORS / relpath
    if not path.is_file():
        raise SystemExit(f"the authors' code is not at {path} (set WINDTUNNEL_AUTHORS_DIR)")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def batch(data, n: int, with_replacement: bool):
    """n sequences from their generator: inputs (n, 2L+1), targets at every position (-100 where
    none), the keys (n, L) and values (n, L)."""
    import torch

    xs, ts = [], []
    for _ in range(n):
        perm = data.sample_permutation(V)
        x, y = data.build_sequence(perm, L, with_replacement=with_replacement)
        t = torch.full_like(y, -100)
        t[0:2 * L:2] = y[1:2 * L:2]  # the value of key i, predicted at key i
        t[-1] = y[-1]  # the query's value, at the query
        xs.append(x)
        ts.append(t)
    x, t = torch.stack(xs), torch.stack(ts)
    return x, t, x[:, 0:2 * L:2], x[:, 1:2 * L:2]


def bayes_entropy(keys, values):
    """H_Bayes (bits) at each key position: 0 for a key seen before (delta), else log2 of the
    number of values not yet revealed."""
    import torch

    n = keys.shape[0]
    out = torch.empty(n, L, dtype=torch.float64)
    for b in range(n):
        seen_k, seen_v = set(), set()
        for i in range(L):
            k = int(keys[b, i])
            out[b, i] = 0.0 if k in seen_k else math.log2(V - len(seen_v))
            seen_k.add(k)
            seen_v.add(int(values[b, i]))
    return out


def entropy_error(model, probe) -> float:
    import torch

    x, _, keys, values = probe
    with torch.no_grad():
        logits, _ = model(x)
    logp = torch.log_softmax(logits[:, 0:2 * L:2, :V].double(), -1)  # answers: the V symbols
    h = -(logp.exp() * logp).sum(-1) / math.log(2)
    return float((h - bayes_entropy(keys, values)).abs().mean())


def key_frame(model) -> dict:
    """Layer 0: per head (raw, centred) and whole layer (raw, centred), mean |off-diagonal cos|."""
    import torch

    from windtunnel import stats

    d, H = PROTOCOL["dim"], PROTOCOL["n_heads"]
    e = model.tok_emb.weight.detach()[:V].double()
    wk = model.blocks[0].attn.qkv.weight.detach()[d:2 * d].double().view(H, d // H, d)
    keys = torch.einsum("nd,hkd->hnk", e, wk)  # (H, n, dh)
    whole = keys.permute(1, 0, 2).reshape(V, d)
    out = {}
    for name, k in (("per_head", keys), ("whole_layer", whole)):
        for kind in ("raw", "centred"):
            kk = k - k.mean(-2, keepdim=True) if kind == "centred" else k
            v = stats.mean_offdiag_abs_cosine(kk.numpy())
            out[f"{name}_{kind}"] = float(v.mean()) if name == "per_head" else float(v)
            if name == "per_head" and kind == "raw":
                out["per_head_raw_heads"] = [float(x) for x in v]
    return out


def train(steps: int, with_replacement: bool, record_at: list[int]) -> tuple[list[dict], int]:
    import torch

    tg = load("src/models/tinygpt.py", "authors_tinygpt")
    data = load("src/data/bijection.py", "authors_bijection")
    torch.set_num_threads(1)
    random.seed(SEED + 1)
    probe = batch(data, N_EVAL, with_replacement)  # held out: drawn first, from its own seed
    random.seed(SEED)
    torch.manual_seed(SEED)
    p = PROTOCOL
    model = tg.TinyGPT(vocab_size=V, dim=p["dim"], n_layers=p["n_layers"], n_heads=p["n_heads"], max_seq_len=2 * L + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], betas=p["betas"], weight_decay=p["weight_decay"])

    def lr_at(step: int) -> float:
        if step < p["warmup"]:
            return (step + 1) / p["warmup"]
        return 0.5 * (1 + math.cos(math.pi * (step - p["warmup"]) / max(1, steps - p["warmup"])))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    curve = []
    for step in range(steps + 1):
        if step in record_at:
            model.eval()
            curve.append({"step": step, "entropy_error": entropy_error(model, probe), **key_frame(model)})
            model.train()
            print(f"step {step}: L0 per head {curve[-1]['per_head_raw']:.3f}, whole layer "
                  f"{curve[-1]['whole_layer_raw']:.3f}, entropy error {curve[-1]['entropy_error']:.4f}", flush=True)
        if step == steps:
            break
        x, t, _, _ = batch(data, p["batch_size"], with_replacement)
        logits, _ = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), t.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), p["grad_clip"])
        opt.step()
        sched.step()
    return curve, sum(q.numel() for q in model.parameters())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=1, help="multiple of the study's 1200 steps")
    ap.add_argument("--steps", type=int, default=None, help="steps (overrides --budget)")
    ap.add_argument("--with-replacement", action="store_true", help="keys drawn with replacement (their default)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    steps = args.steps if args.steps is not None else BASE_STEPS * args.budget
    if steps < 1:
        raise SystemExit(f"--steps / --budget must give at least 1 step, got {steps}")
    job = f"authors-paired{'-repl' if args.with_replacement else ''}-" + (
        f"{args.budget}x" if args.steps is None else f"{steps}steps")
    record_at = sorted({0, *range(300, steps, 300), steps})
    with measuring() as measured:
        curve, n_params = train(steps, args.with_replacement, record_at)
    cmd = " ".join(["python scripts/keyframe_authors.py", *(argv if argv is not None else sys.argv[1:])])
    doc = {"job": job, "code": "the authors' src/models/tinygpt.py and src/data/bijection.py (../shared/bench/authors)",
           "format": "paired", "V": V, "L": L, "with_replacement": args.with_replacement, "steps": steps,
           "protocol": PROTOCOL, "n_params": n_params, "n_eval": N_EVAL, "seed": SEED, "curve": curve,
           "final": curve[-1],
           "provenance": provenance(cmd, measured=measured, root=ROOT)}
    out = args.out or RESULTS / f"{job}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{job}: L0 per head {curve[-1]['per_head_raw']:.3f} (centred {curve[-1]['per_head_centred']:.3f}), whole "
          f"layer {curve[-1]['whole_layer_raw']:.3f} (centred {curve[-1]['whole_layer_centred']:.3f}), entropy error "
          f"{curve[-1]['entropy_error']:.4f} bits -> {out}")


if __name__ == "__main__":
    main()
