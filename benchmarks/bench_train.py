"""Training throughput and model FLOP utilisation for every architecture, on the bijection.

    python benchmarks/bench_train.py [--batch 128] [--steps 8] [--sizes quick,paper] [--models ...]
                                     [--precisions fp32,bf16] [--quick-batch 64]

For each architecture at the quick-profile size and at the paper size (every model matched to
the 2.67M-parameter transformer), measures training steps/s (fresh batch, forward, backward,
AdamW step) in fp32 and with bf16 autocast, tokens/s, and the model FLOP utilisation: the
dense-matmul FLOPs of a step (6 x parameters x tokens, plus attention scores for the
transformer) against this machine's measured matmul peak in the same precision. It also times a
plain reference implementation of the 2.67M transformer (nanoGPT-style, written here) so the
ratio shows what the library's model costs against the straightforward one.

The models of one size and precision are stepped in turn, one step each per round, so that a
machine shared with other jobs slows them alike; each rate is the median over rounds, and the
last column is the median over rounds of the step-time ratio against the same-size transformer
(``x tf``: 1.0 means as fast as the transformer, 0.5 half as fast). The quick size is timed at its
profile's batch (``--quick-batch``, 64), the paper size at ``--batch``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from windtunnel.config import ConfigError
from windtunnel.models import make_model, match_capacity
from windtunnel.tasks import make_generator, make_task
from windtunnel.train.config import resolve_run
from windtunnel.train.trainer import loss_fn


def matmul_peak(dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(3):
        a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t0)


class PlainBlock(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class PlainTransformer(nn.Module):
    """The straightforward reference: embeddings, pre-norm blocks, final norm, tied head."""

    def __init__(self, vocab: int, T: int, d: int = 192, L: int = 6, h: int = 6):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(PlainBlock(d, h) for _ in range(L))
        self.ln = nn.LayerNorm(d)

    def forward(self, x, positions):
        h = self.tok(x) + self.pos.weight[: x.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.ln(h)[:, positions] @ self.tok.weight.T


def stepper(model, task, batch: int, bf16: bool):
    """A function that runs one timed training step of ``model`` and returns its seconds."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = make_generator(0)
    spec = task.spec

    def step() -> float:
        t0 = time.perf_counter()
        b = task.sample(batch, g)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(b.inputs, positions=b.positions)
        if out.shape[-1] != spec.answer_size:  # the plain model's head spans the whole vocabulary
            out = out[..., list(spec.answer_token_ids)]
        loss = loss_fn(spec.loss, out, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    return step


def interleaved_times(steppers: dict, steps: int, warmup: int = 2) -> dict[str, list[float]]:
    """Step times of every model, one step of each per round (after ``warmup`` rounds)."""
    times: dict[str, list[float]] = {name: [] for name in steppers}
    for i in range(steps + warmup):
        for name, step in steppers.items():
            t = step()
            if i >= warmup:
                times[name].append(t)
    return times


def step_flops(model, n_params: int, batch: int, seq_len: int) -> float:
    """Model FLOPs of one training step: 6 N per token, plus 12 L T d per token for attention
    in transformers (the PaLM convention, counting the full T x T score matrix)."""
    flops = 6 * n_params * batch * seq_len
    if isinstance(model, PlainTransformer):
        layers, d = len(model.blocks), model.tok.embedding_dim
    elif getattr(model, "name", "") == "transformer":
        layers, d = model.config.n_layers, model.config.d_model
    else:
        return flops
    return flops + 12 * layers * d * batch * seq_len**2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--sizes", default="quick,paper")
    ap.add_argument("--models", default="transformer,lstm,mamba,mlp")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--quick-batch", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(2)
    # only the precisions asked for: a bf16 matmul without native bf16 units takes minutes
    wanted = {p.strip() for p in args.precisions.split(",")}
    peak = {bf16: matmul_peak(torch.bfloat16 if bf16 else torch.float32)
            for bf16, name in ((False, "fp32"), (True, "bf16")) if name in wanted}
    print(f"torch {torch.__version__}, 2 threads; matmul peak "
          + ", ".join(f"{'bf16' if k else 'fp32'} {v / 1e9:.0f} GFLOP/s" for k, v in peak.items()))
    task = make_task("bijection")
    print(f"{'size':<6} {'model':<12} {'params':>10} {'prec':<5} {'steps/s':>8} {'tokens/s':>10} {'GFLOP/s':>8} "
          f"{'MFU':>6} {'x tf':>6}")
    for size in args.sizes.split(","):
        profile = "quick" if size == "quick" else "repo"
        ref_params = resolve_run("bijection", "transformer", profile).model_params
        torch.manual_seed(0)
        ref = make_model("transformer", task.spec, ref_params)
        target = ref.n_params()
        rows = []
        for name in args.models.split(","):
            try:
                params = resolve_run("bijection", name, profile).model_params
            except ConfigError:  # not in the paper's profile (mamba2): its quick shape, matched below
                params = resolve_run("bijection", name, "quick").model_params
            if name != "transformer":
                params, _ = match_capacity(name, task.spec, target, params)
            torch.manual_seed(0)
            rows.append((name, make_model(name, task.spec, params)))
        if size == "paper":
            rows.append(("plain", PlainTransformer(task.spec.vocab_size, task.spec.seq_len)))
        batch = args.quick_batch if size == "quick" else args.batch
        for prec in args.precisions.split(","):
            bf16 = prec == "bf16"
            times = interleaved_times({name: stepper(model, task, batch, bf16) for name, model in rows}, args.steps)
            for name, model in rows:
                n = sum(p.numel() for p in model.parameters())
                rate = 1.0 / statistics.median(times[name])
                fl = step_flops(model, n, batch, task.spec.seq_len) * rate
                if "transformer" in times:
                    vs = statistics.median(a / b for a, b in zip(times["transformer"], times[name]))
                else:
                    vs = float("nan")
                print(f"{size:<6} {name:<12} {n:>10,} {prec:<5} {rate:>8.2f} "
                      f"{rate * batch * task.spec.seq_len:>10,.0f} {fl / 1e9:>8.0f} {fl / peak[bf16]:>6.0%} {vs:>6.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
