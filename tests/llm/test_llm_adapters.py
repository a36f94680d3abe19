"""Adapters on tiny models of every family: per-head splits against manual computations, GQA
shapes, attention entropy against a hand computation, left padding, bounded capture."""

import functools
import math

import numpy as np
import pytest
import torch
from llm_tiny import FAMILIES, TinyShape, build_model

from windtunnel.config import ConfigError
from windtunnel.llm.capture import Batching, Keep, run_prompts
from windtunnel.llm.config import build_options
from windtunnel.llm.loading import load_model

PROMPTS = ["happy: dax, sad: lug. calm:", "The quick brown fox", "a", "def f(x):\n    return x + 1. What is 2 + 3?"]
EXPECTED_ADAPTER = {"gpt_neox": "gpt_neox", "phi": "phi", "llama": "llama", "mistral": "mistral", "qwen2": "generic"}
OUT_PROJ = {"gpt_neox": "dense", "phi": "dense", "llama": "o_proj", "mistral": "o_proj", "qwen2": "o_proj"}


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return {fam: load_model(str(path), build_options()) for fam, path in tiny_models.items()}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_adapter_and_shapes(loaded, family):
    lm = loaded[family]
    ad = lm.adapter
    assert ad.name == EXPECTED_ADAPTER[family]
    assert (ad.n_layers, ad.n_heads, ad.d_model) == (3, 4, 32)
    n_kv = 2 if family in ("llama", "mistral", "qwen2") else 4
    assert ad.n_kv_heads == n_kv and ad.head_dim == 8 and ad.value_dim == n_kv * 8  # GQA: kept as KV heads
    assert ad.key_weight(0).shape == (n_kv, 8, 32)
    assert lm.info["attn_implementation"] == "eager" and lm.tokenizer.padding_side == "left"
    assert (ad.sliding_window == 8) == (family == "mistral")
    cap = run_prompts(lm, PROMPTS, Keep(value_layers=[0, 2], key_layers=[1], attention=True, label_ids=[5, 6]))
    assert cap.values[2].shape == (4, n_kv * 8) and cap.keys[1].shape == (4, n_kv * 8)
    assert cap.attn_entropy.shape == (4, 3, 4)  # attention per *query* head
    assert cap.label_probs.shape == (4, 2) and cap.next_entropy.shape == (4,)


def _full_pass(lm, family, text):
    """One unpadded forward with hooks that keep everything (the reference for the checks)."""
    ad = lm.adapter
    rec = {}
    attn = ad.attention(0)
    hooks = [ad.value_module(0).register_forward_hook(lambda m, a, o: rec.__setitem__("vout", o.detach())),
             attn.register_forward_hook(lambda m, a, o: rec.__setitem__("w", o[1].detach())),
             getattr(attn, OUT_PROJ[family]).register_forward_pre_hook(lambda m, a: rec.__setitem__("z", a[0].detach())),
             attn.register_forward_pre_hook(lambda m, a, kw: rec.__setitem__("x", kw.get("hidden_states", a[0] if a else None)),
                                            with_kwargs=True)]
    ids = torch.tensor([lm.tokenizer(text)["input_ids"]])
    with torch.no_grad():
        lm.model(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    return rec


@pytest.mark.parametrize("family", list(FAMILIES))
def test_values_and_attention_reconstruct_the_attention_output(loaded, family):
    """sum_j alpha[h, T, j] v[j, kv(h)] with our per-KV-head split and the captured weights equals
    the input of the output projection for every query head: the split is the model's own."""
    lm = loaded[family]
    ad = lm.adapter
    rec = _full_pass(lm, family, PROMPTS[3])
    T = rec["vout"].shape[1]
    v = ad.values_from_output(rec["vout"])[0].reshape(T, ad.n_kv_heads, ad.head_dim)
    w = rec["w"][0]  # (H, T, T)
    group = ad.n_heads // ad.n_kv_heads
    z = torch.stack([w[h, -1] @ v[:, h // group] for h in range(ad.n_heads)])
    assert torch.allclose(z.reshape(-1), rec["z"][0, -1], atol=1e-5)
    # a wrong split must fail the same check (guards against a vacuous test)
    if family == "gpt_neox":
        wrong = rec["vout"][0].reshape(T, 3, ad.n_heads, ad.head_dim)[:, 2]  # the authors' (T, 3, H, d) reading
        z_wrong = torch.stack([w[h, -1] @ wrong[:, h] for h in range(ad.n_heads)])
        assert not torch.allclose(z_wrong.reshape(-1), rec["z"][0, -1], atol=1e-3)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_keys_and_key_weights_match_manual_projection(loaded, family):
    lm = loaded[family]
    ad = lm.adapter
    rec = _full_pass(lm, family, PROMPTS[0])
    x = rec["x"][0]  # (T, d_model) input of the attention module
    mod = ad.key_module(0)
    k_manual = torch.einsum("td,hkd->thk", x, ad.key_weight(0))
    if mod.bias is not None:
        k_manual = k_manual + ad.key_weight_from(mod.bias[:, None])[..., 0]
    out = mod(x)
    k = ad.keys_from_output(out).reshape(x.shape[0], ad.n_kv_heads, ad.head_dim)
    assert torch.allclose(k, k_manual, atol=1e-5)
    if family == "gpt_neox":
        # the transformers source: view (B, T, H, 3d), transpose, chunk(3) -> q, k, v (pre-rotary)
        _, k_hf, v_hf = out[None].view(1, x.shape[0], ad.n_heads, 3 * ad.head_dim).transpose(1, 2).chunk(3, dim=-1)
        assert torch.allclose(k, k_hf[0].transpose(0, 1))
        assert torch.allclose(ad.values_from_output(out).reshape(-1, ad.n_heads, ad.head_dim), v_hf[0].transpose(0, 1))
        W = mod.weight
        d = ad.head_dim
        for h in range(ad.n_heads):  # rows h*3d + d .. h*3d + 2d - 1
            assert torch.equal(ad.key_weight(0)[h], W[h * 3 * d + d: h * 3 * d + 2 * d])


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_attention_entropy_matches_a_hand_computation(loaded, family):
    lm = loaded[family]
    ad = lm.adapter
    text = PROMPTS[3]
    rec = _full_pass(lm, family, text)
    cap = run_prompts(lm, [text], Keep(attention=True))
    T = rec["w"].shape[-1]
    for h in range(ad.n_heads):
        row = rec["w"][0, h, -1].double().tolist()
        hand = -sum(p * math.log2(p) for p in row if p > 0)
        assert cap.attn_entropy[0, 0, h] == pytest.approx(hand, abs=1e-9)
        n_att = min(T, ad.sliding_window or T)
        assert cap.attn_entropy_norm[0, 0, h] == pytest.approx(hand / math.log2(n_att), abs=1e-9)
        assert cap.sink_mass[0, 0, h] == pytest.approx(row[0], abs=1e-9)
    if family == "mistral":  # the sliding window (8) really limits the final row
        assert T > 8 and rec["w"][0, :, -1, : T - 8].abs().max() == 0


def test_all_positions_entropy_is_the_mean_over_real_rows(loaded):
    lm = loaded["llama"]
    rec = _full_pass(lm, "llama", PROMPTS[0])
    w = rec["w"][0].double()  # (H, T, T)
    rows = -(w * torch.where(w > 0, w.log2(), torch.zeros_like(w))).sum(-1)  # (H, T)
    cap = run_prompts(lm, [PROMPTS[0], PROMPTS[2]], Keep(attention=True, attention_positions="all"))
    assert np.allclose(cap.attn_entropy[0, 0], rows.mean(-1).numpy(), atol=1e-9)
    T = w.shape[-1]
    norm = (rows[:, 1:] / torch.log2(torch.arange(2, T + 1, dtype=torch.float64))).mean(-1)
    assert np.allclose(cap.attn_entropy_norm[0, 0], norm.numpy(), atol=1e-9)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_left_padded_batches_equal_single_prompts(loaded, family):
    lm = loaded[family]
    keep = Keep(value_layers=[0, 2], key_layers=[2], attention=True, label_ids=[5, 6], residual=True)
    batch = run_prompts(lm, PROMPTS, keep, Batching(batch_size=4))
    for i, p in enumerate(PROMPTS):
        one = run_prompts(lm, [p], keep)
        assert np.allclose(batch.values[2][i], one.values[2][0], atol=1e-5)
        assert np.allclose(batch.keys[2][i], one.keys[2][0], atol=1e-5)
        assert np.allclose(batch.attn_entropy[i], one.attn_entropy[0], atol=1e-5)
        assert np.allclose(batch.sink_mass[i], one.sink_mass[0], atol=1e-5)
        assert np.allclose(batch.residual[i], one.residual[0], atol=1e-4)
        assert batch.next_entropy[i] == pytest.approx(one.next_entropy[0], abs=1e-5)
        assert np.allclose(batch.label_probs[i], one.label_probs[0], rtol=1e-4)
    assert list(batch.lengths) == [len(lm.tokenizer(p)["input_ids"]) for p in PROMPTS]


def test_capture_keeps_only_last_position_and_removes_hooks(loaded):
    lm = loaded["llama"]
    model = lm.model
    seen = {}
    orig = model.forward

    @functools.wraps(orig)
    def spy(*a, **kw):
        seen.update(kw)
        out = orig(*a, **kw)
        seen["logits_shape"] = tuple(out.logits.shape)
        return out

    model.forward = spy
    try:
        long = " ".join(["happy"] * 120)
        cap = run_prompts(lm, [long, "a"], Keep(value_layers=[0, 1, 2], key_layers=[0], attention=True, residual=True))
    finally:
        del model.forward
    assert seen["logits_to_keep"] == 1 and seen["logits_shape"][1] == 1 and seen["use_cache"] is False
    arrays = [cap.values[i] for i in cap.values] + [cap.keys[0], cap.attn_entropy, cap.sink_mass, cap.residual]
    assert all(a.shape[0] == 2 and max(a.shape[1:]) <= 32 for a in arrays)  # nothing of length T survives
    assert not any(m._forward_hooks for m in model.modules())


def test_truncation_and_bos(loaded):
    lm = loaded["llama"]
    cap = run_prompts(lm, [" ".join(["calm"] * 50)], batching=Batching(max_tokens=10, add_bos="always"))
    assert cap.lengths[0] == 10 and cap.bos_added[0]
    cap = run_prompts(lm, ["calm"], batching=Batching(add_bos="never"))
    assert not cap.bos_added[0]


def test_layer_indices_are_checked(loaded):
    lm = loaded["llama"]
    with pytest.raises(ConfigError, match="0 <= layer <= 2"):
        run_prompts(lm, ["a"], Keep(value_layers=[3]))
    with pytest.raises(ConfigError, match="0 <= layer <= 2"):
        run_prompts(lm, ["a"], interventions={-1: lambda v: v})


def test_unsupported_model_names_what_is_missing(tmp_path, tiny_tokenizer_dir):
    import transformers

    cfg = transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=32)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match=r"q_proj/k_proj/v_proj.*c_attn"):
        load_model(str(tmp_path), build_options())


def test_loading_errors_are_clear(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read at import time: also patch the constant
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigError, match="no such GGUF file"):
        load_model(str(tmp_path / "missing.gguf"), build_options())
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a .gguf file"):
        load_model(str(tmp_path / "notes.txt"), build_options())
    with pytest.raises(ConfigError, match="no config.json"):
        load_model(str(tmp_path), build_options())
    with pytest.raises(ConfigError, match="could not load model 'nobody/no-such-model-xyz'"):
        load_model("nobody/no-such-model-xyz", build_options())


def test_revision_only_for_hub_ids(tiny_models):
    with pytest.raises(ConfigError, match="revisions apply to hub ids only"):
        load_model(str(tiny_models["llama"]), build_options({"revision": "step0"}))


def test_trust_remote_code_is_off_by_default(loaded):
    assert build_options().trust_remote_code is False
    assert loaded["llama"].info["trust_remote_code"] is False


def test_extra_layers_model(tmp_path, tiny_tokenizer_dir):
    """A deeper model loads through the same path (layer count read from the module list)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    build_model("gpt_neox", tmp_path, len(tok), TinyShape.for_tests("gpt_neox", n_layers=5))
    tok.save_pretrained(tmp_path)
    assert load_model(str(tmp_path), build_options()).adapter.n_layers == 5


def test_tiny_shape():
    """The tests' shapes per family, and a comparison's TinySpec read into the same shape."""
    assert TinyShape.for_tests("gpt_neox") == TinyShape()
    assert TinyShape.for_tests("mistral", n_layers=5) == TinyShape(n_layers=5, n_kv_heads=2, sliding_window=8)
    spec = {"family": "llama", "n_layers": 4, "d_model": 64, "n_heads": 4, "n_kv_heads": None,
            "sliding_window": None, "seed": 3}
    assert TinyShape.of_spec(spec) == TinyShape(n_layers=4, d_model=64, n_heads=4, seed=3)
    assert TinyShape.of_spec({**spec, "n_kv_heads": 2}).n_kv_heads == 2


def test_tiny_model_of_a_shape(tmp_path):
    """A shape's sizes and grouped-query heads reach the saved model's config."""
    pytest.importorskip("transformers")
    model = build_model("llama", tmp_path, 50, TinyShape(n_layers=2, d_model=16, n_heads=4, n_kv_heads=1, seed=1))
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads) == (2, 16, 4, 1)
