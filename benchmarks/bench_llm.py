"""Prompts per second and peak memory of the LLM capture on a tiny model, on the CPU.

    python benchmarks/bench_llm.py [--prompts 128] [--batches 1,8,32] [--d-model 256] [--layers 6]
    python benchmarks/bench_llm.py --pythia-410m-shape --prompts 64 --batches 16

``--pythia-410m-shape`` builds a randomly initialised GPT-NeoX with Pythia-410M's configuration
(24 layers, d_model 1024, 16 heads, vocabulary 50,304; 405M parameters): the same compute per
token as the real model (the weights do not change the cost), without a download.

Builds a tiny randomly initialised Llama-family model (grouped-query attention) with a small
byte-level BPE tokenizer, saves it to a temporary folder, loads it through the user path
(:func:`windtunnel.llm.loading.load_model`) and times :func:`windtunnel.llm.capture.run_prompts`
on the shipped mixed-domain prompts with everything the analyses need (values and keys at every
layer, attention entropy at every layer, next-token entropy). Each configuration runs in a fresh
subprocess so its peak resident memory (ru_maxrss) is its own. For comparison it also runs the
naive capture (``output_attentions=True, output_hidden_states=True``, full logits, everything
kept) that the bounded capture replaces.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(path: Path, d_model: int, n_layers: int, pythia: bool = False) -> None:
    sys.path.insert(0, str(HERE.parent / "tests" / "llm"))
    import torch
    import transformers
    from llm_tiny import build_tokenizer

    tok = build_tokenizer(path)
    torch.manual_seed(0)
    if pythia:
        cfg = transformers.GPTNeoXConfig(vocab_size=50304, hidden_size=1024, num_hidden_layers=24,
                                         num_attention_heads=16, intermediate_size=4096, rotary_pct=0.25,
                                         max_position_embeddings=2048)
        transformers.GPTNeoXForCausalLM(cfg).save_pretrained(path)
        return
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=d_model, intermediate_size=4 * d_model,
                                   num_hidden_layers=n_layers, num_attention_heads=8, num_key_value_heads=2,
                                   max_position_embeddings=512)
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(path: str, n: int, batch: int, mode: str, threads: int) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    from windtunnel.llm.capture import Batching, Keep, run_prompts
    from windtunnel.llm.config import build_options
    from windtunnel.llm.loading import load_model
    from windtunnel.llm.prompts import load_pool

    lm = load_model(path, build_options())
    texts = [p["text"] for p in load_pool("mixed")["prompts"]]
    prompts = (texts * (n // len(texts) + 1))[:n]
    L = lm.adapter.n_layers
    run_prompts(lm, prompts[:batch], Keep(value_layers=range(L)), Batching(batch_size=batch))  # warm-up
    before = rss_mib()
    t = time.perf_counter()
    if mode == "bounded":
        run_prompts(lm, prompts, Keep(value_layers=range(L), key_layers=range(L), attention=True), Batching(batch_size=batch))
    else:  # naive: keep every layer's full attention, hidden states and logits for every prompt
        kept = []
        tok = lm.tokenizer
        with torch.inference_mode():
            for s in range(0, n, batch):
                enc = tok(prompts[s:s + batch], return_tensors="pt", padding=True)
                out = lm.model(**enc, output_attentions=True, output_hidden_states=True, use_cache=False)
                kept.append((out.logits, out.attentions, out.hidden_states))
    dt = time.perf_counter() - t
    tokens = int(np.mean([len(lm.tokenizer(p)["input_ids"]) for p in prompts]))
    return {"mode": mode, "batch": batch, "prompts": n, "prompts_per_s": n / dt, "mean_tokens": tokens,
            "rss_before_mib": before, "peak_rss_mib": rss_mib(), "params_m": lm.info["n_parameters"] / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--pythia-410m-shape", action="store_true", help="time a Pythia-410M-shaped model instead")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per worker")
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        path, n, batch, mode, threads = a.worker
        print(json.dumps(worker(path, int(n), int(batch), mode, int(threads))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), a.d_model, a.layers, a.pythia_410m_shape)
        what = ("Pythia-410M-shaped GPT-NeoX (random weights)" if a.pythia_410m_shape else
                f"tiny Llama (GQA 8/2 heads), d_model {a.d_model}, {a.layers} layers")
        print(f"{what}; {a.prompts} mixed-domain prompts; CPU, {a.threads} torch threads")
        print(f"{'mode':>8} {'batch':>5} {'prompts/s':>10} {'tokens':>6} {'peak RSS MiB':>13} {'RSS growth MiB':>15}")
        batches = [int(b) for b in a.batches.split(",")]
        runs = [(b, "bounded") for b in batches] + ([] if a.pythia_410m_shape else [(max(batches), "naive")])
        for batch, mode in runs:
            out = subprocess.run([sys.executable, __file__, "--worker", tmp, str(a.prompts), str(batch), mode,
                                  str(a.threads)],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            print(f"{mode:>8} {batch:>5} {r['prompts_per_s']:>10.1f} {r['mean_tokens']:>6} {r['peak_rss_mib']:>13.0f} "
                  f"{r['peak_rss_mib'] - r['rss_before_mib']:>15.0f}")


if __name__ == "__main__":
    main()
