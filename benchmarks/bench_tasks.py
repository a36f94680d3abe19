"""Sampler + exact-posterior throughput per task, its share of a training step, and the HMM
filter against a plain loop.

    python benchmarks/bench_tasks.py [--batch 1024] [--repeats 5] [--device cpu] [--model transformer]

Prints, per task:
- scored positions per second for sampling with the exact posterior (default configs, batch 1024);
- the share of one training step that is data: sampling a batch of the quick profile (its task
  parameters and batch size) against one whole optimiser step of the profile's --model on it
  (``train_step``: sampling, forward, loss, backward, clipping, AdamW), one thread each (the
  quick budget's); the target is at most 2%.
Then the vectorised HMM forward filter on 4096 sequences x K=50 against a straightforward
per-sequence NumPy loop (the ratio is the figure to watch; target >= 50x).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from windtunnel.tasks import make_generator, make_task, task_names
from windtunnel.tasks.hmm import forward_filter
from windtunnel.train.build import build
from windtunnel.train.config import resolve_run
from windtunnel.train.trainer import StepSetup, autocast_dtype, check_loss, make_optimizer, train_step


def numpy_filter_loop(T, E, obs):
    """The straightforward reference: one sequence and one step at a time, float64 NumPy."""
    n, K = obs.shape
    S = T.shape[1]
    out = np.empty((n, K, S))
    for b in range(n):
        alpha = np.full(S, 1.0 / S) * E[b][:, obs[b, 0]]
        alpha /= alpha.sum()
        out[b, 0] = alpha
        for t in range(1, K):
            alpha = (alpha @ T[b]) * E[b][:, obs[b, t]]
            alpha /= alpha.sum()
            out[b, t] = alpha
    return out


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return min(times)


def step_share(task_name: str, model: str, repeats: int, device: str) -> tuple[float, float, int]:
    """(ms to sample one quick-profile batch, ms of one whole training step, batch size)."""
    config = resolve_run(task_name, model, "quick", {"train.threads": 1, "train.device": device})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the quick budget's one thread, for this measurement only
    try:
        return _step_share(config, repeats, device)
    finally:
        torch.set_num_threads(threads)


def _step_share(config, repeats: int, device: str) -> tuple[float, float, int]:
    task, net = build(config)
    dev = torch.device(device)
    net.to(dev)
    tc = config.train
    setup = StepSetup(net, make_optimizer(net, tc), check_loss(tc.loss, task), tc, dev, autocast_dtype(tc.precision, dev))
    g = make_generator(0, device=device)
    step = lambda: train_step(setup, task, g, tc.warmup)
    step()  # warm-up (allocations, the optimiser's state)
    step_s = best_of(step, repeats)
    sample_s = best_of(lambda: task.sample(tc.batch_size, g), repeats)
    return 1e3 * sample_s, 1e3 * step_s, tc.batch_size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default="transformer", help="the architecture whose training step the sampling is set against")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {args.device}")
    print(f"{'task':<12} {'batch':>6} {'scored/seq':>10} {'ms/batch':>9} {'scored pos/s':>14}")
    for name in task_names():
        task = make_task(name)
        g = make_generator(0, device=args.device)
        task.sample(8, g)  # warm-up
        sec = best_of(lambda task=task, g=g: task.sample(args.batch, g), args.repeats)
        n_pos = args.batch * task.spec.n_scored
        print(f"{name:<12} {args.batch:>6} {task.spec.n_scored:>10} {1e3 * sec:>9.1f} {n_pos / sec:>14,.0f}")

    print(f"\nsampling as a share of one training step ({args.model}, quick profile, 1 thread, best of {args.repeats})")
    print(f"{'task':<12} {'batch':>6} {'sample ms':>10} {'step ms':>9} {'share':>7}")
    for name in task_names():
        sample_ms, step_ms, batch = step_share(name, args.model, args.repeats, args.device)
        print(f"{name:<12} {batch:>6} {sample_ms:>10.2f} {step_ms:>9.1f} {100 * sample_ms / step_ms:>6.2f}%")

    task = make_task("hmm", {"K": 50})
    b = task.sample(4096, make_generator(1, device=args.device))
    T, E, obs = b.latent["transition"], b.latent["emission"], b.latent["observations"]
    vec = best_of(lambda: forward_filter(T, E, obs), args.repeats)
    Tn, En, on = T.cpu().numpy(), E.cpu().numpy(), obs.cpu().numpy()
    loop = best_of(lambda: numpy_filter_loop(Tn, En, on), 1)
    err = np.abs(forward_filter(T, E, obs).cpu().numpy() - numpy_filter_loop(Tn, En, on)).max()
    print(f"\nHMM forward filter, 4096 sequences x K=50: vectorised {1e3 * vec:.1f} ms, "
          f"per-sequence NumPy loop {1e3 * loop:.0f} ms, ratio {loop / vec:.0f}x (max abs diff {err:.1e})")


if __name__ == "__main__":
    main()
