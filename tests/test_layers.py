"""The package's layers, held: every import inside ``windtunnel`` points down (or stays in its package).

Layers, bottom to top::

    leaf helpers (the modules at the package root: config, files, tables, figures, stats, ...)
    -> tasks -> models | evaluate -> train -> geometry | llm -> sweep -> report -> cli

A package may import its own modules and anything in a lower layer; never a higher layer, and
never its sibling in the same layer (``models`` and ``evaluate``; ``geometry`` and ``llm``).
Every import counts: module-level, inside functions, and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import windtunnel

SRC = Path(windtunnel.__file__).resolve().parent

# Packages by layer; the number is the height. Modules at the package root are leaf helpers
# (height 0) unless named here.
LAYERS: dict[str, int] = {
    "tasks": 1,
    "models": 2, "evaluate": 2,
    "train": 3,
    "geometry": 4, "llm": 4,
    "sweep": 5,
    "report": 6,
    "cli": 7,
}
LEAF = 0


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit(module: str) -> str:
    """The layer unit of a module: its package under ``windtunnel`` (``geometry``), its own name
    for a module at the root (``files``), or ``""`` for the ``windtunnel`` package itself."""
    parts = module.split(".")
    u = parts[1] if len(parts) > 1 else ""
    return "cli" if u == "__main__" else u  # `python -m windtunnel` is the command line


def height(u: str) -> int:
    return LAYERS.get(u, LEAF)


def imports(path: Path, src: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every ``windtunnel`` import in ``path``; ``from a import b``
    yields ``a.b`` as well when ``b`` is a submodule, so ``from windtunnel import stats`` counts
    as an import of ``windtunnel.stats``."""
    module = module_name(path, src)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            for a in node.names:
                sub = src.parent / Path(*target.split("."), a.name)
                if sub.with_suffix(".py").exists() or sub.is_dir():
                    found.append((node.lineno, f"{target}.{a.name}"))
    return [(line, name) for line, name in found if name == "windtunnel" or name.startswith("windtunnel.")]


def violations(src: Path = SRC) -> list[str]:
    """One line per import against the layers, naming the module, the file and line, and the import."""
    out = []
    for path in sorted(src.rglob("*.py")):
        module = module_name(path, src)
        mine = unit(module)
        for line, target in imports(path, src):
            theirs = unit(target)
            if theirs == mine or target == "windtunnel":  # own package; the root's __version__
                continue
            if height(theirs) > height(mine):
                why = f"{theirs} is above {mine or 'the package root'}"
            elif height(theirs) == height(mine) and height(mine) != LEAF:
                why = f"{theirs} and {mine} are siblings and must not import each other"
            else:  # below, or between two leaf helpers
                continue
            rel = path.relative_to(src.parent)
            out.append(f"{module} ({rel}:{line}) imports {target}: {why}")
    return out


def test_imports_follow_the_layers():
    bad = violations()
    assert not bad, "imports against the layers (see tests/test_layers.py for the order):\n  " + "\n  ".join(bad)


def test_every_package_has_a_layer():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), f"packages without a layer in tests/test_layers.py: {sorted(packages - set(LAYERS))}"


def test_the_check_catches_an_upward_and_a_sideways_import(tmp_path):
    """The checker itself: a function-level import of report from train, and geometry from llm."""
    fake = tmp_path / "windtunnel"
    for pkg in ("train", "report", "geometry", "llm"):
        (fake / pkg).mkdir(parents=True)
        (fake / pkg / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "report" / "page.py").write_text("")
    (fake / "geometry" / "stats.py").write_text("")
    (fake / "train" / "loop.py").write_text("def f():\n    from windtunnel.report.page import x\n")
    (fake / "llm" / "pca.py").write_text("from windtunnel.geometry import stats\n")
    bad = violations(fake)
    assert any("windtunnel.train.loop" in b and "windtunnel.report.page" in b and "report is above train" in b
               for b in bad), bad
    assert any("windtunnel.llm.pca" in b and "windtunnel.geometry.stats" in b and "siblings" in b for b in bad), bad
