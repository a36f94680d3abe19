"""Next-symbol streams: a start token, then symbols 0..n-1, every position predicting the next.

The layout that ``dirichlet`` and ``changepoint`` share: the model reads ``<start> x_1 ...
x_{N-1}`` and is scored at every position, the start token predicting x_1 and each x_t
predicting x_{t+1}. The symbols are token ids 0..n-1 (the answer tokens, so tied heads and the
key-frame analysis use them), the start token is n and the padding id n + 1 never occurs. The
Dirichlet-categorical predictive over the counts so far is the building block of both tasks.
"""

from __future__ import annotations

from typing import Literal

import torch

from windtunnel.tasks.base import TaskSpec


def stream_spec(name: str, n_symbols: int, length: int, loss: Literal["ce", "soft_ce"]) -> TaskSpec:
    """The spec of a stream of ``length`` symbols out of ``n_symbols``, every position scored."""
    return TaskSpec(
        name=name,
        input_kind="tokens",
        seq_len=length,
        n_scored=length,
        answer_size=n_symbols,
        output_kind="categorical",
        loss=loss,
        vocab_size=n_symbols + 2,
        pad_id=n_symbols + 1,
        answer_token_ids=tuple(range(n_symbols)),
    )


def stream_inputs(symbols: torch.Tensor, n_symbols: int) -> torch.Tensor:
    """The tokens the model reads for symbols (B, N): ``<start>`` (id n_symbols), then x_1..x_{N-1}."""
    start = torch.full((symbols.shape[0], 1), n_symbols, dtype=torch.long, device=symbols.device)
    return torch.cat([start, symbols[:, :-1]], dim=1)


def counts_before(symbols: torch.Tensor, n_symbols: int) -> torch.Tensor:
    """Counts of each symbol before every position: symbols (B, N) long in 0..n-1 -> (B, N, n)
    float64, row t counting x_1..x_t (1-based; row 0 is all zeros)."""
    onehot = torch.nn.functional.one_hot(symbols, n_symbols).to(torch.float64)
    return torch.cat([torch.zeros_like(onehot[:, :1]), onehot[:, :-1].cumsum(1)], dim=1)


def predictive(counts: torch.Tensor, alpha: float) -> torch.Tensor:
    """The Dirichlet-categorical posterior predictive (n_k + alpha) / (n + K alpha) for counts
    (..., K), in float64."""
    counts = counts.to(torch.float64)
    return (counts + alpha) / (counts.sum(-1, keepdim=True) + counts.shape[-1] * alpha)
