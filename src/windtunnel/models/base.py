"""The Model contract: configs, the registry, shared input adapters and output heads, capture.

Every architecture is a :class:`WindModel`: built from a :class:`~windtunnel.tasks.TaskSpec` and a
validated config, it maps inputs (``(B, T)`` token ids or ``(B, T, D)`` vectors) to outputs over
the task's answer space at every position, ``(B, T, O)``, or at the requested ``positions`` only,
``(B, P, O)``. ``O`` is ``spec.answer_size`` logits (categorical tasks) or 2 = (mean, log-variance)
(Gaussian tasks). The base class builds the input embedding and the output head from the task's
spec; an architecture writes only its blocks (:meth:`WindModel.build`) and how they mix
(:meth:`WindModel.mix`). Activations are captured by TransformerLens-style names with
:meth:`WindModel.run_with_cache`, at :class:`Tap` modules, the one capture mechanism.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from windtunnel.compat import EarlierContract, deprecated
from windtunnel.config import ConfigError, StrictConfig
from windtunnel.models.capture import ACTIVE, NO_CAPTURE, Capture, Tap  # noqa: F401  (read from here too)
from windtunnel.models.contract import check_model
from windtunnel.models.layers import InputAdapter, OutputHead, init_normal, make_norm  # noqa: F401  (read from here too)
from windtunnel.registry import Registry, is_import_path
from windtunnel.tasks.base import TaskSpec


def can_tie(spec: TaskSpec) -> bool:
    """Whether a head tied to the token embeddings fits ``spec``: token inputs, categorical answers
    that are tokens (``spec.answer_token_ids``)."""
    return spec.input_kind == "tokens" and spec.output_kind == "categorical" and spec.answer_token_ids is not None


class ModelConfig(StrictConfig):
    """Base of every model config. Cross-field and task-dependent checks live in :meth:`resolve`."""

    tie_head: bool = Field(False, description="categorical logits from the embeddings of spec.answer_token_ids")
    tie_scope: Literal["answers", "vocab"] = Field(
        "answers", description="with tie_head, the softmax the training loss takes: over the answer tokens, or over "
                               "every token but the padding id (vocab: the authors' TinyGPT, whose head is tied to the "
                               "whole vocabulary; the outputs are the same answer logits either way)")
    max_len: int | None = Field(None, ge=1, description="rows of the position table; default: the task's seq_len")
    init: Literal["normal", "torch"] = Field(
        "normal", description="normal: embeddings (and the transformer's Linear layers) ~ N(0, 0.02), as GPT-2 and the "
                              "authors' models; torch: PyTorch's defaults (Embedding N(0, 1), Linear Kaiming-uniform)")

    @property
    def has_position_table(self) -> bool:
        """Whether the model has learned absolute positions (so ``max_len`` bounds the context)."""
        return True

    def resolve(self, spec: TaskSpec) -> ModelConfig:
        """This config with task-dependent defaults filled in, checked against ``spec``."""
        cfg = self if self.max_len is not None else self.replace(max_len=spec.seq_len)
        if cfg.has_position_table and cfg.max_len < spec.seq_len:
            raise ConfigError(
                f"context longer than the position table: task '{spec.name}' has seq_len {spec.seq_len} "
                f"but max_len is {cfg.max_len}; allowed: max_len >= {spec.seq_len}")
        if cfg.tie_scope == "vocab" and not cfg.tie_head:
            raise ConfigError("tie_scope='vocab' needs tie_head=True (the softmax over the whole vocabulary is that of "
                              "a head tied to the token embeddings); allowed with tie_head=False: tie_scope='answers'")
        if cfg.tie_head and not can_tie(spec):
            raise ConfigError(f"tie_head=True needs a categorical token task with answer_token_ids; "
                              f"task '{spec.name}' has input_kind={spec.input_kind!r}, "
                              f"output_kind={spec.output_kind!r}, answer_token_ids={spec.answer_token_ids!r}")
        return cfg

    def capacity_knob(self) -> str:
        """The integer field :func:`~windtunnel.models.capacity.match_capacity` varies by default."""
        return "d_model"

    def knob_step(self, knob: str) -> int:
        """Values of ``knob`` must be multiples of this (e.g. d_model of n_heads)."""
        return 1


# ---------------------------------------------------------------------------------------
# The model contract
# ---------------------------------------------------------------------------------------
#: the capture name of layer i's residual/hidden state, the one naming scheme of every architecture
LAYER_STATE = re.compile(r"^blocks\.(\d+)\.resid_post$")


class WindModel(nn.Module):
    """Base of every architecture. Subclasses set ``name`` and ``Config``, build their blocks in
    :meth:`build` (the base class builds ``embed``, an :class:`InputAdapter`, before it, and
    ``head``, an :class:`OutputHead`, after it), implement :meth:`mix`, and place a :class:`Tap`
    at every capture point (the capture names follow from the module tree: :meth:`capture_names`).
    A subclass that initialises its weights its own way does so in its ``__init__``, after
    ``super().__init__``. (A model written to the earlier contract, which builds ``embed`` and
    ``head`` in its own ``__init__`` and records with ``cache.put`` in ``mix(x, cache)``, keeps
    working, deprecated: docs/models.md.)

    Capabilities (what the geometry analyses read; the defaults say "none", an architecture
    that has one overrides it):

    * ``has_attention``: every layer has per-head attention whose rows are weights over the
      earlier positions that sum to 1, captured as ``blocks.{i}.attn.pattern`` (B, H, T, T) with
      ``blocks.{i}.attn.q|k|z`` (B, H, T, dh), and :meth:`attention_output` maps a layer's head
      outputs z to what it writes into the residual stream.
    * ``has_head_ablation``: the ablation hooks, a ``head_mask`` buffer (n_layers, n_heads) that
      scales each head's output, ``set_bypass(layer, "block" | "attn" | "ffn" | None)``, a
      ``bypass`` list and ``clear_ablations()``.
    * ``has_recurrent_state``: the sequence is mixed through a fixed-size state carried from
      position to position (RNN, state space model, linear attention, delta rule).
    * :meth:`key_weights` / :meth:`ov_weights` / :meth:`attention_norm`: per layer, the key
      projection W_K, the OV circuit W_O W_V and the norm in front of the attention, when the
      keys and values are linear maps of the (normed) token embeddings; else None.
    * :attr:`final_norm`: the module applied to the last layer's state before the head, or None.
    * :meth:`layer_state_names`: the per-layer states, ``blocks.{i}.resid_post`` in depth order.
    """

    name: ClassVar[str]
    Config: ClassVar[type[ModelConfig]]
    has_attention: ClassVar[bool] = False
    has_head_ablation: ClassVar[bool] = False
    has_recurrent_state: ClassVar[bool] = False
    #: the embedding is built (and draws its initial weights) before :meth:`build`; False builds
    #: the blocks first (a backbone that draws its own weights first, as Mamba-2's), the embedding
    #: still first in the module tree
    embed_first: ClassVar[bool] = True
    #: what the class keeps of the earlier contract, read once when it is created
    _earlier: ClassVar[EarlierContract] = EarlierContract()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._earlier = EarlierContract.of(cls)

    def __init__(self, spec: TaskSpec, config: ModelConfig | None = None, **params: Any):
        super().__init__()
        if config is not None and params:
            raise ConfigError("pass either a config object or keyword parameters, not both")
        if config is None:
            config = self.Config.build(params, where=f"model '{self.name}'")
        self.spec = spec
        self.config = config.resolve(spec)
        self.embed_tap, self.final_tap = Tap("embed"), Tap("final")
        if type(self).build is not WindModel.build:
            self._build_around(self.config)

    def _build_around(self, c: ModelConfig) -> None:
        """The template: the embedding, the architecture's :meth:`build`, the head."""
        def embedding() -> InputAdapter:
            return InputAdapter(self.spec, self.embed_width(), self.position_rows(), c.init)

        if self.embed_first:
            self.embed = embedding()
            self.build(c)
        else:
            self.build(c)
            self.embed = embedding()
            self._modules = {"embed": self._modules.pop("embed"), **self._modules}
        self.head = OutputHead(self.spec, self.head_width(), tied=c.tie_head, scope=c.tie_scope, bias=self.head_bias())

    def build(self, c: ModelConfig) -> None:
        """Build the architecture's own modules from its resolved config ``c`` (``self.spec`` is the
        task's spec): what :meth:`mix` runs between the embedding and the head."""
        raise NotImplementedError

    def embed_width(self) -> int:
        """The width of the embedding (default ``config.d_model``)."""
        return self.config.d_model

    def head_width(self) -> int:
        """The width of the states the head reads (default: the embedding's)."""
        return self.embed_width()

    def head_bias(self) -> bool:
        """Whether an untied head's ``Linear`` has a bias (default True; the transformer's ``bias`` field)."""
        return True

    def position_rows(self) -> int | None:
        """Rows of the learned position table, None for none (default: ``max_len`` when the
        config's ``has_position_table``)."""
        return self.config.max_len if self.config.has_position_table else None

    def forward(self, inputs: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs ``(B, T, O)``, or ``(B, P, O)`` at ``positions`` (P,) only."""
        if self._earlier.runs_itself:  # a model of the earlier contract that runs itself with a capture
            return self._run(inputs, positions, ACTIVE.get())
        h = self.final_tap(self._mix(self.embed_tap(self.embed(inputs))))
        if positions is not None:
            h = h[:, positions]
        return self.head(h, self.embed.tok.weight)

    def _mix(self, x: torch.Tensor) -> torch.Tensor:
        if self._earlier.mix_takes_capture:  # the earlier contract's mix(x, cache)
            return self.mix(x, ACTIVE.get())
        return self.mix(x)

    def run_with_cache(self, inputs: torch.Tensor, names: Iterable[str] | None = None,
                       positions: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Outputs and the activations at ``names`` (all capture points when None).

        Sequence models capture at all T positions even when ``positions`` is given. A capture
        point that a bypass skips (e.g. the attention of a bypassed block) is absent. Taps record
        only inside this call, and only in the thread that makes it."""
        self.taps()  # named from the module tree as it is now, even where capture_names is the model's own
        valid = self.capture_names()
        names = valid if names is None else list(names)
        unknown = [n for n in names if n not in valid]
        if unknown:
            raise ConfigError(f"unknown capture name(s) {', '.join(unknown)} for model '{self.name}'; "
                              f"valid: {', '.join(valid)}")
        cache = Capture(names)
        token = ACTIVE.set(cache)  # what the taps record into
        try:
            return self.forward(inputs, positions), cache.store
        finally:
            ACTIVE.reset(token)

    def capture_names(self) -> list[str]:
        """Every valid capture name of this model: ``embed`` (the embedded inputs), the path of
        every :class:`Tap` in module order, and ``final`` (the states before the head)."""
        return ["embed", *(name for name, tap in self.taps().items() if not tap.fixed), "final"]

    def taps(self) -> dict[str, Tap]:
        """Every :class:`Tap` of the model by its capture name: its module path (each is told it),
        or the name it was given (``embed``, ``final``)."""
        found = {}
        for path, module in self.named_modules():
            if isinstance(module, Tap):
                if not module.fixed:
                    module.name = path
                found[module.name] = module
        return found

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        """Embedded inputs (B, T, d) -> final-normed states (B, T, d), causally."""
        raise NotImplementedError

    def pop_auxiliary_loss(self) -> torch.Tensor | None:
        """The term the last forward pass in training mode adds to the training loss, forgotten
        once read (the trainer adds it to the task's loss): the whole-vocabulary term of a head
        tied with ``tie_scope="vocab"`` (:class:`OutputHead`); None when there is none."""
        head = getattr(self, "head", None)
        aux = getattr(head, "auxiliary_loss", None)
        if aux is not None:
            head.auxiliary_loss = None
        return aux

    def n_params(self) -> int:
        """Number of trainable parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    # --- capabilities (see the class docstring) ------------------------------------------
    def layer_state_names(self) -> list[str]:
        """The capture names of the per-layer states, ``blocks.{i}.resid_post``, in depth order."""
        return [n for n in self.capture_names() if LAYER_STATE.match(n)]

    @property
    def final_norm(self) -> nn.Module | None:
        """The norm :meth:`mix` applies to the last layer's state before the head (the logit lens
        reads every layer through it). Default: the module named ``norm_f`` or ``norm``, if any;
        override it when the final norm lives elsewhere, or return None when there is none."""
        for attr in ("norm_f", "norm"):
            m = getattr(self, attr, None)
            if isinstance(m, nn.Module):
                return m
        return None

    def key_weights(self, layer: int) -> torch.Tensor | None:
        """W_K of every head of ``layer``, (H, d_head, d) in float64 (keys = x W_K^T of the normed
        layer input x), or None when the keys are no linear map of the layer input."""
        return None

    def ov_weights(self, layer: int) -> torch.Tensor | None:
        """W_O W_V of every head of ``layer``, (H, d, d) in float64, or None."""
        return None

    def attention_norm(self, layer: int) -> nn.Module | None:
        """The norm applied to the residual stream before ``layer``'s attention, or None."""
        return None

    def attention_output(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        """What ``layer``'s attention writes into the residual stream for head outputs
        ``z`` (B, P, H * d_head): (B, P, d). Models with ``has_attention`` implement it."""
        raise NotImplementedError(f"model '{self.name}' has no attention (has_attention is False)")


# ---------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------
def check_model_class(cls: type[WindModel]) -> None:
    """The class rules of a user's ``package.module:Class`` model (the registry has checked that it
    subclasses :class:`WindModel`): a ``Config`` (a :class:`ModelConfig` subclass), ``mix``
    implemented (the capture names are derived: :meth:`WindModel.capture_names`), and
    ``forward(inputs, positions=None)``. What the model does on a task's shapes is checked when it
    is built (:func:`~windtunnel.models.contract.check_model`)."""
    name = cls.name
    config = getattr(cls, "Config", None)
    if not (inspect.isclass(config) and issubclass(config, ModelConfig)):
        raise ConfigError(f"model '{name}' needs a class attribute Config, a subclass of "
                          "windtunnel.models.ModelConfig (its fields are the model's parameters)")
    if cls.mix is WindModel.mix and not cls._earlier.runs_itself:
        raise ConfigError(f"model '{name}' does not implement mix "
                          "(embedded inputs (B, T, d) -> states (B, T, d), causally)")
    if "positions" not in inspect.signature(cls.forward).parameters:
        raise ConfigError(f"model '{name}': forward must accept (inputs, positions=None)")
    if cls.build is WindModel.build or cls._earlier.mix_takes_capture:
        deprecated(f"model '{name}' written to the earlier contract (its own embed and head in __init__, "
                   "or mix(x, cache))", "build(self, c) for the blocks and mix(self, x), with Tap capture points "
                   "(docs/models.md, 'Bring your own architecture')", stacklevel=5)


MODELS: Registry[type[WindModel]] = Registry("model", base=WindModel, check=check_model_class,
                                             guide="see docs/models.md, 'Bring your own architecture'")
register_model = MODELS.register
model_names = MODELS.names


def model_class(name: str) -> type[WindModel]:
    """The architecture registered as ``name``, or a user's ``package.module:Class`` (imported,
    and checked by :func:`check_model_class`; see :mod:`windtunnel.registry`)."""
    return MODELS.get(name)


def make_model(name: str, spec: TaskSpec, params: dict[str, Any] | None = None) -> WindModel:
    """Build a registered architecture (or a user's ``package.module:Class``, whose contract is
    checked on ``spec`` first: :func:`~windtunnel.models.contract.check_model`) from (validated) parameters."""
    cls = model_class(name)
    model = cls(spec, cls.Config.build(params, where=f"model '{name}'"))
    if is_import_path(name) and not any(p.is_meta for p in model.parameters()):  # meta: counting only
        check_model(model, spec)
    return model
