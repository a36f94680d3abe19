"""Batched forward passes that keep only what the analyses need, at the last position.

What a pass keeps is a :class:`Keep`; how the prompts are fed, a :class:`Batching`.
Prompts are tokenised one by one (so the run controls BOS and truncation exactly), sorted by
length, left padded into batches and run with ``use_cache=False``. Forward hooks read:

- values and keys: the value/key projection output at the **last position** only
  (B, n_kv x d_head), moved to the CPU in float32;
- attention: the attention module's weights (B, H, T, S), reduced *inside the hook* to per-head
  entropy (bits), entropy normalised by log2 of the number of attendable keys, and the mass on
  the first real token (the sink), so no T x T matrix outlives its layer;
- the final decoder layer's output at the last position (the residual stream), on request;
- the next-token logits at the last position only (``logits_to_keep=1`` where the model
  supports it); their full-vocabulary entropy in bits and, on request, the probabilities of
  given label tokens.

With left padding every row's last real token sits at index T-1 (checked); position ids are
computed from the attention mask so padding does not shift positions. Interventions (functions
of the concatenated values) run in the same hook before the values are read, at all positions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from windtunnel.config import ConfigError
from windtunnel.infotheory import entropy_bits
from windtunnel.llm.loading import LoadedModel

ValueFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Keep:
    """What one pass keeps besides every prompt's next-token entropy: the values and the keys at
    these layers, the attention statistics (read at the final query, or averaged over ``all``
    queries: ``attention_positions``), the probabilities of these label tokens, and the final
    decoder layer's output (``residual``)."""

    value_layers: Sequence[int] = ()
    key_layers: Sequence[int] = ()
    attention: bool = False
    attention_positions: str = "final"
    label_ids: Sequence[int] | None = None
    residual: bool = False


@dataclass(frozen=True)
class Batching:
    """How the prompts are fed: BOS per ``add_bos`` (auto = the tokenizer's default, always,
    never), each cut to its last ``max_tokens`` tokens, ``batch_size`` prompts a forward pass."""

    batch_size: int = 16
    add_bos: str = "auto"
    max_tokens: int = 256


@dataclass
class PromptCapture:
    """Per-prompt results of one pass over a prompt list (rows in the order given)."""

    n: int
    lengths: np.ndarray  # (N,) tokens including BOS
    bos_added: np.ndarray  # (N,) bool
    next_entropy: np.ndarray  # (N,) bits, full vocabulary, final position
    values: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> (N, n_kv*d_head)
    keys: dict[int, np.ndarray] = field(default_factory=dict)
    attn_entropy: np.ndarray | None = None  # (N, L, H) bits
    attn_entropy_norm: np.ndarray | None = None  # (N, L, H) entropy / log2(#attendable)
    sink_mass: np.ndarray | None = None  # (N, L, H) attention on the first real token
    label_probs: np.ndarray | None = None  # (N, n_labels) full-vocabulary probabilities
    residual: np.ndarray | None = None  # (N, d_model) final decoder-layer output
    attention_positions: str = "final"


def encode(lm: LoadedModel, prompts: Sequence[str], add_bos: str = "auto", max_tokens: int = 256
           ) -> tuple[list[list[int]], list[bool]]:
    """Token ids of every prompt; BOS per ``add_bos`` (auto = tokenizer default); longer prompts
    keep their last ``max_tokens`` tokens (and their BOS)."""
    tok = lm.tokenizer
    bos = tok.bos_token_id
    out, added = [], []
    for text in prompts:
        if add_bos == "auto":
            ids = tok(text, add_special_tokens=True)["input_ids"]
            # a tokenizer that appends EOS would put it at the read-out position: drop it
            if tok.eos_token_id is not None and len(ids) > 1 and ids[-1] == tok.eos_token_id and \
                    tok(text, add_special_tokens=False)["input_ids"][-1:] != [tok.eos_token_id]:
                ids = ids[:-1]
        else:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            if add_bos == "always":
                if bos is None:
                    raise ConfigError("field 'add_bos' = 'always': this tokenizer has no BOS token; allowed: auto, never")
                ids = [bos] + ids
        has_bos = bos is not None and len(ids) > 0 and ids[0] == bos
        if len(ids) > max_tokens:
            ids = ([bos] + ids[-(max_tokens - 1):]) if has_bos else ids[-max_tokens:]
        if not ids:
            raise ConfigError(f"prompt {text!r} has no tokens")
        out.append(list(ids))
        added.append(bool(has_bos))
    return out, added


def _accepts(model, name: str) -> bool:
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


def _check_layers(ad, value_layers: Sequence[int], key_layers: Sequence[int], intervention_layers: Sequence[int]) -> None:
    """A ConfigError for any layer outside the model."""
    for name, layers in (("value layer", value_layers), ("key layer", key_layers),
                         ("intervention layer", intervention_layers)):
        bad = [i for i in layers if not 0 <= int(i) < ad.n_layers]
        if bad:
            raise ConfigError(f"{name} {bad} out of range; allowed: 0 <= layer <= {ad.n_layers - 1}")


def attention_stats(w: torch.Tensor, first: torch.Tensor, real: torch.Tensor, sliding_window: int | None,
                    positions: str = "final") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row and head of one layer's left-padded attention weights ``w`` (B, H, T, S): the
    entropy in bits, the entropy over log2 of the number of attendable keys, and the last query's
    mass on the first real token (index ``first``; ``real`` real tokens per row). ``positions``:
    ``final`` reads the last query only, ``all`` averages every real query after the entropy
    (row 0, with one key, left out of the normalised mean)."""
    n_att = real if sliding_window is None else real.clamp(max=sliding_window)
    last = w[:, :, -1, :].double()  # (B, H, S)
    if positions == "final":
        h = entropy_bits(last)  # (B, H)
        norm = torch.where(n_att[:, None] > 1, h / torch.log2(n_att[:, None].double().clamp(min=2)),
                           torch.zeros_like(h))
    else:
        T = w.shape[-1]
        hw = entropy_bits(w.double())  # (B, H, T)
        t_idx = torch.arange(T, device=w.device)
        qpos = t_idx[None, :] - first[:, None]  # position of the query among real tokens
        valid = qpos >= 0
        att = (qpos + 1).clamp(min=1)
        if sliding_window is not None:
            att = att.clamp(max=sliding_window)
        hw_valid = hw * valid[:, None]
        h = hw_valid.sum(-1) / valid.sum(-1)[:, None]
        nvalid = valid & (att > 1)
        norm = (hw * nvalid[:, None] / torch.log2(att.double().clamp(min=2))[:, None]).sum(-1) \
            / nvalid.sum(-1).clamp(min=1)[:, None]
    sink = last.gather(-1, first[:, None, None].expand(-1, last.shape[1], 1))[..., 0]
    return h, norm, sink


class _Recorder:
    """The arrays one pass fills (one row per prompt) and the forward hooks that fill them with
    the rows of the batch in flight (:meth:`start_batch`)."""

    def __init__(self, lm: LoadedModel, n: int, keep: Keep, interventions: dict[int, ValueFn]):
        ad = self.ad = lm.adapter
        self.keep = keep
        self.values = {int(i): np.zeros((n, ad.value_dim), np.float32) for i in keep.value_layers}
        self.keys = {int(i): np.zeros((n, ad.value_dim), np.float32) for i in keep.key_layers}
        L, H = ad.n_layers, ad.n_heads
        self.ent = np.zeros((n, L, H)) if keep.attention else None
        self.ent_norm = np.zeros((n, L, H)) if keep.attention else None
        self.sink = np.zeros((n, L, H)) if keep.attention else None
        self.next_entropy = np.zeros(n)
        self.label_probs = np.zeros((n, len(keep.label_ids))) if keep.label_ids is not None else None
        self.residual = np.zeros((n, ad.d_model), np.float32) if keep.residual else None
        self.interventions = interventions
        self.rows: torch.Tensor | None = None
        self.first: torch.Tensor | None = None
        self.real: torch.Tensor | None = None
        self.missing: str | None = None  # an attention module that returned no weights

    def start_batch(self, rows: np.ndarray, mask: torch.Tensor) -> None:
        """The next forward runs the prompts ``rows``, left padded as ``mask`` (B, T) says."""
        real = mask.sum(-1)
        self.rows, self.first, self.real = torch.as_tensor(rows), mask.shape[1] - real, real
        self.missing = None

    def value_hook(self, i: int):
        def hook(mod, args, out):
            fn = self.interventions.get(i)
            if fn is not None:
                out = self.ad.replace_values(out, lambda v: fn(v.float()).to(v.dtype))
            if i in self.values:
                self.values[i][self.rows] = self.ad.values_from_output(out[:, -1]).float().cpu().numpy()
            if i in self.keys:
                self.keys[i][self.rows] = self.ad.keys_from_output(out[:, -1]).float().cpu().numpy()
            return out if fn is not None else None
        return hook

    def key_hook(self, i: int):
        def hook(mod, args, out):
            self.keys[i][self.rows] = self.ad.keys_from_output(out[:, -1]).float().cpu().numpy()
        return hook

    def attn_hook(self, i: int):
        def hook(mod, args, out):
            w = out[1] if isinstance(out, tuple) and len(out) > 1 else None
            if w is None or not torch.is_tensor(w) or w.dim() != 4:
                self.missing = type(mod).__name__  # older transformers: only with output_attentions=True
                return
            first, real = self.first.to(w.device), self.real.to(w.device)  # device_map: any device
            h, norm, sink = attention_stats(w, first, real, self.ad.sliding_window, self.keep.attention_positions)
            self.ent[self.rows, i] = h.cpu().numpy()
            self.ent_norm[self.rows, i] = norm.cpu().numpy()
            self.sink[self.rows, i] = sink.cpu().numpy()
        return hook

    def residual_hook(self, mod, args, out):
        hs = out[0] if isinstance(out, tuple) else out
        self.residual[self.rows] = hs[:, -1].float().cpu().numpy()

    def install(self) -> list:
        """Register every hook this pass needs; returns the handles (remove them when done)."""
        ad = self.ad
        hooks = []
        for i in sorted({int(x) for x in (*self.values, *self.keys, *self.interventions)}):
            hooks.append(ad.value_module(i).register_forward_hook(self.value_hook(i)))
            if ad.key_module(i) is not ad.value_module(i) and i in self.keys:
                hooks.append(ad.key_module(i).register_forward_hook(self.key_hook(i)))
        if self.keep.attention:
            for i in range(ad.n_layers):
                hooks.append(ad.attention(i).register_forward_hook(self.attn_hook(i)))
        if self.residual is not None:
            hooks.append(ad.layers[-1].register_forward_hook(self.residual_hook))
        return hooks


def _left_padded(ids: list[list[int]], lengths: np.ndarray, rows: np.ndarray, pad: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompts ``rows`` as one left-padded batch: input ids and attention mask (B, T)."""
    T = int(lengths[rows].max())
    inp = torch.full((len(rows), T), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), T), dtype=torch.long)
    for r, j in enumerate(rows):
        inp[r, T - lengths[j]:] = torch.tensor(ids[j])
        mask[r, T - lengths[j]:] = 1
    assert bool(mask[:, -1].all()), "left padding must end every row with a real token"
    return inp, mask


def _forward_all(lm: LoadedModel, ids: list[list[int]], lengths: np.ndarray, rec: _Recorder, batch_size: int) -> None:
    """Run every prompt through the model, longest first in batches, with ``rec``'s hooks
    installed; the next-token entropy (and label probabilities) at the last position into ``rec``."""
    model = lm.model
    dev = lm.input_device
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    kw = {"use_cache": False}
    if _accepts(model, "logits_to_keep"):
        kw["logits_to_keep"] = 1
    pos_ok = _accepts(model, "position_ids")
    attention, label_ids = rec.keep.attention, rec.keep.label_ids
    label_t = torch.tensor(list(label_ids), device="cpu") if label_ids is not None else None
    order = np.argsort(-lengths, kind="stable")  # longest first: less padding, memory peak early
    hooks = rec.install()
    try:
        with torch.inference_mode():
            for start in range(0, len(ids), batch_size):
                rows = order[start:start + batch_size]
                inp, mask = _left_padded(ids, lengths, rows, pad)
                rec.start_batch(rows, mask)
                args = {"input_ids": inp.to(dev), "attention_mask": mask.to(dev), **kw}
                if pos_ok:
                    args["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0).to(dev)
                logits = model(**args).logits[:, -1].double().cpu()
                if attention and rec.missing:
                    if kw.get("output_attentions"):
                        raise ConfigError(f"attention module {rec.missing} returned no attention weights; the "
                                          "model must run with attn_implementation='eager'")
                    kw["output_attentions"] = True  # transformers < 5 returns weights only when asked
                    rec.missing = None
                    logits = model(**{**args, "output_attentions": True}).logits[:, -1].double().cpu()
                    if rec.missing:
                        raise ConfigError(f"attention module {rec.missing} returned no attention weights; "
                                          "the model must run with attn_implementation='eager'")
                logp = torch.log_softmax(logits, -1)
                rec.next_entropy[rows] = entropy_bits(logp.exp()).numpy()
                if rec.label_probs is not None:
                    rec.label_probs[rows] = logp[:, label_t].exp().numpy()
                del logits, logp
    finally:
        for h in hooks:
            h.remove()


def run_prompts(lm: LoadedModel, prompts: Sequence[str], keep: Keep = Keep(), batching: Batching = Batching(), *,
                interventions: dict[int, ValueFn] | None = None) -> PromptCapture:
    """One batched pass over ``prompts`` keeping what ``keep`` says, fed as ``batching`` says,
    with ``interventions`` ({layer: function of the values}) applied; see the module docstring."""
    interventions = interventions or {}
    _check_layers(lm.adapter, keep.value_layers, keep.key_layers, list(interventions))
    ids, bos_added = encode(lm, prompts, batching.add_bos, batching.max_tokens)
    lengths = np.array([len(x) for x in ids])
    rec = _Recorder(lm, len(ids), keep, interventions)
    _forward_all(lm, ids, lengths, rec, batching.batch_size)
    return PromptCapture(n=len(ids), lengths=lengths, bos_added=np.array(bos_added), next_entropy=rec.next_entropy,
                         values=rec.values, keys=rec.keys, attn_entropy=rec.ent, attn_entropy_norm=rec.ent_norm,
                         sink_mass=rec.sink, label_probs=rec.label_probs, residual=rec.residual,
                         attention_positions=keep.attention_positions)
