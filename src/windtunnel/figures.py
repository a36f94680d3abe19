"""Saving matplotlib figures: headless (Agg) and atomic, shared by every module that plots, and
the look of their lines: an architecture in the same colour and marker in every figure, every
other line a colour and marker of its own.

``plt`` imported from here is pyplot with the Agg backend already selected."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from windtunnel.files import atomic_write_bytes  # noqa: E402


def save_figure(fig, path: Path | str, tight: bool = True, metadata: dict | None = None) -> Path:
    """Save ``fig`` atomically (a full disk leaves the previous image, never half of one).
    ``metadata``: the file's text chunks (``{"Software": None}`` leaves out matplotlib's version,
    for images whose bytes must not change with it)."""
    if tight:  # not with a colorbar spanning several axes
        fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".") or "png", dpi=120, metadata=metadata)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def log_axes(ax, xlabel: str, ylabel: str, title: str = "", log: bool = True) -> None:
    """Log (or linear) y axis, labels, grid, legend and title: the style the line plots share."""
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)


#: the built-in architectures in the order of matplotlib's tab10 colours: each keeps its colour
#: (``C0`` ...) and marker in every figure, the package's and the results pages'
ARCHITECTURES = ("transformer", "mamba", "lstm", "mlp", "gru", "linear_attention", "deltanet", "swa_transformer",
                 "hybrid")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
DASHES = ("-", "--", ":", "-.")


def thing(label: str) -> str:
    """What a line's label names, before any variant in brackets ("lstm (lr 1e-3)" -> "lstm")."""
    return label.split(" (")[0]


def colour(label: str) -> str:
    """An architecture's colour of every figure (by :func:`thing`); grey for anything else."""
    base = thing(label).split(" ")[0]
    return f"C{ARCHITECTURES.index(base)}" if base in ARCHITECTURES else "0.4"


def line_styles(labels: list[str]) -> dict[str, dict[str, str]]:
    """A colour, marker and line style per label, so that no two lines look alike. An
    architecture keeps its colour and marker of every figure; every other thing gets a colour and
    marker of its own. A thing drawn more than once (``"lstm (lr 3.16e-3)"``, ``"lstm (lr 1e-3)"``)
    tells its variants apart by line style and marker, the same variant the same style throughout."""
    split = {label: (thing(label), label[len(thing(label)):].strip()) for label in labels}
    things = list(dict.fromkeys(t for t, _ in split.values()))
    fixed = {t: colour(t) for t in things if t in ARCHITECTURES}
    free = [f"C{i}" for i in range(10) if f"C{i}" not in fixed.values()]
    taken = {MARKERS[ARCHITECTURES.index(t) % len(MARKERS)] for t in fixed}
    free_markers = [m for m in MARKERS if m not in taken] or list(MARKERS)
    others = [t for t in things if t not in fixed]
    colours = {**fixed, **{t: free[i % len(free)] for i, t in enumerate(others)}}
    repeated = {t for t, _ in split.values() if sum(1 for u, _ in split.values() if u == t) > 1}
    variants = list(dict.fromkeys(v for t, v in split.values() if t in repeated))
    out = {}
    for label, (name, variant) in split.items():
        if name in repeated:
            k = variants.index(variant)
            out[label] = {"color": colours[name], "marker": MARKERS[k % len(MARKERS)], "ls": DASHES[k % len(DASHES)]}
        elif name in fixed:
            out[label] = {"color": colours[name], "marker": MARKERS[ARCHITECTURES.index(name) % len(MARKERS)], "ls": "-"}
        else:
            k = others.index(name)
            out[label] = {"color": colours[name], "marker": free_markers[k % len(free_markers)], "ls": "-"}
    return out
