"""Trace a wind-tunnel transformer with nnsight, read an attention output and patch it (docs/interop.md).

    make setup EXTRAS=nnsight                           # or: pip install 'windtunnel[nnsight]'
    python examples/nnsight_patching.py                 # trains a tiny bijection transformer (~5 s)
    python examples/nnsight_patching.py runs/bijection-transformer-<hash>   # or a trained run

nnsight wraps any ``torch.nn.Module``; a windtunnel model is one, so ``NNsight(model)`` needs no
adapter and no hub download. The module tree is ours: ``blocks[i].attn`` is layer i's attention,
its ``output`` what it adds to the residual stream (after W_O), ``blocks[i].attn.proj.input`` the
head outputs z concatenated (B, T, H * d_head) before W_O, and ``blocks[i].attn.z`` the capture
point of z (B, H, T, d_head). The script

1. traces a batch of the bijection task and saves every layer's attention output, checking it
   against our own capture (``model.run_with_cache``, ``blocks.{i}.attn.z`` through W_O);
2. writes each value back unchanged (a no-op patch: the logits do not move);
3. zeroes one head at a time (its slice of the out-projection's input), checking the logits against
   our own head ablation (``model.head_mask``), and patches each layer's attention output with
   that of another batch (activation patching);
4. prints the entropy error and KL(Bayes || model) against the exact posterior the batch
   carries, clean and patched. (In the bijection task the posterior's entropy depends on the
   position only, so the other batch's attention output keeps the entropy error where it was
   while the KL shows the predictions are now those of other sequences.)

Two habits of nnsight >= 0.5 shape the code: a ``with nn_model.trace(...)`` block reads modules in
the order the forward pass runs them (else ``OutOfOrderError``), and a value saved inside a list
comprehension in the block is lost when the block runs inside a function, so the saves go into
lists made before the block (a plain ``name = ....save()`` is kept).
"""

from __future__ import annotations

import sys

import torch
from nnsight import NNsight

import windtunnel
from windtunnel.evaluate.metrics import entropy_error, model_prediction, per_position
from windtunnel.tasks import make_generator
from windtunnel.train.build import build
from windtunnel.train.config import resolve_run
from windtunnel.train.trainer import StepSetup, check_loss, make_optimizer, train_step

#: the tiny run the script trains when no run folder is given: bijection with 5 answers, 2 layers of 4 heads
TINY = {"task_params.V": 5, "task_params.L": 4, "eval.lengths": [4],
        "model_params.n_layers": 2, "model_params.n_heads": 4, "model_params.d_model": 64,
        "train.steps": 300, "train.batch_size": 64, "train.threads": 1}


def tiny_model(steps: int | None = None):
    """(task, model): a small bijection transformer trained in-process for ``steps`` (default 300)."""
    config = resolve_run("bijection", "transformer", "quick", {**TINY, **({"train.steps": steps} if steps else {})})
    task, model = build(config)
    tc, device = config.train, torch.device("cpu")
    if tc.threads:
        torch.set_num_threads(tc.threads)  # as the trainer does: one thread is fastest for a model this small
    setup = StepSetup(model, make_optimizer(model, tc), check_loss(tc.loss, task), tc, device)
    data = make_generator(tc.seed, "train")
    for step in range(tc.steps):
        train_step(setup, task, data, step)
    return task, model


def calibration(logits: torch.Tensor, bayes) -> tuple[float, float]:
    """(entropy error, KL(Bayes || model)) in bits against the exact posterior: the mean over the
    scored positions of |H_model - H_Bayes| (the project's entropy error) and of the KL."""
    m = per_position(model_prediction(logits, "categorical"), bayes)
    return float(entropy_error(m["dh"])), float(m["kl_bayes_model"].mean())


def patch_and_measure(task, model, n: int = 512) -> dict:
    """Every check and number of the script (the test asserts on them)."""
    model.eval().requires_grad_(False)
    if not getattr(model, "has_head_ablation", False) or not hasattr(model, "blocks"):
        raise SystemExit(f"model '{model.name}' is not a transformer with attention blocks")
    batch = task.sample(n, make_generator(0, "eval"))
    other = task.sample(n, make_generator(1, "eval"))  # the same task, other sequences: the patch source
    x, pos = batch.inputs, batch.positions
    bayes = task.baselines(batch)["bayes"]  # the exact posterior the batch carries
    n_layers, n_heads = len(model.blocks), model.blocks[0].attn.n_heads
    d_head = model.blocks[0].attn.proj.in_features // n_heads
    nn_model = NNsight(model)

    # 1. read: every layer's z and attention output, and the logits, in one trace
    z, attn_out = [], []  # made outside the trace: the trace appends to them
    with nn_model.trace(x, pos):
        for i in range(n_layers):  # in forward order: z (before W_O), then the attention output (after)
            z.append(nn_model.blocks[i].attn.z.output.save())
            attn_out.append(nn_model.blocks[i].attn.output.save())
        logits = nn_model.output.save()
    ref, cache = model.run_with_cache(x, [f"blocks.{i}.attn.z" for i in range(n_layers)], positions=pos)
    B, T = x.shape[:2]
    out = {"n_layers": n_layers, "n_heads": n_heads,
           "logits_vs_forward": (logits - ref).abs().max().item(),
           "z_vs_capture": max((z[i] - cache[f"blocks.{i}.attn.z"]).abs().max().item() for i in range(n_layers)),
           "attn_out_vs_capture": max(
               (attn_out[i] - model.attention_output(i, cache[f"blocks.{i}.attn.z"].transpose(1, 2).reshape(B, T, -1)))
               .abs().max().item() for i in range(n_layers))}

    # the attention outputs of the other batch, the patch source
    other_out = []
    with nn_model.trace(other.inputs, other.positions):
        for i in range(n_layers):
            other_out.append(nn_model.blocks[i].attn.output.save())

    # 2. a no-op patch: write every layer's attention output back unchanged
    with nn_model.trace(x, pos):
        for i in range(n_layers):
            nn_model.blocks[i].attn.output = nn_model.blocks[i].attn.output.clone()
        noop = nn_model.output.save()
    out["noop_change"] = (noop - logits).abs().max().item()

    # 3. zero head h of layer i (before W_O) with nnsight, and with our own head_mask
    out["clean"] = calibration(logits, bayes)
    out["head_zeroed"], out["head_vs_head_mask"], out["head_change"] = {}, 0.0, {}
    for i in range(n_layers):
        for h in range(n_heads):
            with nn_model.trace(x, pos):
                nn_model.blocks[i].attn.proj.input[..., h * d_head:(h + 1) * d_head] = 0
                zeroed = nn_model.output.save()
            model.head_mask[i, h] = 0.0
            ours = model(x, pos)
            model.clear_ablations()
            out["head_vs_head_mask"] = max(out["head_vs_head_mask"], (zeroed - ours).abs().max().item())
            out["head_change"][i, h] = (zeroed - logits).abs().max().item()
            out["head_zeroed"][i, h] = calibration(zeroed, bayes)

    # ... and replace layer i's attention output with the other batch's
    out["other_batch"] = {}
    for i in range(n_layers):
        with nn_model.trace(x, pos):
            nn_model.blocks[i].attn.output = other_out[i]
            patched = nn_model.output.save()
        out["other_batch"][i] = calibration(patched, bayes)
    return out


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        run = windtunnel.load_run(argv[0])
        task, model = run.task, run.model
        print(f"run {argv[0]}: {model.name}, task {task.name}")
    else:
        task, model = tiny_model()
        print("tiny bijection transformer (V=5, L=4; 2 layers x 4 heads, d_model 64), trained 300 steps")
    r = patch_and_measure(task, model)
    print(f"nnsight vs windtunnel (max |diff|): logits {r['logits_vs_forward']:.1e}, "
          f"z {r['z_vs_capture']:.1e}, attention output {r['attn_out_vs_capture']:.1e}")
    print(f"no-op patch moves the logits by {r['noop_change']:.1e}; zeroed head vs head_mask: {r['head_vs_head_mask']:.1e}")
    rows = [("clean", r["clean"])]
    for i in range(r["n_layers"]):
        rows += [(f"layer {i} head {h} zeroed", r["head_zeroed"][i, h]) for h in range(r["n_heads"])]
        rows.append((f"layer {i} attn output from another batch", r["other_batch"][i]))
    print(f"{'(bits, against the exact posterior)':38s} {'entropy error':>13s} {'KL(Bayes||model)':>17s}")
    for name, (ee, kl) in rows:
        print(f"{name:38s} {ee:13.4f} {kl:17.4f}")
    return r


if __name__ == "__main__":
    main()
