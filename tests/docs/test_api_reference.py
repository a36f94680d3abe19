"""The API and config reference (docs/api.md, docs/config.md) is Markdown generated from the code by
scripts/render_api.py: the committed pages are a fresh rendering, they cover the public API, and
no page is left with a bare mkdocstrings directive that only the site could read."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("render_api", ROOT / "scripts" / "render_api.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_pages_are_a_fresh_rendering():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_api.py"), "--check"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_stale_page_is_told_apart():
    render = _script()
    page = (ROOT / "docs" / "api.md").read_text()
    assert render.fill(page, "docs/api.md") == page
    emptied = re.sub(r"(<!-- reference:api -->\n).*?(<!-- /reference -->)", r"\1\2", page, flags=re.S)
    assert emptied != page and render.fill(emptied, "docs/api.md") == page
    with pytest.raises(SystemExit, match="no reference 'nothing'"):
        render.fill("<!-- reference:nothing -->\n<!-- /reference -->\n", "x.md")


def _exports(module: str) -> list[str]:
    """The public names a package offers: its __all__, or what its __init__ imports."""
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None) or [n for n, v in vars(mod).items() if not n.startswith("_")
                                             and not isinstance(v, type(sys)) and n not in ("annotations",)]
    return [n for n in names if n != "__version__"]


ISSUE_NAMES = ["run_llm", "LLMOptions", "run_comparison", "CompareConfig", "make_model", "count_params", "resolve_run",
               "parse_overrides", "RunDir"]


@pytest.mark.parametrize("module", ["windtunnel", "windtunnel.llm", "windtunnel.geometry", "windtunnel.tasks",
                                    "windtunnel.models", "windtunnel.sweep"])
def test_every_exported_name_has_a_section(module):
    headings = set(re.findall(r"^### (\S+)$", (ROOT / "docs" / "api.md").read_text(), re.M))
    missing = [n for n in _exports(module) if n not in headings]
    assert not missing, f"docs/api.md has no section for {module}'s {missing}: add them to scripts/render_api.py's API"


def test_the_named_entry_points_have_a_section_with_a_docstring():
    text = (ROOT / "docs" / "api.md").read_text()
    for name in ISSUE_NAMES:
        section = re.search(rf"^### {name}\n(.*?)(?=^###? |\Z)", text, re.M | re.S)
        assert section, f"docs/api.md has no section for {name}"
        prose = [line for line in section[1].splitlines() if line and not line.startswith(("`", "```", "*", "    "))]
        assert prose, f"docs/api.md's {name} has no description"


def test_every_config_field_is_listed():
    from windtunnel.llm.config import LLMOptions
    from windtunnel.sweep.config import SweepConfig
    from windtunnel.train.config import RunConfig, TrainConfig

    text = (ROOT / "docs" / "config.md").read_text()
    for cls in (RunConfig, TrainConfig, SweepConfig, LLMOptions):
        section = re.search(rf"^#### {cls.__name__}\n(.*?)(?=^####? |\Z)", text, re.M | re.S)
        assert section, f"docs/config.md has no section for {cls.__name__}"
        rows = re.findall(r"^\| `(\w+)` \|", section[1], re.M)
        assert rows == list(cls.model_fields), f"{cls.__name__}: the page lists {rows}"


def test_no_page_holds_a_bare_directive():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    bare = [f"{p.relative_to(ROOT)}:{i}" for p in pages for i, line in enumerate(p.read_text().splitlines(), 1)
            if line.startswith(":::")]
    assert not bare, f"mkdocstrings directives, unreadable on the repository's page: {bare}"


def test_docstrings_become_markdown():
    render = _script()
    doc = """The :func:`~windtunnel.train.config.resolve_run` of a :class:`RunConfig`, ``x`` set.

    Run it::

        windtunnel train --set train.steps=5

    Then read ``eval.json``."""
    assert render.markdown(doc) == ("The `resolve_run` of a `RunConfig`, `x` set.\n\nRun it:\n\n```text\n"
                                    "windtunnel train --set train.steps=5\n```\n\nThen read `eval.json`.")
    assert render.markdown(None) == ""
    assert render.markdown("plain `code` stays") == "plain `code` stays"
