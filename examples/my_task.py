"""A user's own wind tunnel, kept outside the windtunnel package (docs/tasks.md, 'Your own task').

    PYTHONPATH=examples windtunnel train --task my_task:CoinFlip --model lstm
"""
import torch
from pydantic import Field

from windtunnel.infotheory import entropy_bits
from windtunnel.tasks import Batch, HypothesisSpace, Task, TaskConfig, TaskSpec


class CoinFlipConfig(TaskConfig):
    n_flips: int = Field(16, ge=2, le=4096, description="flips per sequence")

    length_field = "n_flips"  # the length the evaluation may change (eval.lengths)


class CoinFlip(Task):
    """Flips of a coin whose bias is drawn uniformly for every sequence; after each flip, predict
    the next one. The exact predictive is Laplace's rule: (heads + 1) / (flips + 2)."""

    name = "coin_flip"  # loaded as my_task:CoinFlip, it is named as written
    Config = CoinFlipConfig
    description = "the next flip of a coin of unknown bias (Laplace's rule of succession)"

    @property
    def spec(self) -> TaskSpec:
        n = self.config.n_flips
        return TaskSpec(name=self.name, input_kind="tokens", seq_len=n, n_scored=n - 1, answer_size=2,
                        output_kind="categorical", loss="ce", vocab_size=3, pad_id=2, answer_token_ids=(0, 1))

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        T, dev = self.config.n_flips, generator.device
        bias = torch.rand(n, 1, generator=generator, device=dev, dtype=torch.float64)
        flips = (torch.rand(n, T, generator=generator, device=dev, dtype=torch.float64) < bias).long()
        heads = flips.cumsum(1)[:, :-1].double()  # heads among flips 0..t, scored at t = 0..T-2
        p_head = (heads + 1) / (torch.arange(1, T, device=dev, dtype=torch.float64) + 2)
        probs = torch.stack([1 - p_head, p_head], -1)  # (B, P, 2): tails, heads
        positions = torch.arange(T - 1, device=dev)
        return Batch(inputs=flips, positions=positions, step=positions + 1, target=flips[:, 1:],
                     entropy=entropy_bits(probs), probs=probs, latent={"bias": bias[:, 0]})

    def hypothesis_space(self) -> HypothesisSpace:
        return HypothesisSpace(float("inf"), "a coin bias in [0, 1]")

    def token_names(self) -> list[str]:
        return ["T", "H", "<pad>"]
