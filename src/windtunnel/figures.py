"""Saving matplotlib figures: headless (Agg) and atomic, shared by every module that plots.

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
