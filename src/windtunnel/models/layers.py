"""The layers every architecture shares, built by the base class from the task's spec: the input
adapter (token embedding or input projection, learned positions) and the output head (categorical
logits or Gaussian mean and log-variance), with the norms and the initialisation they use."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from windtunnel.tasks.base import TaskSpec


def init_normal(module: nn.Module, std: float = 0.02) -> None:
    """N(0, std) weights and zero biases for Linear and Embedding layers (padding rows zero)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()


def make_norm(kind: Literal["layernorm", "rmsnorm"], d: int, eps: float = 1e-5) -> nn.Module:
    return nn.LayerNorm(d, eps=eps) if kind == "layernorm" else nn.RMSNorm(d, eps=eps)


class InputAdapter(nn.Module):
    """Token embedding (``spec.pad_id`` is a zero, untrained row) or ``Linear(input_dim, d)``
    for vector inputs, plus learned absolute positions when ``max_len`` is given.
    ``init="normal"`` draws them from N(0, 0.02); ``"torch"`` keeps PyTorch's defaults."""

    def __init__(self, spec: TaskSpec, d: int, max_len: int | None, init: str = "normal"):
        super().__init__()
        self.kind = spec.input_kind
        if self.kind == "tokens":
            pad = spec.pad_id if spec.pad_id >= 0 else None
            self.tok = nn.Embedding(spec.vocab_size, d, padding_idx=pad)
        else:
            self.tok = nn.Linear(spec.input_dim, d)
        self.pos = nn.Embedding(max_len, d) if max_len is not None else None
        if init == "normal":
            self.apply(init_normal)

    def redraw_tokens(self, std: float) -> None:
        """Draw the token embedding (or input projection) weights again from N(0, std); the
        padding row stays zero."""
        init_normal(self.tok, std=std)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        want = 2 if self.kind == "tokens" else 3
        if inputs.dim() != want:
            raise ValueError(f"{self.kind} inputs must have {want} dimensions, got shape {tuple(inputs.shape)}")
        x = self.tok(inputs)
        if self.pos is not None:
            t = inputs.shape[1]
            if t > self.pos.num_embeddings:
                raise ValueError(f"input length {t} exceeds the position table (max_len {self.pos.num_embeddings})")
            x = x + self.pos.weight[:t]
        return x


class OutputHead(nn.Module):
    """Categorical logits over the answers, or Gaussian (mean, log-variance).

    Untied: a ``Linear`` (with a bias unless ``bias=False``). Tied (``tied``): the embedding rows
    of ``spec.answer_token_ids``. With ``scope="vocab"`` (the authors' TinyGPT: a head tied to
    the whole vocabulary, trained with a softmax over it) the outputs are the same answer logits,
    and a forward pass in training mode (with gradients) also keeps the whole-vocabulary term of
    the loss, the mean over output positions of log sum_vocab exp(z) - log sum_answers exp(z)
    (every token but the padding id in the vocabulary), for
    :meth:`WindModel.pop_auxiliary_loss`: added to the cross-entropy over the answers it makes
    the cross-entropy over the whole vocabulary. The answer distribution is the whole-vocabulary
    one renormalised over the answers (the authors' value slice)."""

    def __init__(self, spec: TaskSpec, d: int, tied: bool = False, scope: str = "answers", bias: bool = True):
        super().__init__()
        self.auxiliary_loss: torch.Tensor | None = None
        if tied:
            self.proj = None
            self.register_buffer("answer_ids", torch.tensor(spec.answer_token_ids), persistent=False)
            others = [] if scope == "answers" else sorted(set(range(spec.vocab_size)) - {spec.pad_id, *spec.answer_token_ids})
            self.register_buffer("other_ids", torch.tensor(others, dtype=torch.long), persistent=False)
        else:
            self.proj = nn.Linear(d, spec.answer_size if spec.output_kind == "categorical" else 2, bias=bias)
            self.answer_ids = self.other_ids = None

    def forward(self, h: torch.Tensor, token_weight: torch.Tensor | None = None) -> torch.Tensor:
        if self.proj is not None:
            return self.proj(h)
        z = F.linear(h, token_weight[self.answer_ids])
        if self.other_ids.numel() and self.training and torch.is_grad_enabled():
            dtype = torch.promote_types(z.dtype, torch.float32)  # float32 at least (under autocast)
            rest = F.linear(h, token_weight[self.other_ids]).to(dtype)
            answers = z.to(dtype).logsumexp(-1)
            self.auxiliary_loss = (torch.logaddexp(answers, rest.logsumexp(-1)) - answers).mean()
        return z
