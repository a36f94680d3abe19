"""Paper I's key frame: the model, the measure, or the budget? (issue 44)

One factor at a time on the bijection tunnel, with our trainer and data: the layer-0 key-frame
statistic (mean |off-diagonal cosine| of the keys of the V key tokens, per head as the authors'
code, raw and centred; every layer), the entropy error, the curves over training and the head
ablations, for our ``transformer`` and the authors' architecture (``tinygpt``).

    python scripts/keyframe_study.py plan                # the jobs, and which are done
    python scripts/keyframe_study.py run [--only GLOB]   # train + diagnose what is missing (resumable)
    python scripts/keyframe_study.py run --only JOB --again  # run a job with results again (new analyses)
    python scripts/keyframe_study.py collect             # rebuild the JSON data from the run folders
    python scripts/keyframe_study.py render              # results/keyframe/*.json -> docs/results/keyframe.md
                                                         # and docs/geometry.md's conclusions

Every job is one run folder ``runs/keyframe/<job>`` (git-ignored; training resumes from it) and
one small JSON ``results/keyframe/<job>.json`` (committed): the run's config, its evaluation,
the key-frame, ablation and dynamics numbers the page uses, and the provenance (command, commit,
date, machine, and the load and other busy processes seen while it trained). ``render`` reads
only those JSON files, so the page and its figures follow from committed data
(``tests/test_keyframe_results.py`` renders them again and compares).

The protocol, the same for every cell: the quick bijection profile (V = 20, L = 19, batch 64,
AdamW, 100 warmup steps, cosine, weight decay 0.01, clip 1.0), the profile's transformer shape
for both models (3 layers, 4 heads, d 128), lr 3e-3 for every cell (the quick profile's shared
rate and the authors' recipe; the transformer's own tuned rate, 3.16e-3, is 5% away), one
torch thread, budgets of 1x, 3x and 10x the profile's 1200 steps, seeds 0, 1, 2.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from _provenance import program  # noqa: E402

RUNS = ROOT / "runs" / "keyframe"
RESULTS = ROOT / "results" / "keyframe"
PAGE = ROOT / "docs" / "results" / "keyframe.md"
FIGURES = ROOT / "docs" / "results" / "figures"

BASE_STEPS = 1200  # the quick profile's train.steps
LR = 3e-3
SHAPE = {"n_layers": 3, "n_heads": 4, "d_model": 128}  # the quick profile's transformer
PROBE = {"n_sequences": 256, "seed": 0}  # the diagnostics' probe batch
ANALYSES = ["key_frame", "ablation", "dynamics"]
#: key-frame variants kept: the key tokens' raw and centred keys, per head and for the whole layer
#: (every head's keys together: the paper's reading), and (sep-vocab) the value tokens' per head
VARIANTS = ("tokens_raw", "tokens_centred", "layer_raw", "layer_centred", "value_tokens_raw", "value_tokens_centred")


#: (tag, overrides, what) of the trials on keys drawn with replacement (the ``regime`` factor)
REGIME_TRIALS = [
    ("lr1e-3", {"train.lr": 1e-3}, "lr 1e-3"),
    ("lr3e-4", {"train.lr": 3e-4}, "lr 3e-4 (the authors' production rate)"),
    ("warmup", {"train.warmup": 600}, "lr 3e-3 after a warm-up of half the 1x budget (600 steps)"),
    # the initialisation that leaves the recall tunnel's lookup plateau (configs/quick/recall.json)
    ("init-torch", {"model_params.init": "torch"}, "PyTorch's default initialisation"),
    ("embed", {"model_params.embed_std": 1.0}, "the token embedding alone at N(0, 1)"),
]


@dataclass(frozen=True)
class Cell:
    """One row of the study: a model and what differs from its defaults."""

    model: str
    changes: dict = field(default_factory=dict)  # dotted overrides, as --set takes them
    factor: str = "model"
    what: str = ""


CELLS = {
    "transformer": Cell("transformer", {}, "model", "our transformer (LayerNorm, biases, head tied over the answers)"),
    "tinygpt": Cell("tinygpt", {}, "model", "the authors' TinyGPT (RMSNorm, no biases, head tied over the vocabulary)"),
    "transformer-paired": Cell("transformer", {"task_params.format": "paired"}, "format", "transformer, paired format"),
    "tinygpt-paired": Cell("tinygpt", {"task_params.format": "paired"}, "format", "tinygpt, paired format"),
    "transformer-tie-vocab": Cell("transformer", {"model_params.tie_scope": "vocab"}, "head",
                                  "transformer, head tied over the whole vocabulary"),
    "transformer-untied": Cell("transformer", {"model_params.tie_head": False}, "head", "transformer, untied head"),
    "tinygpt-tie-answers": Cell("tinygpt", {"model_params.tie_scope": "answers"}, "head",
                                "tinygpt, head tied over the answers"),
    "transformer-rmsnorm": Cell("transformer", {"model_params.norm": "rmsnorm"}, "norm", "transformer, RMSNorm"),
    "tinygpt-layernorm": Cell("tinygpt", {"model_params.norm": "layernorm", "model_params.norm_eps": 1e-5}, "norm",
                              "tinygpt, LayerNorm"),
    "transformer-nobias": Cell("transformer", {"model_params.bias": False}, "bias", "transformer, no biases"),
    "transformer-init-torch": Cell("transformer", {"model_params.init": "torch"}, "init",
                                   "transformer, PyTorch's default initialisation"),
    "tinygpt-init-torch": Cell("tinygpt", {"model_params.init": "torch"}, "init",
                               "tinygpt, PyTorch's default initialisation"),
    # the embedding's scale alone (issue 57): N(0, 1) token embeddings, W_K, positions and biases
    # as in the paper (N(0, 0.02), zero); init=torch changes all of them
    "transformer-init-embed": Cell("transformer", {"model_params.embed_std": 1.0}, "init",
                                   "transformer, token embeddings N(0, 1), everything else N(0, 0.02)"),
    "tinygpt-init-embed": Cell("tinygpt", {"model_params.embed_std": 1.0}, "init",
                               "tinygpt, token embeddings N(0, 1), everything else N(0, 0.02)"),
    # not in the issue's list: keys drawn with replacement (the authors' data code's default), so
    # that a repeated key must be matched to its earlier occurrence and key identity matters
    "transformer-replacement": Cell("transformer", {"task_params.with_replacement": True}, "task",
                                    "transformer, keys drawn with replacement"),
    "tinygpt-replacement": Cell("tinygpt", {"task_params.with_replacement": True}, "task",
                                "tinygpt, keys drawn with replacement"),
    # the authors' production regime (keys with replacement), trained with what the field would
    # try to leave a plateau: another rate, a long warm-up, a longer budget, the initialisation (issue 57)
    **{f"{m}-replacement-{tag}": Cell(m, {"task_params.with_replacement": True, **ch}, "regime",
                                      f"{m}, keys drawn with replacement, {what}")
       for m in ("transformer", "tinygpt") for tag, ch, what in REGIME_TRIALS},
}

#: (cell, budget multiple, seed), in the order they run: the decisive comparisons first (the
#: two models in both formats, the transformer's single factors, the seeds and budgets of the
#: two models in the main job's format), then keys with replacement, the reverse single factors
#: of tinygpt and the seeds of the paired format
PLAN = [
    *[(c, 1, 0) for c in ("transformer", "tinygpt", "transformer-paired", "tinygpt-paired")],
    *[(c, 1, 0) for c in ("transformer-tie-vocab", "transformer-untied", "transformer-rmsnorm", "transformer-nobias",
                          "transformer-init-torch")],
    *[(c, 1, s) for s in (1, 2) for c in ("transformer", "tinygpt")],
    ("tinygpt-init-torch", 1, 0), *[("transformer-init-torch", 1, s) for s in (1, 2)],  # the init moved it: seeds
    *[(c, b, 0) for b in (3, 10) for c in ("transformer", "tinygpt")],
    *[(c, 1, 0) for c in ("transformer-replacement", "tinygpt-replacement")],
    *[(c, 1, 0) for c in ("tinygpt-tie-answers", "tinygpt-layernorm")],
    *[("tinygpt-init-torch", 1, s) for s in (1, 2)],
    *[(c, 1, s) for s in (1, 2) for c in ("transformer-paired", "tinygpt-paired")],
    # issue 57: the production regime, small budgets first, then longer
    *[(f"transformer-replacement-{tag}", 1, 0) for tag, _, _ in REGIME_TRIALS],
    ("transformer-replacement", 3, 0),
    # issue 57: the embedding's scale alone, both models, three seeds
    *[(c, 1, s) for s in (0, 1, 2) for c in ("transformer-init-embed", "tinygpt-init-embed")],
]


def job_name(cell: str, budget: int, seed: int) -> str:
    return f"{cell}-{budget}x-s{seed}"


def job_overrides(cell: str, budget: int, seed: int) -> dict:
    c = CELLS[cell]
    params = dict(SHAPE, tie_head=True) if c.model == "transformer" else dict(SHAPE)
    out = {"model_params": params, "train.steps": BASE_STEPS * budget, "train.lr": LR, "train.seed": seed,
           "train.threads": 1, "train.checkpoints": 20}
    return out | c.changes


# ---------------------------------------------------------------------------------------
# Provenance
# ---------------------------------------------------------------------------------------
def git_commit() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "src", "scripts"))}


def machine() -> dict:
    import torch

    return {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}


class LoadMonitor:
    """Samples the load average and the other processes busy on the CPU (above 20% of one core),
    each by its program's name (:func:`_provenance.program`), every ``every`` seconds while a job
    runs: what else was running during the measurement."""

    def __init__(self, every: float = 60.0):
        self.every, self.samples, self.others = every, [], {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        self.samples.append(os.getloadavg()[0])
        try:
            import psutil
        except ImportError:  # the load average alone
            return
        me = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
        procs = [p for p in psutil.process_iter(["pid", "name", "cmdline"]) if p.info["pid"] not in me]
        for p in procs:
            try:
                p.cpu_percent(None)
            except psutil.Error:
                pass
        time.sleep(1.0)
        for p in procs:
            try:
                cpu = p.cpu_percent(None)
            except psutil.Error:
                continue
            if cpu > 20:
                cmd = program(p.info["cmdline"] or [p.info["name"] or "?"])  # by its name, never its paths
                self.others[cmd] = max(self.others.get(cmd, 0.0), round(cpu))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        s = self.samples or [float("nan")]
        return {"load1_min": min(s), "load1_mean": sum(s) / len(s), "load1_max": max(s), "n_samples": len(self.samples),
                "other_busy_processes": dict(sorted(self.others.items(), key=lambda kv: -kv[1])[:8])}


# ---------------------------------------------------------------------------------------
# Extracting what the page uses
# ---------------------------------------------------------------------------------------
def layer_means(variant: dict) -> dict:
    layers = variant["layers"]
    return {"mean": [x["mean"] for x in layers], "random": [x["random_mean"] for x in layers],
            "init": [x["init_mean"] for x in layers], "per_head_layer0": layers[0]["per_head"],
            "p_below_random_layer0": layers[0]["test_vs_random"]["p"],
            "p_two_sided_layer0": layers[0]["test_vs_random"]["p_two_sided"],
            **({"random_closed_form": variant["random_closed_form"]} if "random_closed_form" in variant else {})}


def resolved_model(cfg: dict) -> dict:
    """The run's model config with every default filled in (the head, norm, biases and init a
    cell really had, whatever its model_params left out)."""
    from windtunnel.models import model_class
    from windtunnel.tasks import make_task

    spec = make_task(cfg["task"], cfg["task_params"]).spec
    return model_class(cfg["model"]).Config.build(cfg["model_params"]).resolve(spec).model_dump(mode="json")


def summarise(run_dir: Path, diag: dict, **meta) -> dict:
    """What the page uses of one run (its folder and its diagnostics), with ``meta`` (job, cell,
    budget, seed, factor, what; a ``probe`` other than the study's)."""
    cfg = json.loads((run_dir / "config.json").read_text())
    ev = json.loads((run_dir / "eval.json").read_text())
    main = ev["lengths"][str(ev["main_length"])]
    res = diag["results"]
    kf = res["key_frame"]["variants"]
    abl, dyn = res["ablation"], res["dynamics"]
    heads = sorted(abl["heads"], key=lambda h: -h["delta_entropy_error"])
    return {
        "model": cfg["model"], "format": cfg["task_params"].get("format", "sepvocab"), "task_params": cfg["task_params"],
        "model_config": resolved_model(cfg), "train": cfg["train"],
        "steps": cfg["train"]["steps"], "lr": cfg["train"]["lr"], "n_params": ev["n_params"],
        "train_seconds": ev["train_seconds"],
        "entropy_error": main["entropy_error_mean_abs"], "kl_bayes_model": main["kl_bayes_model"],
        "key_frame": {v: layer_means(kf[v]) for v in VARIANTS if v in kf},  # value_: the sep-vocab's value tokens
        "ablation": {"baseline_entropy_error": abl["baseline"]["entropy_error"], "frame_head": abl["frame_head"],
                     "heads": [{k: h[k] for k in ("name", "delta_entropy_error", "delta_lo", "delta_hi", "ratio")}
                               for h in heads],
                     "blocks": [{k: b[k] for k in ("name", "ratio")} for b in abl["blocks"]]},
        "dynamics": {"steps": dyn["steps"],
                     "tokens_raw_layer0": [r["key_frame_layer0"] for r in dyn["checkpoints"]],
                     "tokens_raw_per_layer": [r["key_frame_per_layer"] for r in dyn["checkpoints"]],
                     **{f"{v}_layer0": [r["key_frame_variants_layer0"][v] for r in dyn["checkpoints"]]
                        for v in VARIANTS[1:] if v in dyn["checkpoints"][0]["key_frame_variants_layer0"]},
                     "entropy_error": [r["entropy_error"] for r in dyn["checkpoints"]]},
        "probe": PROBE, **meta,
    }


# ---------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------
def selected(only: list[str] | None) -> list[tuple[str, int, int]]:
    return [j for j in PLAN if not only or any(fnmatch.fnmatch(job_name(*j), g) for g in only)]


def cmd_plan(args) -> None:
    for cell, budget, seed in selected(args.only):
        name = job_name(cell, budget, seed)
        state = "done" if (RESULTS / f"{name}.json").is_file() else "todo"
        print(f"{state:5} {name:36} {CELLS[cell].model:12} {BASE_STEPS * budget:6} steps  {job_overrides(cell, budget, seed)}")


def cmd_run(args) -> None:
    from windtunnel.geometry.diagnose import run_diagnostics
    from windtunnel.train.config import resolve_run
    from windtunnel.train.trainer import train

    RESULTS.mkdir(parents=True, exist_ok=True)
    for cell, budget, seed in selected(args.only):
        name = job_name(cell, budget, seed)
        out = RESULTS / f"{name}.json"
        if out.is_file() and not args.again:
            continue
        previous = json.loads(out.read_text()) if out.is_file() else None
        run_dir = RUNS / name
        cfg = resolve_run("bijection", CELLS[cell].model, "quick", job_overrides(cell, budget, seed))
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        t0 = time.perf_counter()
        print(f"{name}: training {cfg.train.steps} steps in {run_dir}", flush=True)
        with LoadMonitor() as load:
            train(cfg, run_dir, progress=False)
            diag = run_diagnostics(run_dir, ANALYSES, progress=False, **PROBE)
        doc = summarise(run_dir, diag, job=name, cell=cell, budget=budget, seed=seed, factor=CELLS[cell].factor,
                        what=CELLS[cell].what)
        if previous is not None:  # a job run again: the same training, or the record says how it differs
            doc["rerun_of"] = {"commit": previous["provenance"]["commit"], "started": previous["provenance"]["started"],
                               "entropy_error": previous["entropy_error"]["value"]}
        doc["provenance"] = {
            "command": f"python scripts/keyframe_study.py run --only {name}" + (" --again" if args.again else ""),
            **git_commit(), "started": started, "wall_seconds": round(time.perf_counter() - t0, 1),
            "machine": machine(), "load_while_running": load.summary(),
            "note": "training resumes from its folder: wall_seconds covers this invocation only",
        }
        out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"{name}: L0 raw {doc['key_frame']['tokens_raw']['mean'][0]:.3f}, "
              f"entropy error {doc['entropy_error']['value']:.4f} -> {out}", flush=True)


def cmd_collect(args) -> None:
    """Rebuild the data of every results JSON from its run folder's config, evaluation and
    diagnostics (after a change to what ``summarise`` keeps), keeping its provenance."""
    for cell, budget, seed in selected(args.only):
        name = job_name(cell, budget, seed)
        out, run_dir = RESULTS / f"{name}.json", RUNS / name
        if not out.is_file() or not (run_dir / "diagnostics.json").is_file():
            continue
        old = json.loads(out.read_text())
        diag = json.loads((run_dir / "diagnostics.json").read_text())
        doc = summarise(run_dir, diag, job=name, cell=cell, budget=budget, seed=seed, factor=CELLS[cell].factor,
                        what=CELLS[cell].what)
        doc["provenance"] = old["provenance"]
        out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"{name}: rebuilt from {run_dir}")


def cmd_render(args) -> None:
    from keyframe_render import render

    render(RESULTS, PAGE, FIGURES, ROOT / "docs" / "geometry.md")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    for step in ("plan", "run", "collect"):
        p = sub.add_parser(step)
        p.add_argument("--only", nargs="*", help="job names or glob patterns (default: the whole plan)")
        if step == "run":
            p.add_argument("--again", action="store_true",
                           help="run the jobs whose results exist again (the analyses added since: e.g. the whole "
                                "layer's centred keys); the record keeps the earlier run's commit and error")
    sub.add_parser("render")
    args = ap.parse_args(argv)
    {"plan": cmd_plan, "run": cmd_run, "collect": cmd_collect, "render": cmd_render}[args.step](args)


if __name__ == "__main__":
    main()
