"""windtunnel: Bayesian wind tunnels with exact posteriors, and the models trained on them."""

__version__ = "0.1.0"
