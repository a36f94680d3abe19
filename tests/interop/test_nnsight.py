"""nnsight on a windtunnel transformer: examples/nnsight_patching.py (docs/interop.md, "nnsight"),
run whole and checked. What nnsight reads equals our own capture, a no-op patch leaves the logits
alone, a zeroed head equals our ``head_mask`` ablation, and the patches move the calibration
against the exact posterior."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path

import pytest
import torch

pytest.importorskip("nnsight")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "nnsight_patching.py"
TOL = 1e-6


def load_example():
    spec = importlib.util.spec_from_file_location("nnsight_patching", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(example, argv: list[str]) -> tuple[dict, str]:
    """The example's main(argv): its numbers and what it printed (torch's thread count restored)."""
    threads, out = torch.get_num_threads(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            result = example.main(argv)
    finally:
        torch.set_num_threads(threads)
    return result, out.getvalue()


@pytest.fixture(scope="module")
def example():
    return load_example()


@pytest.fixture(scope="module")
def tiny(example):
    """The script as a reader runs it: trains the tiny bijection transformer, traces and patches it."""
    return run_main(example, [])


def check_equalities(r: dict) -> None:
    assert r["logits_vs_forward"] <= TOL  # the traced forward is ours
    assert r["z_vs_capture"] <= TOL  # blocks.{i}.attn.z.output == run_with_cache's blocks.{i}.attn.z
    assert r["attn_out_vs_capture"] <= TOL  # blocks.{i}.attn.output == W_O of the captured z
    assert r["noop_change"] <= TOL  # writing the same attention output back changes nothing
    assert r["head_vs_head_mask"] <= TOL  # zeroing a head's slice of proj.input == our head_mask ablation
    assert min(r["head_change"].values()) > 1e-4  # ... and every such patch does change the logits
    assert len(r["head_zeroed"]) == r["n_layers"] * r["n_heads"]


def test_reads_and_patches_equal_ours(tiny):
    r, _ = tiny
    assert (r["n_layers"], r["n_heads"]) == (2, 4)
    check_equalities(r)


def test_patches_move_the_calibration(tiny):
    r, _ = tiny
    clean_ee, clean_kl = r["clean"]
    assert 0 < clean_ee < 0.2 and 0 < clean_kl < 0.1  # trained: close to the posterior
    # zeroing a head of layer 0 moves the entropy error (each by >= 0.02 bits at 300 steps)
    assert max(abs(ee - clean_ee) for (i, _h), (ee, _kl) in r["head_zeroed"].items() if i == 0) > 0.01
    # another batch's layer-0 attention output: the entropy error barely moves (the bijection posterior's
    # entropy depends on the position only) but the predictions are now the other sequences'
    ee, kl = r["other_batch"][0]
    assert abs(ee - clean_ee) < 0.01 and kl > 0.5 > 10 * clean_kl


def test_prints_the_numbers(tiny):
    _, text = tiny
    assert "nnsight vs windtunnel (max |diff|)" in text
    assert "layer 1 head 3 zeroed" in text and "layer 0 attn output from another batch" in text


def test_on_a_run_folder(example, tmp_path):
    """`python examples/nnsight_patching.py RUN`: a run folder written by the trainer."""
    from windtunnel.train.config import resolve_run
    from windtunnel.train.trainer import train

    config = resolve_run("bijection", "transformer", "quick", {**example.TINY, "train.steps": 3, "train.checkpoints": 1})
    threads = torch.get_num_threads()
    try:
        train(config, tmp_path / "run", progress=False, evaluate_at_end=False)
    finally:
        torch.set_num_threads(threads)
    r, text = run_main(example, [str(tmp_path / "run")])
    assert text.startswith(f"run {tmp_path / 'run'}: transformer, task bijection")
    check_equalities(r)
