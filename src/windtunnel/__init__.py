"""windtunnel: Bayesian wind tunnels with exact posteriors, and the models trained on them."""

__version__ = "0.1.0"

from windtunnel.compat import install_moved_modules  # noqa: E402  (old module paths, still importable)

install_moved_modules()

#: the public Python API (docs/interop.md), imported on first use: ``import windtunnel`` stays light
#: (no trainer, no pandas); ``windtunnel.load_run`` imports :mod:`windtunnel.interop.api`
_LAZY = ("load_run", "results", "LoadedRun")

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:  # the one import of a higher layer the package root may make (tests/test_layers.py)
        from windtunnel.interop import api

        return getattr(api, name)
    raise AttributeError(f"module 'windtunnel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
