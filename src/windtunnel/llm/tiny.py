"""Tiny randomly initialised causal LMs of each family, saved like a user's model, with a small
byte-level BPE tokenizer trained on the shipped prompt pools.

They let every code path of ``windtunnel llm`` run without the hub: the tests build them, and the
``paper3-offline`` comparison builds a multi-head and a grouped-query one so that both sides of
Paper III's dissociation are exercised. Their weights are random: what they measure is the
machinery, not a claim of the paper. Seeds are explicit; the same spec gives the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class TinyShape:
    """The sizes of a tiny model and the torch seed of its random weights. ``n_kv_heads``
    (grouped-query families only) and ``sliding_window`` (mistral only): None leaves them unset."""

    n_layers: int = 3
    d_model: int = 32
    n_heads: int = 4
    n_kv_heads: int | None = None
    sliding_window: int | None = None
    seed: int = 0

    @classmethod
    def for_tests(cls, family: str, **sizes) -> TinyShape:
        """The tests' shape of ``family`` (:data:`TEST_SHAPES`) with ``sizes`` changed."""
        return cls(**{**TEST_SHAPES[family], **sizes})

    @classmethod
    def of_spec(cls, spec: dict) -> TinyShape:
        """The shape of a :class:`~windtunnel.llm.compare_config.TinySpec`'s fields (a dict)."""
        return cls(spec["n_layers"], spec["d_model"], spec["n_heads"], spec.get("n_kv_heads") or None,
                   spec.get("sliding_window") or None, spec["seed"])


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


def build_model(family: str, path, vocab_size: int, shape: TinyShape | None = None):
    """A randomly initialised model of ``family`` and ``shape`` (None: the tests' shape of the
    family, :meth:`TinyShape.for_tests`; torch seeded with its ``seed``), saved to ``path``."""
    import torch
    import transformers

    cls_name, kw = FAMILIES[family]
    shape = shape if shape is not None else TinyShape.for_tests(family)
    kw = dict(kw)
    if shape.n_kv_heads is not None:
        kw["num_key_value_heads"] = shape.n_kv_heads
    if shape.sliding_window:
        kw["sliding_window"] = shape.sliding_window
    d_model = shape.d_model
    cfg = getattr(transformers, cls_name)(vocab_size=vocab_size, hidden_size=d_model, intermediate_size=2 * d_model,
                                          num_hidden_layers=shape.n_layers, num_attention_heads=shape.n_heads,
                                          max_position_embeddings=256, **kw)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(shape.seed)
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
    build_model(spec["family"], path, len(tok), TinyShape.of_spec(spec))
    atomic_write_text(marker, json.dumps(spec, indent=1))
    return path
