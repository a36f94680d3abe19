"""``tinygpt``: the authors' TinyGPT (Paper I's bijection transformer, their ``src/models/tinygpt.py``)
behind our model contract.

Their forward, block by block: token plus learned absolute position embeddings; pre-norm blocks
``x + attn(RMSNorm(x))``, ``x + mlp(RMSNorm(x))`` with RMSNorm (eps 1e-6, a learned scale, no
bias), fused QKV attention without biases and a causal softmax(QK^T / sqrt(d_head)), a 4x GELU MLP
without biases; a final RMSNorm; the output head tied to the token embedding over the whole
vocabulary; every Linear and Embedding weight N(0, 0.02); dropout 0. That is our
:class:`~windtunnel.models.transformer.Transformer` with other defaults, so ``tinygpt`` is the
transformer class with those defaults as its config (``norm="rmsnorm"``, ``norm_eps=1e-6``,
``bias=False``, ``tie_head=True``, ``tie_scope="vocab"``, ``init="normal"``), the same capture
names, head mask, bypass, key and OV weights, and capacity knob. Every field can be set back to
the transformer's, one at a time (the key-frame study does: ``scripts/keyframe_study.py``).

Our input vocabulary has a padding id the authors' has not (never an input, its embedding row stays
zero, the whole-vocabulary softmax leaves it out), and our outputs are the logits of the task's
answer tokens, the columns of their whole-vocabulary logits (``tests/models/test_tinygpt.py``
checks both against their module on the same weights, when their files are present). On a task
without answer tokens the head is untied unless ``tie_head`` is given. Their pointer-lookup option
(a repo experiment, not Paper I) is not carried.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from windtunnel.models.base import can_tie, register_model
from windtunnel.models.transformer import Transformer, TransformerConfig
from windtunnel.tasks.base import TaskSpec


class TinyGPTConfig(TransformerConfig):
    """The transformer's fields, with the authors' TinyGPT as the defaults."""

    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    norm_eps: float = Field(1e-6, gt=0.0, le=0.1, description="epsilon of every norm (the authors' RMSNorm: 1e-6)")
    bias: bool = Field(False, description="biases in the FFN and an untied head (the authors' TinyGPT: none)")
    tie_head: bool = Field(True, description="output head tied to the token embeddings (the authors': tied)")
    tie_scope: Literal["answers", "vocab"] = Field(
        "vocab", description="with tie_head, the softmax the training loss takes: over every token but the padding "
                             "id (vocab, the authors') or over the answer tokens")

    def resolve(self, spec: TaskSpec) -> TinyGPTConfig:
        """As the transformer's; on a task without answer tokens (vector inputs, Gaussian answers)
        the head is untied unless ``tie_head`` was given."""
        cfg = self
        if "tie_head" not in self.model_fields_set and not can_tie(spec):
            cfg = cfg.replace(tie_head=False, tie_scope="answers")
        return super(TinyGPTConfig, cfg).resolve(spec)


@register_model
class TinyGPT(Transformer):
    """The authors' TinyGPT: the transformer with RMSNorm (eps 1e-6), no biases and a head tied
    to the whole vocabulary (see the module docstring)."""

    name = "tinygpt"
    Config = TinyGPTConfig
