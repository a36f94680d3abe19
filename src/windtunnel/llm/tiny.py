"""Tiny randomly initialised causal LMs of each family, saved like a user's model, with a small
byte-level BPE tokenizer trained on the shipped prompt pools.

They let every code path of ``windtunnel llm`` run without the hub: the tests build them, and the
``paper3-offline`` comparison builds a multi-head and a grouped-query one so that both sides of
Paper III's dissociation are exercised. Their weights are random: what they measure is the
machinery, not a claim of the paper. Seeds are explicit; the same spec gives the same weights.
"""

from __future__ import annotations

from pathlib import Path

#: family: (transformers config class, its arguments beyond the sizes)
FAMILIES = {
    "gpt_neox": ("GPTNeoXConfig", dict(rotary_pct=0.5)),
    "phi": ("PhiConfig", dict(partial_rotary_factor=0.5)),
    "llama": ("LlamaConfig", dict()),
    "mistral": ("MistralConfig", dict()),
    "qwen2": ("Qwen2Config", dict()),  # the generic q/k/v adapter
}
#: families whose config takes a number of key/value heads (the others are multi-head only)
GQA_FAMILIES = ("llama", "mistral", "qwen2")
#: the tests' default shapes per family: 4 query heads, 2 key/value heads where the family has them
TEST_SHAPES = {"gpt_neox": {}, "phi": {}, "llama": {"n_kv_heads": 2}, "mistral": {"n_kv_heads": 2, "sliding_window": 8},
               "qwen2": {"n_kv_heads": 2}}


def build_tokenizer(path):
    """A 1,200-token byte-level BPE trained on the shipped prompt pools, the SULA carrier words and
    label candidates (so that labels are single tokens), saved to ``path``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from windtunnel.llm.config import DEFAULT_LABEL_CANDIDATES
    from windtunnel.llm.prompts import load_pool
    from windtunnel.tasks.sula import CARRIER_WORDS

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    words = " " + " ".join(CARRIER_WORDS + list(DEFAULT_LABEL_CANDIDATES)) + " : , ."
    corpus = [words] * 20 + [p["text"] for w in ("mixed", "math") for p in load_pool(w)["prompts"]]
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<bos>", "<eos>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(corpus, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>")
    tok.save_pretrained(path)
    return tok


def build_model(family: str, path, vocab_size: int, n_layers: int = 3, seed: int = 0, *, d_model: int = 32,
                n_heads: int = 4, n_kv_heads: int | None = None, sliding_window: int | None = None,
                shape: dict | None = None):
    """A randomly initialised model of ``family`` (torch seeded with ``seed``), saved to ``path``.
    ``n_kv_heads`` (grouped-query families only) and ``sliding_window`` (mistral) default to the
    tests' shapes of :data:`TEST_SHAPES` when ``shape`` is None."""
    import torch
    import transformers

    cls_name, kw = FAMILIES[family]
    sizes = dict(TEST_SHAPES[family]) if shape is None else dict(shape)
    if n_kv_heads is not None:
        sizes["n_kv_heads"] = n_kv_heads
    if sliding_window is not None:
        sizes["sliding_window"] = sliding_window
    kw = dict(kw)
    if "n_kv_heads" in sizes:
        kw["num_key_value_heads"] = sizes["n_kv_heads"]
    if sizes.get("sliding_window"):
        kw["sliding_window"] = sizes["sliding_window"]
    cfg = getattr(transformers, cls_name)(vocab_size=vocab_size, hidden_size=d_model, intermediate_size=2 * d_model,
                                          num_hidden_layers=n_layers, num_attention_heads=n_heads,
                                          max_position_embeddings=256, **kw)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(path)
    return model


def build_saved(spec: dict, path: Path | str) -> Path:
    """A tiny model of ``spec`` (``family``, ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``,
    ``sliding_window``, ``seed``) with its tokenizer in ``path`` (a folder ``windtunnel llm`` reads);
    an existing one is kept (``spec.json`` says what it was built from; a different spec is an error)."""
    import json

    from windtunnel.config import ConfigError

    path = Path(path)
    marker = path / "spec.json"
    if marker.is_file():
        if json.loads(marker.read_text()) != spec:
            raise ConfigError(f"{path} holds a tiny model of another spec; remove it or choose another --out")
        return path
    from windtunnel.files import atomic_write_text

    path.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(path)
    shape = {k: spec[k] for k in ("n_kv_heads", "sliding_window") if spec.get(k)}
    build_model(spec["family"], path, len(tok), spec["n_layers"], spec["seed"], d_model=spec["d_model"],
                n_heads=spec["n_heads"], shape=shape)
    atomic_write_text(marker, json.dumps(spec, indent=1))
    return path
