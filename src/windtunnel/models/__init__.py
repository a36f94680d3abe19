"""Sequence models behind one contract: a registry of architectures, shared input adapters and
output heads, TransformerLens-style capture, ablations, and capacity matching."""

from windtunnel.models import (  # noqa: F401  (registers them)
    deltanet,
    hybrid,
    linear_attention,
    lstm,
    mamba,
    mamba2,
    mlp,
    tinygpt,
    transformer,
)
from windtunnel.models.base import (  # noqa: F401
    Capture,
    InputAdapter,
    ModelConfig,
    OutputHead,
    Tap,
    WindModel,
    make_model,
    model_class,
    model_names,
    register_model,
)
from windtunnel.models.capacity import count_params, match_capacity  # noqa: F401
from windtunnel.models.contract import check_model  # noqa: F401
