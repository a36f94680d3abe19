"""A model's attention type, read from its config: MHA, GQA or MQA (with the query-to-key/value
head ratio), a sliding window, a mixture of experts; and the group of Paper III's dissociation.

Paper III contrasts multi-head attention (Pythia, Phi-2) with grouped-query attention (Llama-3.2)
and grouped-query attention with a sliding window (Mistral). :func:`classify` puts a model in the
group ``MHA`` (every query head has its own key/value head and no window) or ``GQA/SW`` (shared
key/value heads, MQA included, or a sliding window). A model whose window is longer than every
prompt it saw is still ``GQA/SW`` by its config (as the paper counts Mistral), and the window is
recorded so that a reader can judge that.
"""

from __future__ import annotations

from typing import Any

GROUPS = ("MHA", "GQA/SW")

_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOP_K = ("num_experts_per_tok", "moe_top_k", "num_selected_experts", "top_k")


def classify(n_heads: int, n_kv_heads: int, sliding_window: int | None = None, experts: int | None = None,
             top_k: int | None = None) -> dict[str, Any]:
    """The attention type and group of a model with these head counts, window and experts."""
    kind = "MHA" if n_kv_heads == n_heads else "MQA" if n_kv_heads == 1 else "GQA"
    moe = {"experts": int(experts), "top_k": int(top_k) if top_k else None} if experts and experts > 1 else None
    label = kind if kind == "MHA" else f"{kind} {n_heads}:{n_kv_heads}"
    if sliding_window:
        label += f" + SW {sliding_window}"
    if moe:
        label += f" + MoE {moe['experts']}" + (f" top-{moe['top_k']}" if moe["top_k"] else "")
    return {"attention": kind, "kv_ratio": n_heads / n_kv_heads, "sliding_window": sliding_window, "moe": moe,
            "group": "MHA" if kind == "MHA" and not sliding_window else "GQA/SW", "label": label}


def _first(config: Any, names: tuple[str, ...]) -> Any:
    for n in names:
        v = getattr(config, n, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def architecture(config: Any, n_heads: int, n_kv_heads: int, sliding_window: int | None) -> dict[str, Any]:
    """:func:`classify` of a loaded model (head counts and window as its adapter found them; the
    experts from its config)."""
    return classify(n_heads, n_kv_heads, sliding_window, _first(config, _EXPERTS), _first(config, _TOP_K))


def architecture_of(model_info: dict[str, Any]) -> dict[str, Any]:
    """The architecture recorded in ``llm.json``'s ``model`` (or, for a file written before it was
    recorded, classified from the head counts and window there, without experts)."""
    return model_info.get("architecture") or classify(model_info["n_heads"], model_info["n_kv_heads"],
                                                      model_info.get("sliding_window"))
