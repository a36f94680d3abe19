"""The analysis registry geometry and llm share: order, names, parsing, temporary registration."""

import pytest

from windtunnel.analysis import Analysis, AnalysisRegistry
from windtunnel.config import ConfigError


def record(name):
    return Analysis(name=name, title=name.title(), run=lambda state: {}, markdown=lambda result, doc: [])


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



def test_callables_are_checked_against_the_one_contract():
    """Every record's callables take the arguments the runners pass (by position): applies(state),
    run(state), markdown(result, doc), plot(result, doc, out_dir); optional extras are allowed."""
    ok = Analysis(name="ok", title="Ok", run=lambda state, n_null=200: {}, markdown=lambda result, doc: ["x"],
                  plot=lambda result, doc, out_dir: [], applies=lambda state: None)
    assert ok.markdown({}, {}) == ["x"]
    bad = {"markdown": {"markdown": lambda result: []},
           "plot": {"plot": lambda doc, result, out_dir, extra: []},
           "run": {"run": lambda: None},
           "applies": {"applies": lambda state, ctx: None}}
    for part, change in bad.items():
        kw = {"run": lambda state: {}, "markdown": lambda result, doc: [], **change}
        with pytest.raises(TypeError, match=rf"analysis 'bad': {part}\(.*cannot be called as {part}\("):
            Analysis(name="bad", title="Bad", **kw)
    with pytest.raises(TypeError, match="markdown must be callable"):
        Analysis(name="bad", title="Bad", run=lambda state: {}, markdown=None)


def test_every_built_in_analysis_conforms_and_is_named_as_its_module():
    """geometry's and llm's records pass the contract check, and each lives in the module of its name."""
    from windtunnel.geometry.diagnose import REGISTRY as GEOMETRY
    from windtunnel.llm.analyses import REGISTRY as LLM

    for reg, package in ((GEOMETRY, "windtunnel.geometry"), (LLM, "windtunnel.llm.analyses")):
        for a in reg:
            assert a.run.__module__ == f"{package}.{a.name}", (a.name, a.run.__module__)


def test_plot_all_calls_every_plot_with_result_doc_and_folder(tmp_path):
    seen = []

    def plot(result, doc, out_dir):
        seen.append((result, doc["model"], out_dir))
        return [out_dir / "a.png"]

    reg = AnalysisRegistry([record("zeta"), Analysis(name="alpha", title="A", run=lambda s: {},
                                                     markdown=lambda result, doc: [], plot=plot)])
    doc = {"model": "m", "results": {"zeta": {"z": 1}, "alpha": {"a": 2}}}
    assert reg.plot_all(doc, tmp_path / "plots") == [tmp_path / "plots" / "a.png"]
    assert seen == [({"a": 2}, "m", tmp_path / "plots")] and (tmp_path / "plots").is_dir()
