"""The analysis registry geometry and llm share: order, names, parsing, temporary registration."""

import pytest

from windtunnel.analysis import Analysis, AnalysisRegistry
from windtunnel.config import ConfigError


def record(name):
    return Analysis(name=name, title=name.title(), run=lambda state: {}, markdown=lambda r: [])


def test_order_is_registration_order_and_parse_validates():
    reg = AnalysisRegistry([record("zeta"), record("alpha")])
    assert reg.names() == ["zeta", "alpha"] and [a.name for a in reg] == ["zeta", "alpha"]
    assert reg.get("alpha").applies(None) is None and reg.get("alpha").plot is None
    assert reg.parse(" alpha, zeta,alpha ,") == ["alpha", "zeta"]
    with pytest.raises(ConfigError, match="unknown analysis 'beta'; allowed: zeta, alpha"):
        reg.parse(["beta"])
    with pytest.raises(ConfigError, match="empty"):
        reg.parse(" , ")
    with pytest.raises(ConfigError, match="unknown analysis 'beta'; available: zeta, alpha"):
        reg.get("beta")


def test_register_and_unregister():
    reg = AnalysisRegistry([record("a")])
    b = reg.register(record("b"))
    assert reg.names() == ["a", "b"] and reg.get("b") is b
    with pytest.raises(ValueError, match="already registered"):
        reg.register(record("b"))
    reg.unregister("b")
    assert reg.names() == ["a"]
    with pytest.raises(ConfigError):
        reg.unregister("b")
