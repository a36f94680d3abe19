"""The tutorial notebook, executed: docs/tutorial.ipynb runs top to bottom in a fresh kernel.

It runs as a reader would run it (``WINDTUNNEL_FORCE_SET`` unset: the notebook is quick on its
own, about 45 s on 2 cores), in a copy in a temporary folder, with a time limit per cell; any cell
that raises fails the test. The committed copy must keep its rendered outputs (plots as PNG) so
that it reads on GitHub, and stay small. TransformerLens is optional: without it the notebook
takes its documented fallback (our own ``run_with_cache``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "tutorial.ipynb"
CELL_TIMEOUT = 240  # seconds per cell; training is the longest (about 20 s)


def _outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == kind]


def _text(nb) -> str:
    return "".join(o.get("text", "") for o in _outputs(nb, "stream"))


def _pngs(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_the_committed_notebook_reads_on_github():
    assert NOTEBOOK.stat().st_size < 1_000_000, f"{NOTEBOOK} is {NOTEBOOK.stat().st_size:,} bytes"
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), "the notebook is committed unexecuted"
    assert not _outputs(nb, "error"), "the committed notebook holds an error"
    assert _pngs(nb) >= 5, "the committed notebook lost its plots"


def test_the_notebook_runs(tmp_path, monkeypatch):
    for var in ("WINDTUNNEL_FORCE_SET", "MPLBACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    work = tmp_path / "docs"
    work.mkdir()
    path = Path(shutil.copy(NOTEBOOK, work / NOTEBOOK.name))
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(work)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    assert not _outputs(nb, "error")
    assert _pngs(nb) >= 5
    text = _text(nb)
    for expected in ("7 scored positions, 8 answers", "600 steps in", "key frame:", "layer-0 attention pattern",
                     "clean              entropy error", "zeroed   entropy error"):
        assert expected in text, f"{expected!r} missing from the notebook's output:\n{text}"
    # the ablated head moves the entropy error up
    lines = [line for line in text.splitlines() if "entropy error" in line and "KL(Bayes||model)" in line]
    clean, ablated = (float(line.split("entropy error")[1].split()[0]) for line in lines[:2])
    assert ablated > clean, lines
