"""Matplotlib for the pictures eor writes (report figures, eRAG plots), set up in one place. Matplotlib is
imported on first use; a process that has not chosen a backend gets the non-interactive Agg backend, so
pictures render on machines without a display, while one that already imported pyplot (a notebook) keeps
its own: eor only saves figures to files, which every backend does."""

from __future__ import annotations

import math
import sys
from typing import Any


def pyplot() -> Any:
    """`matplotlib.pyplot`, on the Agg backend unless the process already set pyplot up."""
    if "matplotlib.pyplot" not in sys.modules:
        import matplotlib

        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def label_apart(ax: Any, points: dict[str, tuple[float, float]], fontsize: float) -> None:
    """Name each point beside it; a label that would fall on an earlier one (within 0.08 decade of a log x
    and 2 points of y) goes one line lower, so that every name stays legible."""
    placed: list[tuple[float, float, int]] = []
    for name, (x, y) in sorted(points.items(), key=lambda item: (item[1][0], -item[1][1])):
        where = (math.log10(max(x, 1e-9)), y)
        near = [line for px, py, line in placed if abs(px - where[0]) < 0.08 and abs(py - y) < 2.0]
        line = next(n for n in range(len(near) + 1) if n not in near)
        placed.append((*where, line))
        ax.annotate(name, (x, y), fontsize=fontsize, xytext=(4, 3 - 1.3 * fontsize * line), textcoords="offset points")


def plain_log_axis(ax: Any) -> None:
    """A log x axis labelled 1, 2, 5, 10, ... as plain numbers (no crowded 2×10⁰ minor labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
