"""Learning-rate grids as one batched ensemble versus one run after another, on the CPU.

    .venv/bin/python benchmarks/bench_ensemble.py --threads 1 --members 1,2,5
        [--task hmm] [--models transformer,lstm,linear_attention,mamba] [--steps 5] [--warmup 2] [--rounds 3]

A learning-rate tuner trains the same architecture (the quick profile's, batch 32) at several
learning rates. This measures whether N such runs are cheaper in ONE process as a batched
ensemble -- the N freshly seeded models' parameters stacked (``torch.func.stack_module_state``),
one ``torch.vmap``-ed ``functional_call`` forward over N batches, one backward of the summed
member losses, per-member gradient clipping and a hand-written AdamW with a per-member learning
rate -- than with N ordinary training loops (``torch.optim.AdamW``) one after another.

For every architecture it first checks the ensemble: member losses at step 0 equal the single
model's on the same weights and batch, and after 3 steps every member's weights equal those of
the model trained alone with clip_grad_norm_ and torch.optim.AdamW (both to 1e-5). An
architecture that cannot be vmapped is reported with its error and left out of the timings.
Then, per N in ``--members``: ``--warmup`` steps, then ``--rounds`` rounds of ``--steps`` steps,
sequential and ensemble alternating within each round; rates are model-steps/s (N x steps /
median round time). Times are printed, never asserted on.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import time
import warnings
from types import SimpleNamespace

import torch
from torch.func import functional_call, stack_module_state

from windtunnel.models import make_model
from windtunnel.models.ops import scan_ext
from windtunnel.tasks import make_generator, make_task
from windtunnel.train.config import resolve_run
from windtunnel.train.trainer import loss_fn, lr_at

LR_GRID = (1e-3, 2e-3, 3e-3, 5e-3, 1e-2)  # member i trains at LR_GRID[i % 5]
FIELDS = ("inputs", "target", "probs")  # what the model and loss_fn read of a Batch


def fresh_models(cfg, task, n: int) -> list[torch.nn.Module]:
    models = []
    for i in range(n):
        torch.manual_seed(i)
        models.append(make_model(cfg.model, task.spec, cfg.model_params))
    return models


def sample(task, gens, batch: int):
    """One batch per member; returns the list and its tensors stacked on a leading member axis."""
    bs = [task.sample(batch, g) for g in gens]
    data = {k: torch.stack([getattr(b, k) for b in bs]) for k in FIELDS if getattr(bs[0], k) is not None}
    return bs, data


class Single:
    """One ordinary run: forward, loss, backward, clip_grad_norm_, torch.optim.AdamW (trainer.py's)."""

    def __init__(self, model, lr: float, tc, kind: str):
        self.model, self.lr, self.tc, self.kind = model, lr, tc, kind
        decay = [p for p in model.parameters() if p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=tc.betas)

    def step(self, b, mult: float) -> float:
        loss = loss_fn(self.kind, self.model(b.inputs, positions=b.positions), b)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.update(mult)
        return loss.item()

    def update(self, mult: float) -> None:
        for g in self.opt.param_groups:
            g["lr"] = self.lr * mult
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip)
        self.opt.step()


class Ensemble:
    """N models of one architecture trained in lockstep on stacked parameters (dim 0 = member)."""

    def __init__(self, models, lrs, tc, kind: str):
        self.base, self.tc = copy.deepcopy(models[0]), tc
        self.params, _ = stack_module_state(models)
        # buffers (the transformer's all-ones head_mask) are not trained and equal in every member:
        # shared, not stacked, since the model branches on them (a vmapped buffer cannot be bool()-ed)
        self.buffers = dict(models[0].named_buffers())
        for m in models[1:]:
            assert all(torch.equal(b, self.buffers[k]) for k, b in m.named_buffers()), "members' buffers differ"
        self.names = list(self.params)
        self.wd = [tc.weight_decay if self.params[k].ndim >= 3 else 0.0 for k in self.names]  # member ndim >= 2
        self.lrs = torch.tensor(lrs, dtype=torch.float32)
        self.m = [torch.zeros_like(self.params[k]) for k in self.names]
        self.v = [torch.zeros_like(self.params[k]) for k in self.names]
        self.t = 0

        def member_loss(params, buffers, data, positions):
            out = functional_call(self.base, (params, buffers), (data["inputs"],), {"positions": positions})
            return loss_fn(kind, out, SimpleNamespace(**data))

        self.losses = torch.vmap(member_loss, in_dims=(0, None, 0, None))

    def step(self, data, positions, mult: float) -> torch.Tensor:
        losses = self.backward(data, positions)
        self.update(mult)
        return losses

    def backward(self, data, positions) -> torch.Tensor:
        """The N member losses of one fused forward; gradients land in the stacked ``.grad``."""
        for p in self.params.values():
            p.grad = None
        losses = self.losses(self.params, self.buffers, data, positions)
        losses.sum().backward()  # members share no parameters: each gradient stays its member's own
        return losses.detach()

    def update(self, mult: float) -> None:
        """Per-member gradient clipping, then AdamW with learning rates ``lrs * mult``."""
        ps = [self.params[k] for k in self.names]
        grads = [p.grad for p in ps]
        tc, n = self.tc, len(self.lrs)
        view = [(n,) + (1,) * (p.ndim - 1) for p in ps]
        with torch.no_grad():
            # clip_grad_norm_ per member: the 2-norm over all of a member's gradients
            norms = torch.stack([g.reshape(n, -1).norm(dim=1) for g in grads]).norm(dim=0)
            coef = (tc.grad_clip / (norms + 1e-6)).clamp(max=1.0)
            for g, s in zip(grads, view):
                g.mul_(coef.view(s))
            # AdamW as torch.optim.AdamW, with lr a vector over members
            self.t += 1
            (b1, b2), eps = tc.betas, 1e-8
            bc1, bc2 = 1 - b1 ** self.t, 1 - b2 ** self.t
            lr = self.lrs * mult
            torch._foreach_lerp_(self.m, grads, 1 - b1)
            torch._foreach_mul_(self.v, b2)
            torch._foreach_addcmul_(self.v, grads, grads, 1 - b2)
            denom = torch._foreach_sqrt(self.v)
            torch._foreach_div_(denom, math.sqrt(bc2))
            torch._foreach_add_(denom, eps)
            for p, m, d, wd, s in zip(ps, self.m, denom, self.wd, view):
                if wd:
                    p.mul_((1 - lr * wd).view(s))
                p.sub_((lr / bc1).view(s) * m / d)


def check(cfg, task, n: int, batch: int, kind: str) -> str:
    """An N-member ensemble against its members trained alone, for 3 steps at the full learning rate
    (the schedule's warmup would hide errors): step-0 losses equal on the same weights and batch,
    and the update (per-member clip + AdamW) equals clip_grad_norm_ + torch.optim.AdamW given the
    same gradients (both to 1e-5). Also says how far fully separate runs drift (batched vs
    unbatched kernels round differently, and Adam magnifies that where a gradient is ~0)."""
    models, lrs = fresh_models(cfg, task, n), [LR_GRID[i % 5] for i in range(n)]
    alone = [Single(copy.deepcopy(m), lr, cfg.train, kind) for m, lr in zip(models, lrs)]  # fed our gradients
    apart = [Single(copy.deepcopy(m), lr, cfg.train, kind) for m, lr in zip(models, lrs)]  # own forward/backward
    ens = Ensemble(models, lrs, cfg.train, kind)
    gens = [make_generator(i) for i in range(n)]
    for s in range(3):
        bs, data = sample(task, gens, batch)
        losses = ens.backward(data, bs[0].positions)
        for i, r in enumerate(alone):
            for k, p in r.model.named_parameters():
                p.grad = ens.params[k].grad[i].clone()
            r.update(1.0)
        ens.update(1.0)
        sep = [r.step(b, 1.0) for r, b in zip(apart, bs)]
        if s == 0:
            loss_err = max(abs(a - b) for a, b in zip(losses.tolist(), sep))

    def weight_err(runs):
        return max((ens.params[k][i] - p).abs().max().item() for i, r in enumerate(runs) for k, p in r.model.named_parameters())

    opt_err, sep_err = weight_err(alone), weight_err(apart)
    ok = loss_err < 1e-5 and opt_err < 1e-5
    return (f"{'check passed' if ok else 'CHECK FAILED'} (step-0 loss diff {loss_err:.1e}, AdamW weight diff after "
            f"3 steps {opt_err:.1e}; separate runs after 3 steps differ by {sep_err:.1e})")


def probe(cfg, task, batch: int, kind: str) -> tuple[bool, str]:
    """Whether the ensemble runs (and is right) for this architecture; the finding in words."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            msg = check(cfg, task, 2, batch, kind)
        except Exception as e:  # a finding, not a failure of the benchmark
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            return False, f"vmap FAILS: {type(e).__name__}: {first[:300]}"
    slow = sorted({str(w.message).split("(")[0][:160] for w in caught if "batching rule" in str(w.message)})
    return "passed" in msg, msg + ("; vmap fallback (no batching rule): " + " | ".join(slow) if slow else "")


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench(cfg, task, n: int, args, kind: str) -> tuple[float, float]:
    """(sequential, ensemble) model-steps/s for N members."""
    tc, lrs = cfg.train, [LR_GRID[i % 5] for i in range(n)]
    models = fresh_models(cfg, task, n)
    singles = [Single(copy.deepcopy(m), lr, tc, kind) for m, lr in zip(models, lrs)]
    ens = Ensemble(models, lrs, tc, kind)
    sgens, egens = [make_generator(i) for i in range(n)], [make_generator(i) for i in range(n)]
    done = {"seq": 0, "ens": 0}

    def sequential(steps: int) -> None:
        for r, g in zip(singles, sgens):  # one run after another
            for s in range(done["seq"], done["seq"] + steps):
                r.step(task.sample(args.batch, g), lr_at(s, tc))
        done["seq"] += steps

    def ensemble(steps: int) -> None:
        for s in range(done["ens"], done["ens"] + steps):
            bs, data = sample(task, egens, args.batch)
            ens.step(data, bs[0].positions, lr_at(s, tc))
        done["ens"] += steps

    sequential(args.warmup), ensemble(args.warmup)
    ts, te = [], []
    for r in range(args.rounds):  # alternate the order so that a shared machine slows both alike
        pair = [(ts, sequential), (te, ensemble)]
        for out, fn in pair if r % 2 == 0 else pair[::-1]:
            out.append(timed(lambda fn=fn: fn(args.steps)))
    return n * args.steps / statistics.median(ts), n * args.steps / statistics.median(te)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--members", default="1,2,5")
    ap.add_argument("--task", default="hmm")
    ap.add_argument("--models", default="transformer,lstm,linear_attention,mamba")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    print(f"torch {torch.__version__}, {args.threads} thread(s), task {args.task} (quick profile), batch {args.batch}, "
          f"lr grid {LR_GRID[:max(int(n) for n in args.members.split(','))]}")

    runnable = []
    print("\n## Does the ensemble vmap?\n")
    for name in args.models.split(","):
        cfg = resolve_run(args.task, name, "quick")
        task = make_task(args.task, cfg.task_params)
        kind = task.spec.loss
        variants = [name]
        if name.startswith("mamba") and scan_ext.use_cpp():  # also the pure-PyTorch scan
            variants.append(f"{name} (WINDTUNNEL_SCAN=torch)")
        for label in variants:
            if "SCAN=torch" in label:
                os.environ["WINDTUNNEL_SCAN"] = "torch"
                scan_ext.use_cpp.cache_clear()
            ok, msg = probe(cfg, task, args.batch, kind)
            print(f"- {label}: {msg}", flush=True)
            if ok and label == name:
                runnable.append((name, cfg, task, kind))

    warnings.filterwarnings("ignore", message="There is a performance drop")  # reported above
    print("\n## Throughput (model-steps/s; a model-step is one member's training step)\n")
    print("| model | N | threads | sequential | ensemble | ensemble/sequential |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, cfg, task, kind in runnable:
        for n in (int(x) for x in args.members.split(",")):
            seq, ens = bench(cfg, task, n, args, kind)
            print(f"| {name} | {n} | {args.threads} | {seq:.1f} | {ens:.1f} | {ens / seq:.2f} |", flush=True)
    print("\n(No '2 processes at once' figure: with 2 cores and one held by other work, two 1-thread processes "
          "would time-share one core and slow that work, measuring contention rather than parallelism.)")


if __name__ == "__main__":
    main()
