"""Load a causal LM by hub id, local folder or local ``.gguf`` file, the same way for every user.

transformers is an optional dependency (the ``llm`` extra: ``make setup EXTRAS=llm``): it is imported
here, lazily, and a missing install raises a :class:`ConfigError` that says what to install.
Models load with ``attn_implementation="eager"`` (the only implementation that returns
attention weights), ``trust_remote_code`` off unless asked, in eval mode. The tokenizer pads on
the left so that the last position of every row is its last real token.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from windtunnel.config import ConfigError
from windtunnel.config import require as require_optional
from windtunnel.llm.adapters import Adapter, adapter_for
from windtunnel.llm.architecture import architecture
from windtunnel.llm.config import LLMOptions


def require(module: str = "transformers"):
    """Import an optional dependency of the llm extra or explain how to install it."""
    return require_optional(module, "llm", "windtunnel llm")


def _version_tuple(v: str) -> tuple[int, int]:
    parts = v.split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    adapter: Adapter
    info: dict = field(default_factory=dict)

    @property
    def input_device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def close(self) -> None:
        """Drop the model and free memory (between model loads)."""
        self.model = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def resolve_source(name: str, opts: LLMOptions) -> dict:
    """Where the weights come from: {'kind': hub|folder|gguf, 'path', 'gguf_file'}."""
    p = Path(name).expanduser()
    if name.endswith(".gguf"):
        if not p.is_file():
            raise ConfigError(f"model '{name}': no such GGUF file")
        require("gguf")
        return {"kind": "gguf", "path": str(p.parent.resolve()), "gguf_file": p.name}
    if p.is_dir():
        gg = opts.gguf_file
        if gg is None and not (p / "config.json").is_file():
            ggufs = sorted(x.name for x in p.glob("*.gguf"))
            if len(ggufs) == 1:
                gg = ggufs[0]
            else:
                raise ConfigError(f"model folder '{name}' has no config.json"
                                  + (f" and several GGUF files ({', '.join(ggufs)}): pass gguf_file" if ggufs else ""))
        if gg is not None:
            require("gguf")
        return {"kind": "gguf" if gg else "folder", "path": str(p.resolve()), "gguf_file": gg}
    if p.exists():
        raise ConfigError(f"model '{name}' is a file but not a .gguf file; give a hub id, a folder or a .gguf file")
    if opts.gguf_file is not None:
        require("gguf")
    return {"kind": "hub", "path": name, "gguf_file": opts.gguf_file}


def resolve_device(opts: LLMOptions) -> str:
    if opts.device != "auto":
        if opts.device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"field 'device' = {opts.device!r}: CUDA is not available here; allowed: cpu")
        return opts.device
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(opts: LLMOptions, device: str) -> torch.dtype:
    if opts.dtype == "auto":
        return torch.bfloat16 if (device.startswith("cuda") or opts.device_map) else torch.float32
    return getattr(torch, opts.dtype)


def _from_config(name: str, src: dict, opts: LLMOptions, revision: str | None, kwargs: dict, seed: int):
    """The architecture of ``name`` at initialisation: its own config, weights drawn by its family's
    initialiser (transformers' ``_init_weights``) with torch seeded by ``seed``; the caller's RNG
    state is left as it was."""
    from windtunnel.llm.memory import read_config

    transformers = require("transformers")
    config = read_config(name, src, opts.trust_remote_code, revision)
    kw = {k: v for k, v in kwargs.items() if k in ("dtype", "torch_dtype", "attn_implementation", "trust_remote_code")}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return transformers.AutoModelForCausalLM.from_config(config, **kw)


def _common_kwargs(src: dict, opts: LLMOptions, revision: str | None) -> dict[str, Any]:
    """What both the model and its tokenizer are loaded with: remote code, revision, GGUF file."""
    common: dict[str, Any] = {"trust_remote_code": opts.trust_remote_code}
    if revision is not None:
        common["revision"] = revision
    if src["gguf_file"]:
        common["gguf_file"] = src["gguf_file"]
    return common


def _eager(model, name: str) -> None:
    """Switch ``model`` to eager attention (the one implementation that returns attention weights)."""
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        try:
            model.set_attn_implementation("eager")
        except Exception as exc:  # pragma: no cover - depends on the model class
            raise ConfigError(f"model '{name}' cannot use eager attention, which is needed for attention weights: "
                              f"{exc}") from None


def _tokenizer(name: str, path: str, common: dict[str, Any]):
    """The tokenizer of model ``name`` (at ``path``), padding on the left, with a pad token."""
    transformers = require("transformers")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(path, **common)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"could not load the tokenizer of '{name}': {exc}") from None
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    return tok


def load_model(name: str, opts: LLMOptions, revision: str | None = None, *, weights_only: bool = False,
               reinit_seed: int | None = None) -> LoadedModel:
    """Load ``name`` (hub id, folder or .gguf) with its tokenizer and family adapter.

    ``revision`` overrides ``opts.revision`` (used for the initialisation checkpoint).
    ``weights_only`` skips the tokenizer (key orthogonality needs weights only).
    ``reinit_seed``: the same architecture re-initialised from its config with that torch seed
    (the control at initialisation), with the model's own tokenizer."""
    transformers = require("transformers")
    src = resolve_source(name, opts)
    revision = revision if revision is not None else opts.revision
    if src["kind"] != "hub" and revision is not None:
        raise ConfigError(f"field 'revision' = {revision!r}: revisions apply to hub ids only, not to {src['kind']} "
                          f"'{name}'")
    if opts.device_map is not None:
        require("accelerate")
    device = resolve_device(opts) if opts.device_map is None else None
    dtype = resolve_dtype(opts, device or "cuda")
    memory = None
    if not weights_only:  # the main model: its estimate (which counts an init_revision copy) before loading
        from windtunnel.llm.memory import check_memory

        memory = check_memory(name, src, opts, device or "cuda", str(dtype).removeprefix("torch."))
    common = _common_kwargs(src, opts, revision)
    dtype_key = "dtype" if _version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype"
    kwargs = {**common, dtype_key: dtype, "attn_implementation": "eager"}
    if opts.device_map is not None:
        kwargs["device_map"] = opts.device_map
        kwargs["low_cpu_mem_usage"] = True
    try:
        if reinit_seed is None:
            model = transformers.AutoModelForCausalLM.from_pretrained(src["path"], **kwargs)
        else:
            model = _from_config(name, src, opts, revision, kwargs, reinit_seed)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"could not load model '{name}' ({src['kind']}"
                          + (f", revision {revision}" if revision else "") + f"): {exc}") from None
    if opts.device_map is None:
        model.to(device)
    model.eval()
    _eager(model, name)
    adapter = adapter_for(model)
    tok = None if weights_only else _tokenizer(name, src["path"], common)
    info = {
        "name": name, "source": src["kind"], "path": src["path"], "gguf_file": src["gguf_file"],
        "revision": revision, "reinit_seed": reinit_seed, "dtype": str(dtype).removeprefix("torch."), "device": device,
        "device_map": opts.device_map, "trust_remote_code": opts.trust_remote_code,
        "attn_implementation": "eager", "transformers_version": transformers.__version__,
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
        **adapter.describe(),
        "architecture": architecture(model.config, adapter.n_heads, adapter.n_kv_heads, adapter.sliding_window),
    }
    if memory is not None:
        info["memory"] = memory
    return LoadedModel(model=model, tokenizer=tok, adapter=adapter, info=info)
