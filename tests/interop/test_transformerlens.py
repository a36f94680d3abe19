"""TransformerLens export: a ``transformer`` / ``swa_transformer`` as a ``HookedTransformer`` with the
same logits (float64, to 1e-5 at the scored positions) and the same activations at every capture
point; architectures and inputs it cannot express are refused; ``windtunnel export`` round trip."""

import importlib
import importlib.util
import json
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.interop import transformerlens as wtl
from windtunnel.models import make_model
from windtunnel.tasks import make_generator, make_task
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import train

needs_tl = pytest.mark.skipif(importlib.util.find_spec("transformer_lens") is None,
                              reason="needs the transformerlens extra")
TASK = make_task("bijection", {"V": 5, "L": 4})  # 7 positions, 4 scored, 5 answers
SMALL = {"n_layers": 2, "n_heads": 2, "d_model": 16}
MODELS = {
    "untied": ("transformer", SMALL),
    "tied": ("transformer", {**SMALL, "tie_head": True}),
    "rmsnorm": ("transformer", {**SMALL, "norm": "rmsnorm", "d_ffn": 24}),
    "no-bias": ("transformer", {**SMALL, "bias": False}),
    "swa": ("swa_transformer", {**SMALL, "window": 3}),  # window < 7 positions: the window masks
    "longer-table": ("transformer", {**SMALL, "n_heads": 4, "max_len": 12}),
}


def pair(name, params, dtype=torch.float64):
    torch.manual_seed(0)
    model = make_model(name, TASK.spec, params).to(dtype).eval()
    with torch.no_grad():  # non-trivial norms and biases (a fresh init has w=1, b=0)
        for n, p in model.named_parameters():
            if "norm" in n or n.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model, wtl.to_hooked_transformer(model)


@needs_tl
@pytest.mark.parametrize("which", MODELS)
def test_logits_and_every_capture_equal_ours(which):
    model, tl_model = pair(*MODELS[which])
    assert tl_model.cfg.dtype == torch.float64 and tl_model.cfg.default_prepend_bos is False
    assert tl_model.tokenizer is None
    batch = TASK.sample(8, make_generator(0, "eval"))
    ours, cache = model.run_with_cache(batch.inputs)
    theirs, tl_cache = tl_model.run_with_cache(batch.inputs)
    assert theirs.shape == ours.shape == (8, 7, 5)
    pos = batch.positions
    assert torch.allclose(theirs[:, pos], ours[:, pos], rtol=0, atol=1e-5)
    assert torch.allclose(theirs, ours, rtol=0, atol=1e-10)
    assert set(cache) == set(model.capture_names())
    for name, value in cache.items():
        got = wtl.from_tl_cache(tl_model, tl_cache, name)
        assert got.shape == value.shape, name
        assert torch.allclose(got, value, rtol=0, atol=1e-10), name
    # the names a TransformerLens user types, without the helper
    for i in range(model.config.n_layers):
        assert torch.allclose(tl_cache[f"blocks.{i}.attn.hook_pattern"], cache[f"blocks.{i}.attn.pattern"], atol=1e-10)
        assert torch.allclose(tl_cache[f"blocks.{i}.hook_resid_post"], cache[f"blocks.{i}.resid_post"], atol=1e-10)
        assert torch.allclose(tl_cache[f"blocks.{i}.attn.hook_z"].transpose(1, 2), cache[f"blocks.{i}.attn.z"], atol=1e-10)


@needs_tl
def test_the_window_is_ours():
    model, tl_model = pair(*MODELS["swa"])
    assert tl_model.cfg.attn_types == ["local", "local"] and tl_model.cfg.window_size == 3
    _, tl_cache = tl_model.run_with_cache(TASK.sample(2, make_generator(1, "eval")).inputs)
    t = torch.arange(7)
    lag = t[:, None] - t[None, :]
    allowed = (lag >= 0) & (lag < 3)
    pattern = tl_cache["blocks.0.attn.hook_pattern"]
    assert (pattern[..., ~allowed] == 0).all() and (pattern[..., allowed] > 0).all()


@needs_tl
def test_float32_export_and_head_patching_match():
    model, tl_model = pair("transformer", SMALL, torch.float32)
    assert tl_model.cfg.dtype == torch.float32
    inputs = TASK.sample(4, make_generator(2, "eval")).inputs
    assert torch.allclose(tl_model(inputs), model(inputs), atol=1e-5)
    # zero-ablating head 1 of layer 0: our head_mask and a TransformerLens hook on hook_z agree
    model.head_mask[0, 1] = 0.0
    ablated = model(inputs)
    model.clear_ablations()

    def zero_head(z, hook):
        z[:, :, 1] = 0.0
        return z

    patched = tl_model.run_with_hooks(inputs, fwd_hooks=[("blocks.0.attn.hook_z", zero_head)])
    assert torch.allclose(patched, ablated, atol=1e-5) and not torch.allclose(patched, model(inputs), atol=1e-3)


@pytest.mark.parametrize("name, params", [("lstm", {}), ("mamba", {}), ("linear_attention", {}), ("mlp", {})])
def test_an_architecture_transformerlens_cannot_express_is_refused(name, params):
    model = make_model(name, TASK.spec, params)
    with pytest.raises(ConfigError, match=f"TransformerLens cannot express model '{name}'.*transformer, swa_transformer"):
        wtl.to_hooked_transformer(model)


def test_vector_inputs_and_ablations_are_refused():
    regression = make_task("regression")
    with pytest.raises(ConfigError, match="vector inputs.*token ids only"):
        wtl.check_exportable(make_model("transformer", regression.spec, SMALL))
    model = make_model("transformer", TASK.spec, SMALL)
    model.set_bypass(1, "ffn")
    with pytest.raises(ConfigError, match="clear_ablations"):
        wtl.check_exportable(model)
    model.clear_ablations()
    model.head_mask[0, 0] = 0.0
    with pytest.raises(ConfigError, match="clear_ablations"):
        wtl.check_exportable(model)


def test_hook_names():
    assert wtl.tl_hook_name("embed") == "blocks.0.hook_resid_pre"
    assert wtl.tl_hook_name("blocks.3.attn.pattern") == "blocks.3.attn.hook_pattern"
    assert wtl.tl_hook_name("blocks.10.attn.q") == "blocks.10.attn.hook_q"
    assert wtl.tl_hook_name("blocks.0.resid_post") == "blocks.0.hook_resid_post"
    with pytest.raises(ConfigError, match="no TransformerLens hook"):
        wtl.tl_hook_name("final")


def test_a_missing_extra_gives_the_install_hint(monkeypatch):
    real = importlib.import_module

    def no_tl(name, *args, **kwargs):
        if name.split(".")[0] == "transformer_lens":
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_tl)
    with pytest.raises(ConfigError, match=r"'transformerlens' extra.*make setup EXTRAS=transformerlens"):
        wtl.to_hooked_transformer(make_model("transformer", TASK.spec, SMALL))


def test_importing_windtunnel_does_not_import_transformer_lens():
    code = ("import sys, windtunnel, windtunnel.cli, windtunnel.interop.transformerlens; "
            "assert 'transformer_lens' not in sys.modules, 'transformer_lens imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@needs_tl
@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")  # TransformerLens 3's pointer to its Bridge
def test_export_command_round_trip(tmp_path):
    folder = tmp_path / "run"
    cfg = {"task": "bijection", "task_params": {"V": 5, "L": 4}, "model": "transformer",
           "model_params": {**SMALL, "tie_head": True},
           "train": {"steps": 4, "batch_size": 8, "checkpoints": 1, "threads": 1}}
    train(RunConfig.build(cfg), folder, progress=False, evaluate_at_end=False)
    before = sorted(p.name for p in folder.iterdir())
    res = CliRunner().invoke(app, ["export", str(folder), "--to", "nope"])
    assert res.exit_code == 2 and "--to 'nope'" in res.output
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written

    res = CliRunner().invoke(app, ["export", str(folder), "--to", "transformerlens"])
    assert res.exit_code == 0, res.output
    out = folder / "transformerlens"
    assert "load_hooked_transformer" in res.output and json.loads((out / "config.json").read_text())["d_vocab_out"] == 5
    tl_model = wtl.load_hooked_transformer(out)
    _, model = RunDir(folder).load_model()
    inputs = TASK.sample(4, make_generator(3, "eval")).inputs
    assert torch.allclose(tl_model(inputs), model.eval()(inputs), atol=1e-5)

    # the load snippet of docs/interop.md, with TransformerLens's own classes
    from safetensors.torch import load_file
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    conf = json.loads((out / "config.json").read_text())
    conf["dtype"] = getattr(torch, conf["dtype"])
    plain = HookedTransformer(HookedTransformerConfig(**conf))
    plain.load_state_dict(load_file(out / "model.safetensors"))
    assert torch.allclose(plain(inputs), tl_model(inputs), atol=0)

    res = CliRunner().invoke(app, ["export", str(tmp_path / "nothing"), "--to", "transformerlens"])
    assert res.exit_code == 2 and "not a run directory" in res.output


def test_load_refuses_a_folder_that_is_no_export(tmp_path):
    with pytest.raises(ConfigError, match="not a TransformerLens export"):
        wtl.load_hooked_transformer(tmp_path)
