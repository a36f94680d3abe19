"""The package's layers, held: every import inside ``windtunnel`` points down (or stays in its
package), and no modules import each other in a circle.

Layers, bottom to top::

    leaf helpers (the modules at the package root: config, files, tables, figures, stats, ...)
    -> tasks -> models | evaluate -> train -> engine -> geometry | llm -> sweep -> tune -> scorecard
    -> report | interop -> cli

A package may import its own modules and anything in a lower layer; never a higher layer, and
never its sibling in the same layer (``models`` and ``evaluate``; ``geometry`` and ``llm``; ``report`` and ``interop``).
Every import counts: module-level, inside functions, and under ``TYPE_CHECKING``.

The imports form no circle either, inside a package or across (a lazy import inside a function
does not break one): ``a`` imports ``b`` and ``b`` imports ``a`` is a circle, and so is a package's
``__init__`` that re-exports a submodule which imports a name from the package itself (import it
from the module that defines it). ``from package import submodule`` imports the submodule only.

One exemption: the package root's lazy facade. ``windtunnel/__init__.py`` re-exports the public
Python API (``windtunnel.load_run``, ``windtunnel.results``, from ``windtunnel.interop``) through
a module-level ``__getattr__``, so the import runs on first use only and ``import windtunnel``
stays light. Imports inside that one function of that one file are not held to the layers
(:func:`test_import_windtunnel_stays_light` checks instead that a fresh interpreter's ``import
windtunnel`` loads no optional package); any other import of a higher layer in the root, at
module level or in another function, is.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import windtunnel

SRC = Path(windtunnel.__file__).resolve().parent

# Packages by layer; the number is the height. Modules at the package root are leaf helpers
# (height 0) unless named here.
LAYERS: dict[str, int] = {
    "tasks": 1,
    "models": 2, "evaluate": 2,
    "train": 3,
    "engine": 4,
    "geometry": 5, "llm": 5,
    "sweep": 6,
    "tune": 7,
    "scorecard": 8,
    "report": 9, "interop": 9,
    "cli": 10,
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


def imports(path: Path, src: Path, package_too: bool = True) -> list[tuple[int, str]]:
    """(line, absolute module) of every ``windtunnel`` import in ``path``; ``from a import b``
    yields ``a.b`` as well when ``b`` is a submodule, so ``from windtunnel import stats`` counts
    as an import of ``windtunnel.stats``. Without ``package_too``, ``a`` itself is left out when
    every name imported from it is a submodule (``from a import b`` does not run more of ``a``)."""
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
            here = src.parent / Path(*target.split("."))
            subs = [a.name for a in node.names
                    if (here / a.name).with_suffix(".py").exists() or (here / a.name).is_dir()]
            if package_too or len(subs) < len(node.names):
                found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{name}") for name in subs]
    return [(line, name) for line, name in found if name == "windtunnel" or name.startswith("windtunnel.")]


def lazy_facade_lines(path: Path, src: Path) -> set[int]:
    """The lines of the package root's module-level ``__getattr__`` (the lazy facade of the
    public API, exempt from the layers: see the module doc); none in any other file."""
    if module_name(path, src) != "windtunnel":
        return set()
    tree = ast.parse(path.read_text(), filename=str(path))
    return {line for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for line in range(node.lineno, node.end_lineno + 1)}


def violations(src: Path = SRC) -> list[str]:
    """One line per import against the layers, naming the module, the file and line, and the import."""
    out = []
    for path in sorted(src.rglob("*.py")):
        module = module_name(path, src)
        mine = unit(module)
        facade = lazy_facade_lines(path, src)
        for line, target in imports(path, src):
            theirs = unit(target)
            if theirs == mine or target == "windtunnel":  # own package; the root's __version__
                continue
            if line in facade:  # the root's lazy re-export of the public API
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


def import_graph(src: Path = SRC) -> dict[str, dict[str, str]]:
    """module -> {imported module: where (``file:line``)}, for every import between two modules
    of ``windtunnel`` (``from a import b`` of a submodule ``b`` counts as importing ``a.b`` only)."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sorted(src.rglob("*.py")):
        module = module_name(path, src)
        for line, target in imports(path, src, package_too=False):
            if target != module:
                graph[module].setdefault(target, f"{path.relative_to(src.parent)}:{line}")
    return graph


def cycles(src: Path = SRC) -> list[str]:
    """One line per import circle (a strongly connected component of two or more modules): one
    circle through it, and every import between its modules with its file and line."""
    graph = import_graph(src)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for component in sorted(components):
        members = set(component)
        start = component[0]
        paths = {start: [start]}  # the shortest circle through the first module, breadth first
        queue = [start]
        circle: list[str] = []
        while queue and not circle:
            v = queue.pop(0)
            for w in sorted(graph.get(v, {})):
                if w == start:
                    circle = paths[v] + [start]
                    break
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
        where = [f"{graph[a][b]} imports {b}" for a in component for b in sorted(graph.get(a, {})) if b in members]
        out.append(" -> ".join(circle) + " (" + "; ".join(where) + ")")
    return out


def test_imports_follow_the_layers():
    bad = violations()
    assert not bad, "imports against the layers (see tests/test_layers.py for the order):\n  " + "\n  ".join(bad)


def test_no_import_circles():
    bad = cycles()
    assert not bad, ("modules that import each other in a circle (move what both need into a module "
                     "of its own, or import names from the module that defines them):\n  " + "\n  ".join(bad))


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


def test_the_check_catches_a_circle(tmp_path):
    """The circle check itself: a lazy import back from b to a; a submodule that imports a name
    from its package's ``__init__`` (which re-exports it); ``from pkg import submodule`` is none."""
    fake = tmp_path / "windtunnel"
    for pkg in ("models", "tasks", "geometry"):
        (fake / pkg).mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "models" / "__init__.py").write_text("")
    (fake / "models" / "a.py").write_text("from windtunnel.models.b import f\n")
    (fake / "models" / "b.py").write_text("def f():\n    from windtunnel.models.a import g\n")
    (fake / "tasks" / "__init__.py").write_text("from windtunnel.tasks.hmm import HMM\n")
    (fake / "tasks" / "base.py").write_text("")
    (fake / "tasks" / "hmm.py").write_text("from windtunnel.tasks import Task\n")
    (fake / "geometry" / "__init__.py").write_text("from windtunnel.geometry.diagnose import run\n")
    (fake / "geometry" / "plots.py").write_text("")
    (fake / "geometry" / "diagnose.py").write_text("from windtunnel.geometry import plots\nfrom . import plots as p\n")
    bad = cycles(fake)
    assert len(bad) == 2, bad
    assert bad[0].startswith("windtunnel.models.a -> windtunnel.models.b -> windtunnel.models.a ("), bad
    assert "windtunnel/models/b.py:2 imports windtunnel.models.a" in bad[0], bad
    assert bad[1].startswith("windtunnel.tasks -> windtunnel.tasks.hmm -> windtunnel.tasks ("), bad


def test_only_the_roots_lazy_getattr_is_exempt(tmp_path):
    """The exemption is the root's module-level ``__getattr__`` alone: the same import at the
    root's module level, in another root function, or in a subpackage's ``__getattr__`` counts."""
    fake = tmp_path / "windtunnel"
    for pkg in ("interop", "tasks"):
        (fake / pkg).mkdir(parents=True)
        (fake / pkg / "__init__.py").write_text("")
    (fake / "interop" / "api.py").write_text("")
    (fake / "__init__.py").write_text(
        "def __getattr__(name):\n    from windtunnel.interop import api\n    return api\n\n"
        "def other():\n    from windtunnel.interop import api\n\n"
        "from windtunnel.interop.api import x\n")
    (fake / "tasks" / "__init__.py").write_text("def __getattr__(name):\n    from windtunnel.interop import api\n")
    bad = violations(fake)
    assert not any("__init__.py:2)" in b and b.startswith("windtunnel (") for b in bad), bad
    assert any(b.startswith("windtunnel (") and "__init__.py:6)" in b for b in bad), bad
    assert any(b.startswith("windtunnel (") and "__init__.py:8)" in b for b in bad), bad
    assert any(b.startswith("windtunnel.tasks (") for b in bad), bad


def test_import_windtunnel_stays_light():
    """``import windtunnel`` (a fresh interpreter) imports no optional package and not the
    trainer; the public API (``windtunnel.load_run``) loads on first use."""
    import subprocess
    import sys

    heavy = ["pandas", "pyarrow", "transformer_lens", "nnsight", "mlflow", "wandb", "tensorboard",
             "torch.utils.tensorboard", "windtunnel.train.trainer", "windtunnel.interop.api"]
    code = ("import sys, windtunnel, json; "
            f"print(json.dumps([m for m in {heavy!r} if m in sys.modules])); "
            "windtunnel.load_run; print('api' if 'windtunnel.interop.api' in sys.modules else '')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    loaded, api = res.stdout.splitlines()
    assert loaded == "[]", f"import windtunnel imported {loaded}"
    assert api == "api"
