"""SULA as a token task for small models (Paper III's noisy-label evidence task).

Every sequence has a hidden class y in {L1, L2} (uniform prior). Each of k examples is a
decorative carrier word followed by a noisy label that equals y with probability alpha
(0.9). The sequence is ``[w_1, l_1, w_2, l_2, ..., w_k, l_k, w_q]``; at every word (the
carriers and the final query word) the model predicts the class given the labels before it.
After j labels with n1 of them L1 and n2 of them L2 the exact posterior is
p(L1) = sigmoid((n1 - n2) ln(alpha / (1 - alpha))). Scoring every word gives the whole
trajectory k = 0..k_max in one sequence; the query word is the Paper III test position.
The carrier words are Paper III's 35 positive and 35 negative sentiment words; they carry no
information about y.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field, model_validator

from windtunnel.infotheory import entropy_bits
from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task, uniform_probs

CARRIER_WORDS = (
    "happy joyful excited cheerful delighted pleased content satisfied glad thrilled wonderful excellent "
    "fantastic amazing great beautiful lovely pleasant enjoyable terrific brilliant fabulous superb marvelous "
    "splendid peaceful calm relaxed serene tranquil optimistic hopeful confident proud grateful "
    "sad angry upset annoyed frustrated disappointed unhappy miserable depressed gloomy terrible awful horrible "
    "dreadful bad ugly unpleasant disagreeable nasty disgusting worried anxious nervous stressed tense tired "
    "exhausted weary fatigued drained bitter resentful hostile hateful cruel"
).split()


class SULAConfig(TaskConfig):
    k: int = Field(8, ge=0, le=1024, description="number of labelled examples before the query word")
    alpha: float = Field(0.9, gt=0.5, lt=1.0, description="probability that an example's label equals the class")
    n_words: int = Field(70, ge=1, le=4096, description="carrier vocabulary size (first 70 are Paper III's words)")
    labels: tuple[str, str] = Field(("dax", "lug"), description="names of the two label tokens")

    length_field = "k"
    presets = {"paper": {}, "small": {"k": 8, "n_words": 16}}

    @model_validator(mode="after")
    def _check(self):
        if self.labels[0] == self.labels[1]:
            raise ValueError(f"labels must be two different names, got {self.labels}")
        return self


@register_task
class SULATask(Task):
    name = "sula"
    Config = SULAConfig
    description = "infer a hidden binary class from noisy labels (evidence counting)"
    baseline_names = ("uniform", "last_label")

    @property
    def spec(self) -> TaskSpec:
        c = self.config
        return TaskSpec(
            name=self.name,
            input_kind="tokens",
            seq_len=2 * c.k + 1,
            n_scored=c.k + 1,
            answer_size=2,
            output_kind="categorical",
            loss="ce",
            vocab_size=c.n_words + 3,
            pad_id=c.n_words + 2,
            answer_token_ids=(c.n_words, c.n_words + 1),
        )

    def hypothesis_space(self) -> HypothesisSpace:
        c = self.config
        return HypothesisSpace(
            math.log10(2),
            f"2 classes; the {2 ** c.k} label patterns are noisy evidence, counting them is the only way to be right",
        )

    def posterior(self, labels: torch.Tensor) -> torch.Tensor:
        """p(class | first j labels) for j = 0..k: labels (n, k) in {0, 1} -> (n, k+1, 2)."""
        c = self.config
        n = labels.shape[0]
        sign = 1 - 2 * labels.double()  # +1 for L1 (label 0), -1 for L2
        margin = torch.cat([torch.zeros(n, 1, dtype=torch.float64, device=labels.device), sign.cumsum(1)], dim=1)
        p1 = torch.sigmoid(margin * math.log(c.alpha / (1 - c.alpha)))
        return torch.stack([p1, 1 - p1], dim=-1)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c = self.config
        dev = generator.device
        y = torch.randint(0, 2, (n,), generator=generator, device=dev)
        flip = torch.rand(n, c.k, generator=generator, device=dev, dtype=torch.float64) >= c.alpha
        labels = torch.where(flip, 1 - y[:, None], y[:, None])
        words = torch.randint(0, c.n_words, (n, c.k + 1), generator=generator, device=dev)
        probs = self.posterior(labels)
        inputs = torch.empty(n, 2 * c.k + 1, dtype=torch.long, device=dev)
        inputs[:, 0::2] = words
        inputs[:, 1::2] = labels + c.n_words
        return Batch(
            inputs=inputs,
            positions=torch.arange(0, 2 * c.k + 1, 2, device=dev),
            step=torch.arange(1, c.k + 2, device=dev),
            target=y[:, None].expand(n, c.k + 1).contiguous(),
            probs=probs,
            entropy=entropy_bits(probs),
            latent={"class": y, "labels": labels, "words": words},
        )

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        c = self.config
        labels = batch.latent["labels"]
        n = labels.shape[0]
        last = torch.full((n, c.k + 1, 2), 0.5, dtype=torch.float64, device=labels.device)
        if c.k:
            onehot = torch.nn.functional.one_hot(labels, 2).double()
            last[:, 1:] = c.alpha * onehot + (1 - c.alpha) * (1 - onehot)
        return {
            "uniform": Prediction(probs=uniform_probs((n, c.k + 1), 2, labels.device)),
            # a recency heuristic: trusts only the latest label
            "last_label": Prediction(probs=last),
        }

    def hypothesis_tokens(self) -> tuple[list[int], str] | None:
        """The two label tokens."""
        n = self.config.n_words
        return [n, n + 1], "the two label tokens"

    def token_names(self) -> list[str]:
        c = self.config
        words = [CARRIER_WORDS[i] if i < len(CARRIER_WORDS) else f"w{i}" for i in range(c.n_words)]
        return words + list(c.labels) + ["<pad>"]
