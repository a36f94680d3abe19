"""A trained wind-tunnel transformer as a TransformerLens ``HookedTransformer`` (docs/interop.md).

:func:`to_hooked_transformer` maps a ``transformer`` or ``swa_transformer`` on a token task to a
``HookedTransformer`` with the same function: config mapped by hand (:func:`hooked_config`; no hub
download, no tokenizer), weights copied (:func:`hooked_state_dict`). Its logits are the model's
outputs over the task's answer space at every position (``d_vocab_out`` is the answer size; 2,
mean and log-variance, for a Gaussian task with token inputs), and its hooks hold our captures
(:data:`HOOKS`, :func:`tl_hook_name`, :func:`from_tl_cache`). :func:`save_hooked_transformer`
and :func:`load_hooked_transformer` write and read an export (``config.json``,
``model.safetensors``); :func:`export_run` is ``windtunnel export``. The mapping, parameter by
parameter: docs/interop.md, "TransformerLens".

Not expressible, refused with a :class:`~windtunnel.config.ConfigError`: other architectures,
vector inputs (``HookedTransformer`` embeds token ids by lookup, ``W_E[tokens]``; our vector tasks
embed with a Linear map), and a model with an ablation in force (a masked head or a bypassed
block: ``clear_ablations()`` first). Dropout is not carried over (an export is an eval-mode
model). ``transformer_lens`` is imported only inside the functions: the ``transformerlens`` extra
is optional, and a missing one is an install hint (:func:`require_hooked_transformer`).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from windtunnel.config import ConfigError, require
from windtunnel.models.base import WindModel
from windtunnel.models.transformer import SWATransformer, Transformer

#: the architectures a HookedTransformer expresses, by registered name
EXPORTABLE = {"transformer": Transformer, "swa_transformer": SWATransformer}
#: what ``windtunnel export`` writes (and :func:`load_hooked_transformer` reads)
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"

#: our capture names (``re`` patterns) -> TransformerLens hook names; q, k, v and z are (B, H, T, dh)
#: here and (B, T, H, dh) there (:func:`from_tl_cache` transposes). Our ``embed`` (token plus
#: position embedding) is TransformerLens's ``blocks.0.hook_resid_pre`` (``hook_embed`` +
#: ``hook_pos_embed``); our ``final`` (after the final norm) has no hook there:
#: :func:`from_tl_cache` applies ``ln_final`` to the last ``hook_resid_post``.
HOOKS: dict[str, str] = {
    r"embed": "blocks.0.hook_resid_pre",
    r"blocks\.(\d+)\.attn\.(q|k|v|z)": r"blocks.\1.attn.hook_\2",
    r"blocks\.(\d+)\.attn\.pattern": r"blocks.\1.attn.hook_pattern",
    r"blocks\.(\d+)\.resid_post": r"blocks.\1.hook_resid_post",
}
_HEADWISE = re.compile(r"blocks\.\d+\.attn\.(q|k|v|z)$")


def require_hooked_transformer():
    """The ``transformer_lens`` module, with ``HookedTransformer`` in it, or a ConfigError with the install hint."""
    tl = require("transformer_lens", "transformerlens", "the TransformerLens export")
    try:
        tl.HookedTransformer  # noqa: B018 (TransformerLens 4.0 removed it: its __getattr__ raises ImportError)
    except (ImportError, AttributeError):
        version = getattr(tl, "__version__", "?")
        raise ConfigError(f"TransformerLens {version} has no HookedTransformer (4.0 removed it); the export needs "
                          "transformer-lens>=2.0,<4: pip install 'transformer-lens>=2.0,<4'") from None
    return tl


def check_exportable(model: nn.Module) -> None:
    """Raise a ConfigError saying why ``model`` has no HookedTransformer equivalent, if it has none.
    Needs no TransformerLens (the command line checks before it writes anything)."""
    name = getattr(model, "name", type(model).__name__)
    if not isinstance(model, WindModel) or type(model) is not EXPORTABLE.get(name):
        raise ConfigError(f"TransformerLens cannot express model '{name}': a HookedTransformer is a causal attention "
                          f"transformer; exportable architectures: {', '.join(EXPORTABLE)}")
    spec = model.spec
    if spec.input_kind != "tokens":
        raise ConfigError(f"task '{spec.name}' has vector inputs ({spec.input_dim} numbers a position, embedded by a "
                          "Linear map); a HookedTransformer embeds token ids only (W_E[tokens]), so only models of "
                          "token tasks are exported")
    if getattr(model, "head_mask", None) is not None and not bool((model.head_mask == 1).all()) \
            or any(b is not None for b in getattr(model, "bypass", [])):
        raise ConfigError("the model has an ablation in force (a masked head or a bypassed block), which a "
                          "HookedTransformer would not carry; call model.clear_ablations() first")


def hooked_config(model: Transformer, dtype: torch.dtype | None = None, device: str = "cpu") -> dict[str, Any]:
    """The keyword arguments of ``HookedTransformerConfig`` for ``model`` (JSON-ready: ``dtype``
    is a name such as ``"float32"``; None: the model's own)."""
    check_exportable(model)
    c, spec = model.config, model.spec
    dtype = dtype or next(model.parameters()).dtype
    cfg: dict[str, Any] = {
        "model_name": f"windtunnel-{model.name}-{spec.name}",
        "n_layers": c.n_layers, "d_model": c.d_model, "n_heads": c.n_heads, "d_head": c.d_model // c.n_heads,
        "d_mlp": c.d_ffn, "act_fn": "gelu",
        "normalization_type": "LN" if c.norm == "layernorm" else "RMS", "eps": float(model.norm.eps),
        "positional_embedding_type": "standard", "n_ctx": model.embed.pos.num_embeddings,
        "d_vocab": spec.vocab_size,
        "d_vocab_out": spec.answer_size if spec.output_kind == "categorical" else 2,
        "default_prepend_bos": False, "tokenizer_name": None, "original_architecture": None,
        "dtype": str(dtype).removeprefix("torch."), "device": str(device),
    }
    if isinstance(model, SWATransformer):
        cfg.update(use_local_attn=True, attn_types=["local"] * c.n_layers, window_size=c.window)
    return cfg


def hooked_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """``model``'s weights under TransformerLens's parameter names and layouts (detached copies)."""
    check_exportable(model)
    c = model.config
    H, d = c.n_heads, c.d_model
    dh = d // H
    g = lambda t: t.detach().clone()
    bias_of = lambda lin: g(lin.bias) if lin.bias is not None else lin.weight.new_zeros(lin.out_features)  # bias=False: 0
    sd = {"embed.W_E": g(model.embed.tok.weight), "pos_embed.W_pos": g(model.embed.pos.weight)}

    def norm(prefix: str, m: nn.Module) -> None:
        sd[f"{prefix}.w"] = g(m.weight)
        if c.norm == "layernorm":
            sd[f"{prefix}.b"] = g(m.bias)

    for i, block in enumerate(model.blocks):
        p = f"blocks.{i}"
        norm(f"{p}.ln1", block.norm1)
        norm(f"{p}.ln2", block.norm2)
        w = g(block.attn.qkv.weight)  # (3d, d): the Q, K, V thirds, head h at rows h*dh..(h+1)*dh of each
        zeros_h = w.new_zeros(H, dh)
        for j, name in enumerate("QKV"):
            sd[f"{p}.attn.W_{name}"] = w[j * d:(j + 1) * d].reshape(H, dh, d).transpose(1, 2).contiguous()
            sd[f"{p}.attn.b_{name}"] = zeros_h.clone()
        sd[f"{p}.attn.W_O"] = g(block.attn.proj.weight).T.reshape(H, dh, d).contiguous()  # column h*dh+j -> W_O[h, j]
        sd[f"{p}.attn.b_O"] = w.new_zeros(d)
        sd[f"{p}.mlp.W_in"] = g(block.ffn.fc1.weight).T.contiguous()
        sd[f"{p}.mlp.b_in"] = bias_of(block.ffn.fc1)
        sd[f"{p}.mlp.W_out"] = g(block.ffn.fc2.weight).T.contiguous()
        sd[f"{p}.mlp.b_out"] = bias_of(block.ffn.fc2)
    norm("ln_final", model.norm)
    head = model.head
    if head.proj is None:  # tied: the embeddings of the answer tokens
        W_U = g(model.embed.tok.weight)[head.answer_ids]
        sd["unembed.W_U"] = W_U.T.contiguous()
        sd["unembed.b_U"] = W_U.new_zeros(W_U.shape[0])
    else:
        sd["unembed.W_U"] = g(head.proj.weight).T.contiguous()
        sd["unembed.b_U"] = bias_of(head.proj)
    return sd


def build_hooked_transformer(config: dict[str, Any], state_dict: dict[str, torch.Tensor] | None = None):
    """A ``HookedTransformer`` from :func:`hooked_config`'s keyword arguments (``dtype`` a name or a
    torch dtype) and, if given, the weights of :func:`hooked_state_dict`: every parameter is set."""
    tl = require_hooked_transformer()
    kwargs = dict(config)
    if isinstance(kwargs.get("dtype"), str):
        kwargs["dtype"] = getattr(torch, kwargs["dtype"])
    with warnings.catch_warnings():  # TransformerLens 3 deprecates HookedTransformer for its TransformerBridge,
        warnings.filterwarnings("ignore", message="HookedTransformer is deprecated", category=DeprecationWarning)
        try:  # which wraps Hugging Face models only
            cfg = tl.HookedTransformerConfig(init_weights=False, **kwargs)
        except TypeError:  # a release without init_weights
            cfg = tl.HookedTransformerConfig(**kwargs)
        tl_model = tl.HookedTransformer(cfg)  # on cfg.device
    if state_dict is not None:
        params = {n for n, _ in tl_model.named_parameters()}
        missing, extra = params - set(state_dict), set(state_dict) - set(tl_model.state_dict())
        if missing or extra:  # a TransformerLens release with other parameter names
            raise ConfigError(f"weights do not fit this TransformerLens release's HookedTransformer: "
                              f"parameters not set {sorted(missing)}, names it does not have {sorted(extra)}")
        full = tl_model.state_dict()  # buffers (masks) as the model made them
        full.update({k: v.to(full[k].dtype) for k, v in state_dict.items()})
        tl_model.load_state_dict(full, strict=True)
    return tl_model.eval()


def to_hooked_transformer(model: nn.Module, dtype: torch.dtype | None = None):
    """A ``transformer_lens.HookedTransformer`` that computes what ``model`` computes.

    ``model(tokens)`` (B, T) -> logits (B, T, answers), equal to ``windtunnel``'s outputs at every
    position (float64: to 1e-12; take the task's scored positions as usual). ``dtype``: that of
    the HookedTransformer (None: the model's). Raises ConfigError for a model TransformerLens
    cannot express (see the module docstring) and, without the ``transformerlens`` extra, with
    the command that installs it.
    """
    check_exportable(model)
    require_hooked_transformer()
    device = next(model.parameters()).device
    return build_hooked_transformer(hooked_config(model, dtype, str(device)), hooked_state_dict(model))


def tl_hook_name(name: str) -> str:
    """The TransformerLens hook name of our capture name ``name`` (``blocks.0.attn.pattern`` ->
    ``blocks.0.attn.hook_pattern``). ``final`` has none (see :func:`from_tl_cache`)."""
    for pattern, repl in HOOKS.items():
        if re.fullmatch(pattern, name):
            return re.sub(f"^{pattern}$", repl, name)
    raise ConfigError(f"capture '{name}' has no TransformerLens hook; mapped: embed, blocks.{{i}}.attn.q|k|v|z|pattern, "
                      "blocks.{i}.resid_post (final: ln_final of the last hook_resid_post)")


def from_tl_cache(tl_model, cache, name: str) -> torch.Tensor:
    """Our capture ``name`` (in our layout) read from a TransformerLens ``run_with_cache`` cache."""
    if name == "final":
        return tl_model.ln_final(cache[f"blocks.{tl_model.cfg.n_layers - 1}.hook_resid_post"])
    value = cache[tl_hook_name(name)]
    return value.transpose(1, 2) if _HEADWISE.fullmatch(name) else value


def save_hooked_transformer(model: nn.Module, out: Path | str, dtype: torch.dtype | None = None) -> Path:
    """Write ``out/config.json`` (the ``HookedTransformerConfig`` arguments) and
    ``out/model.safetensors`` (the HookedTransformer's state dict) for ``model``; return ``out``.
    Checks everything (and builds the HookedTransformer once) before it writes."""
    from safetensors.torch import save

    from windtunnel.files import atomic_write_bytes, atomic_write_text

    out = Path(out)
    config = hooked_config(model, dtype)
    tl_model = build_hooked_transformer(config, hooked_state_dict(model))  # the weights fit, TransformerLens is installed
    weights = {k: v.detach().cpu().contiguous() for k, v in tl_model.state_dict().items()}  # buffers too: strict loads
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / WEIGHTS_FILE, save(weights))
    atomic_write_text(out / CONFIG_FILE, json.dumps(config, indent=1) + "\n")
    return out


def load_hooked_transformer(path: Path | str):
    """The HookedTransformer that :func:`save_hooked_transformer` (``windtunnel export``) wrote to ``path``."""
    from safetensors.torch import load_file

    path = Path(path)
    for f in (CONFIG_FILE, WEIGHTS_FILE):
        if not (path / f).is_file():
            raise ConfigError(f"{path} is not a TransformerLens export: it has no {f} (write one with "
                              "`windtunnel export RUN --to transformerlens --out PATH`)")
    return build_hooked_transformer(json.loads((path / CONFIG_FILE).read_text()), load_file(str(path / WEIGHTS_FILE)))


#: what ``windtunnel export --to`` accepts
EXPORT_FORMATS = ("transformerlens",)


def export_run(run_dir: Path | str, to: str, out: Path | str | None = None) -> tuple[Path, int]:
    """``windtunnel export``: the newest checkpoint of the run in ``run_dir`` written in format
    ``to`` into ``out`` (default ``RUN_DIR/transformerlens``); returns the folder and the step.
    Every argument is checked, and the HookedTransformer built once, before anything is written."""
    from windtunnel.train.rundir import RunDir

    if to not in EXPORT_FORMATS:
        raise ConfigError(f"--to {to!r}: unknown format; allowed: {', '.join(EXPORT_FORMATS)}")
    run = RunDir.open(run_dir)
    step, _ = run.checkpoint(purpose="export")
    _, model = run.load_model(step)
    check_exportable(model)
    require_hooked_transformer()
    return save_hooked_transformer(model.eval(), out or Path(run_dir) / "transformerlens"), step
