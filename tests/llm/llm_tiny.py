"""Tiny randomly initialised models of each family and a small byte-level BPE tokenizer (helpers
for the llm tests; the fixtures live in conftest.py)."""

from __future__ import annotations

FAMILIES = {
    # family: (config class name, kwargs); 3 layers, 4 query heads, d_model 32
    "gpt_neox": ("GPTNeoXConfig", dict(num_attention_heads=4, rotary_pct=0.5)),
    "phi": ("PhiConfig", dict(num_attention_heads=4, partial_rotary_factor=0.5)),
    "llama": ("LlamaConfig", dict(num_attention_heads=4, num_key_value_heads=2)),
    "mistral": ("MistralConfig", dict(num_attention_heads=4, num_key_value_heads=2, sliding_window=8)),
    "qwen2": ("Qwen2Config", dict(num_attention_heads=4, num_key_value_heads=2)),  # generic q/k/v adapter
}


def build_tokenizer(path):
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


def build_model(family: str, path, vocab_size: int, n_layers: int = 3, seed: int = 0):
    import torch
    import transformers

    cls_name, kw = FAMILIES[family]
    cfg = getattr(transformers, cls_name)(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=n_layers, max_position_embeddings=256, **kw)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(path)
    return model
