"""The scorecard's primitives, the tunnel and metric that score each, and the reference
architecture: the names the scorecard's modules share (:mod:`~windtunnel.sweep.primitives`
re-exports them)."""

from __future__ import annotations

#: primitive -> (task, metric scored at the training length), in the scorecard's order
PRIMITIVES: dict[str, tuple[str, str]] = {
    "accumulation": ("bijection", "kl_bayes_model"),
    "transport": ("hmm", "kl_bayes_model"),
    "binding": ("recall", "accuracy"),
    "continuous": ("regression", "kl_bayes_model"),
    "sula": ("sula", "kl_bayes_model"),
    "continuous_transport": ("kalman", "kl_bayes_model"),
    "counting": ("dirichlet", "kl_bayes_model"),
    "revision": ("changepoint", "kl_bayes_model"),
}
#: every model of a scorecard is matched to this architecture's parameter count
REFERENCE = "transformer"
