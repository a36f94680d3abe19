"""Family adapters: where a Hugging Face causal LM keeps its per-head queries, keys and values.

An adapter answers, for decoder layer ``i``: which module's output carries the values (and
keys), how that output splits into key/value heads, the key weight W_K per key/value head, and
which attention module returns the attention weights. Conventions, the same for every family:

- Values and keys are the outputs of the value/key projections of each token, *before*
  attention mixes them and (for keys) *before* rotary embedding, as in the authors' code.
  Attention weights are post-rotary and post-softmax, as the model computes them.
- Grouped-query attention: values and keys are kept per **key/value head** and concatenated
  over the ``n_kv_heads`` heads (Llama-3.2-1B: 8 x 64 = 512 dims), never repeated to the query
  heads. Attention weights are per **query head**.
- GPT-NeoX (Pythia) fuses Q, K and V in ``query_key_value`` with a per-head interleaved layout:
  the output is (B, T, H, 3, d_head) with index 0 = Q, 1 = K, 2 = V (checked against the
  transformers source and a manual computation in the tests). The authors' code read it as
  (B, T, 3, H, d_head), which mixes heads; this adapter does not.

Adapters register by name; :func:`adapter_for` picks one from ``config.model_type`` and falls
back to the generic q_proj/k_proj/v_proj adapter. An unsupported model gets an error naming
what is missing.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from windtunnel.config import ConfigError

ADAPTERS: dict[str, type[Adapter]] = {}


def register_adapter(cls):
    ADAPTERS[cls.name] = cls
    return cls


_LAYER_PATHS = ("gpt_neox.layers", "model.layers", "transformer.h", "transformer.layers", "model.decoder.layers",
                "transformer.blocks", "layers")


def _get(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _cfg(config, *names, default=None):
    for n in names:
        v = getattr(config, n, None)
        if v is not None:
            return v
    return default


class Adapter:
    """Base adapter for models with separate ``q_proj``/``k_proj``/``v_proj`` linears."""

    name = "generic"
    model_types: tuple[str, ...] = ()
    layer_path: str | None = None
    attn_name: str | None = None  # child of a decoder layer; None = search for q/k/v
    q_name, k_name, v_name = "q_proj", "k_proj", "v_proj"

    def __init__(self, model: nn.Module):
        self.model = model
        self.config = model.config
        self.model_type = getattr(self.config, "model_type", "?")
        self.layers = self._find_layers()
        self.n_layers = len(self.layers)
        self.attn_modules = [self._find_attention(layer, i) for i, layer in enumerate(self.layers)]
        self.n_heads = int(_cfg(self.config, "num_attention_heads", "n_head", "num_heads", "n_heads", default=0))
        if not self.n_heads:
            raise ConfigError(f"model type '{self.model_type}': the config names no head count "
                              "(num_attention_heads / n_head / num_heads)")
        self.n_kv_heads = int(_cfg(self.config, "num_key_value_heads", "n_kv_heads", "num_kv_heads",
                                   default=self.n_heads))
        self._init_dims()
        self.sliding_window = self._sliding_window()

    # -- discovery ---------------------------------------------------------------------------
    def _find_layers(self) -> nn.ModuleList:
        paths = (self.layer_path,) if self.layer_path else _LAYER_PATHS
        for p in paths:
            layers = _get(self.model, p)
            if isinstance(layers, nn.ModuleList) and len(layers):
                return layers
        raise ConfigError(
            f"unsupported model '{type(self.model).__name__}' (model_type '{self.model_type}'): no decoder layer list "
            f"found at any of {', '.join(paths)}; supported families: {', '.join(sorted(ADAPTERS))} and models with "
            "q_proj/k_proj/v_proj attention")

    def _find_attention(self, layer: nn.Module, i: int) -> nn.Module:
        if self.attn_name:
            attn = _get(layer, self.attn_name)
            if attn is None:
                raise ConfigError(f"{self.name} adapter: layer {i} has no '{self.attn_name}' module")
            self._check_projections(attn, i)
            return attn
        for _, mod in layer.named_modules():
            if all(isinstance(getattr(mod, n, None), nn.Linear) for n in (self.q_name, self.k_name, self.v_name)):
                return mod
        children = sorted({n.split(".")[-1] for n, m in layer.named_modules()
                           if n and not list(m.children()) and getattr(m, "weight", None) is not None
                           and getattr(m.weight, "dim", lambda: 0)() == 2})
        raise ConfigError(
            f"unsupported model '{type(self.model).__name__}' (model_type '{self.model_type}'): decoder layer {i} has "
            f"no attention module with linear {self.q_name}/{self.k_name}/{self.v_name} projections (its weight "
            f"matrices are: {', '.join(children) or 'none'}); supported: {', '.join(sorted(ADAPTERS))} and the "
            "q_proj/k_proj/v_proj naming")

    def _check_projections(self, attn: nn.Module, i: int) -> None:
        missing = [n for n in (self.q_name, self.k_name, self.v_name) if not isinstance(getattr(attn, n, None), nn.Linear)]
        if missing:
            raise ConfigError(f"{self.name} adapter: attention of layer {i} lacks linear {', '.join(missing)}")

    def _init_dims(self) -> None:
        k = getattr(self.attn_modules[0], self.k_name)
        q = getattr(self.attn_modules[0], self.q_name)
        if k.out_features % self.n_kv_heads:
            raise ConfigError(f"{self.name} adapter: {self.k_name} has {k.out_features} outputs, not divisible by "
                              f"{self.n_kv_heads} key/value heads")
        self.head_dim = k.out_features // self.n_kv_heads
        if q.out_features != self.n_heads * self.head_dim:
            raise ConfigError(f"{self.name} adapter: {self.q_name} has {q.out_features} outputs but "
                              f"{self.n_heads} heads x {self.head_dim} = {self.n_heads * self.head_dim} were expected")
        self.d_model = k.in_features

    def _sliding_window(self) -> int | None:
        w = getattr(self.config, "sliding_window", None)
        if w is None or (hasattr(self.config, "use_sliding_window") and not self.config.use_sliding_window):
            return None
        return int(w)

    # -- what hooks read ---------------------------------------------------------------------
    @property
    def value_dim(self) -> int:
        """Width of the concatenated per-prompt value (and key) vector: n_kv_heads x d_head."""
        return self.n_kv_heads * self.head_dim

    def attention(self, i: int) -> nn.Module:
        """Module whose forward returns (attn_output, attn_weights (B, H, T, S), ...)."""
        return self.attn_modules[i]

    def value_module(self, i: int) -> nn.Module:
        return getattr(self.attn_modules[i], self.v_name)

    def key_module(self, i: int) -> nn.Module:
        return getattr(self.attn_modules[i], self.k_name)

    def values_from_output(self, out: torch.Tensor) -> torch.Tensor:
        """Value-module output (..., F) -> values (..., n_kv_heads x d_head), heads in order."""
        return out

    def keys_from_output(self, out: torch.Tensor) -> torch.Tensor:
        return out

    def replace_values(self, out: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """The value-module output with its values v (..., n_kv x d_head) replaced by fn(v)."""
        return fn(out)

    def key_weight(self, i: int) -> torch.Tensor:
        """W_K per key/value head: (n_kv_heads, d_head, d_model); row j of head h is the j-th of
        its d_head column vectors k_j in R^{d_model} (Paper III §4.2)."""
        return self.key_weight_from(self.key_module(i).weight)

    def key_weight_from(self, weight: torch.Tensor) -> torch.Tensor:
        return weight.detach().reshape(self.n_kv_heads, self.head_dim, -1)

    def key_linear_shape(self, i: int) -> tuple[int, int]:
        """(out_features, in_features) of the linear that holds W_K (for the init baseline)."""
        m = self.key_module(i)
        return m.out_features, m.in_features

    def describe(self) -> dict:
        return {
            "adapter": self.name, "model_type": self.model_type, "class": type(self.model).__name__,
            "n_layers": self.n_layers, "n_heads": self.n_heads, "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim, "d_model": self.d_model, "value_dim": self.value_dim,
            "sliding_window": self.sliding_window,
            "values": f"output of {self.v_name} per key/value head, before attention mixing",
            "keys": f"output of {self.k_name}, before rotary embedding (weight-only metric uses {self.k_name}.weight)",
        }


@register_adapter
class GenericAdapter(Adapter):
    """Any decoder whose attention has q_proj/k_proj/v_proj linears (Qwen2, Gemma, OLMo, GPT-J, ...)."""

    name = "generic"


@register_adapter
class LlamaAdapter(Adapter):
    """Llama (grouped-query attention: k_proj/v_proj have n_kv_heads x d_head outputs)."""

    name = "llama"
    model_types = ("llama",)
    layer_path = "model.layers"
    attn_name = "self_attn"


@register_adapter
class MistralAdapter(LlamaAdapter):
    """Mistral and Mixtral (grouped-query attention, sliding window recorded)."""

    name = "mistral"
    model_types = ("mistral", "mixtral")


@register_adapter
class PhiAdapter(Adapter):
    """Phi-1/1.5/2 (separate q/k/v projections with bias, partial rotary, output ``dense``)."""

    name = "phi"
    model_types = ("phi",)
    layer_path = "model.layers"
    attn_name = "self_attn"


@register_adapter
class NeoXAdapter(Adapter):
    """GPT-NeoX / Pythia: fused ``query_key_value`` with per-head interleaved layout (B, T, H, 3, d)."""

    name = "gpt_neox"
    model_types = ("gpt_neox",)
    layer_path = "gpt_neox.layers"
    attn_name = "attention"
    fused_name = "query_key_value"

    def _check_projections(self, attn: nn.Module, i: int) -> None:
        if not isinstance(getattr(attn, self.fused_name, None), nn.Linear):
            raise ConfigError(f"gpt_neox adapter: attention of layer {i} lacks the fused linear '{self.fused_name}'")

    def _init_dims(self) -> None:
        fused = getattr(self.attn_modules[0], self.fused_name)
        if fused.out_features % (3 * self.n_heads):
            raise ConfigError(f"gpt_neox adapter: {self.fused_name} has {fused.out_features} outputs, not divisible by "
                              f"3 x {self.n_heads} heads")
        self.n_kv_heads = self.n_heads  # NeoX is multi-head attention
        self.head_dim = fused.out_features // (3 * self.n_heads)
        self.d_model = fused.in_features

    def value_module(self, i: int) -> nn.Module:
        return getattr(self.attn_modules[i], self.fused_name)

    key_module = value_module

    def _heads(self, out: torch.Tensor) -> torch.Tensor:
        return out.reshape(*out.shape[:-1], self.n_heads, 3, self.head_dim)

    def values_from_output(self, out: torch.Tensor) -> torch.Tensor:
        return self._heads(out)[..., 2, :].reshape(*out.shape[:-1], -1)

    def keys_from_output(self, out: torch.Tensor) -> torch.Tensor:
        return self._heads(out)[..., 1, :].reshape(*out.shape[:-1], -1)

    def replace_values(self, out: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        heads = self._heads(out).clone()
        v = heads[..., 2, :].reshape(*out.shape[:-1], -1)
        heads[..., 2, :] = fn(v).reshape(*out.shape[:-1], self.n_heads, self.head_dim)
        return heads.reshape(out.shape)

    def key_weight_from(self, weight: torch.Tensor) -> torch.Tensor:
        # fused rows are ordered (head, {q, k, v}, d_head): head h's K rows are h*3d + d .. h*3d + 2d - 1
        return weight.detach().reshape(self.n_heads, 3, self.head_dim, -1)[:, 1]

    def describe(self) -> dict:
        d = super().describe()
        d["values"] = "query_key_value output split (B, T, H, 3, d_head), index 2 (per-head interleaved layout)"
        d["keys"] = "query_key_value output index 1, before rotary embedding; W_K rows h*3d+d .. h*3d+2d-1"
        return d


def adapter_for(model: nn.Module, name: str | None = None) -> Adapter:
    """The adapter registered for ``model.config.model_type`` (or ``name``), else the generic one."""
    if name is not None:
        if name not in ADAPTERS:
            raise ConfigError(f"unknown adapter '{name}'; allowed: {', '.join(sorted(ADAPTERS))}")
        return ADAPTERS[name](model)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    for cls in ADAPTERS.values():
        if model_type in cls.model_types:
            return cls(model)
    return GenericAdapter(model)
