"""Figures of the results pages: one matplotlib style, and PNG files whose bytes depend only on
the plotted data and the matplotlib version (no timestamp, no software tag, fixed fonts).

Beside every ``NAME.png`` the renderer writes ``NAME.json``: the data the figure plots and the
matplotlib version that drew it. The test of the pages compares that data always, and the PNG's
bytes where the installed matplotlib is the one recorded (other versions rasterise differently).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "font.family": "DejaVu Sans", "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
    "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8, "figure.dpi": 100,
    "savefig.dpi": 100, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "svg.hashsalt": "windtunnel", "path.simplify": False,
    "lines.linewidth": 1.4, "lines.markersize": 3.5, "image.cmap": "RdYlGn",
}


@contextlib.contextmanager
def style():
    """matplotlib's defaults and STYLE while a figure is drawn and saved; the caller's settings
    (another renderer's in the same process, say) are restored afterwards."""
    with plt.rc_context():
        plt.rcdefaults()
        plt.rcParams.update(STYLE)
        yield


def figure(width: float = 6.4, height: float = 3.6, **kw):
    """A figure and its axes; draw inside :func:`style`."""
    return plt.subplots(figsize=(width, height), **kw)


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None}, bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    return buf.getvalue()


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def version() -> str:
    return matplotlib.__version__
