"""The tiny sweeps the sweep and report tests share: every run trains in well under a second."""

import json
import sys
import time

from windtunnel.sweep import read_manifest
from windtunnel.train.checkpoint import list_checkpoints

#: every run trains in well under a second
TINY_OVERRIDES = ["train.steps=12", "train.batch_size=8", "train.checkpoints=2", "train.threads=1",
                  "eval.n_sequences=48", "eval.batch_size=48", "eval.n_boot=20"]


def tiny_sweep_doc(**changes):
    doc = {
        "name": "tiny",
        "profile": "quick",
        "overrides": TINY_OVERRIDES,
        "grid": {"train.seed": [0, 1]},
        "paper": "paper1",
        "experiments": [
            {"task": "bijection", "models": ["transformer", "lstm"],
             "overrides": ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1", "model_params.d_model=32"]},
            {"task": "hmm", "models": ["transformer", "mlp"], "grid": {"train.seed": [0]},
             "overrides": ["model_params.n_layers=1", "model_params.d_model=32", "eval.lengths=[30]"]},
        ],
        "primitives": {"rules": {"accumulation": {"experiment": "bijection", "metric": "kl_bayes_model"},
                                 "transport": {"experiment": "hmm", "metric": "kl_bayes_model"}}},
    }
    doc.update(changes)
    return doc




def two_run_sweep(tmp_path):
    """A short run then a long one (600 steps, resumable every 0.05 s): the `windtunnel sweep` command and its folder."""
    overrides = ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1", "model_params.d_model=16"]
    doc = tiny_sweep_doc(
        grid={},
        primitives=None,
        experiments=[
            {"task": "bijection", "models": ["transformer"], "match_capacity": None, "overrides": overrides},
            {"task": "bijection", "name": "long", "models": ["lstm"], "match_capacity": None,
             "overrides": [*overrides, "train.steps=600", "train.resume_every_s=0.05"]},
        ],
    )
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "out"
    return [sys.executable, "-m", "windtunnel", "sweep", str(path), "--out", str(out), "--quiet"], out


def wait_for_second_run(proc, out, timeout=120):
    """Wait until the first run is finished and the second has a resumable checkpoint past step 50;
    returns the two run folders."""
    deadline = time.time() + timeout
    first = second = None
    while time.time() < deadline and proc.poll() is None:
        if (out / "sweep.json").exists():
            _, runs = read_manifest(out)
            first, second = out / runs[0].name, out / runs[1].name
            if (first / "eval.json").exists() and any(
                    (p / "optim.safetensors").exists() and s > 50 for s, p in list_checkpoints(second)):
                break
        time.sleep(0.02)
    assert first is not None and (first / "eval.json").exists(), "the first run did not finish in time"
    return first, second
