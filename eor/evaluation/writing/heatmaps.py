"""The annotated heatmap of a report's member pairs (RWR in rwr.png, RWR_E in errors_rwr.png): one cell per
(row member, column member) with its value written in it, on a blue scale from 0 to the matrix's largest
value rounded up to a tenth. Undefined cells (a zero denominator) are grey and marked "–". The size and the
fonts scale with the number of members, so 7 to 16 long names stay legible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eor.core.formatting import fixed


def as_array(matrix: Sequence[Sequence[float | None]]) -> np.ndarray:
    """A report's square matrix (None where undefined) as floats, NaN where undefined."""
    return np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float).reshape(
        len(matrix), len(matrix)
    )


def _cell_font(n: int) -> float:
    return 10 if n <= 10 else 9 if n <= 13 else 8.5


def heatmap(
    ax: Any, fig: Any, matrix: np.ndarray, names: Sequence[str], title: str, xlabel: bool = True, ylabel: bool = True
) -> None:
    """Draw `matrix` (rows and columns in the order of `names`) on `ax`, with `title` and, as asked, the axes'
    labels; its colour bar beside it."""
    import matplotlib as mpl

    n = len(names)
    cmap = mpl.colormaps["Blues"].with_extremes(bad="#e0e0e0")
    top = np.nanmax(matrix) if np.any(~np.isnan(matrix)) else 1.0
    vmax = max(0.1, float(np.ceil(top * 10) / 10))
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=0.0, vmax=vmax)
    font = _cell_font(n)
    for i in range(n):
        for j in range(n):
            value = matrix[i, j]
            if np.isnan(value):
                ax.text(j, i, "–", ha="center", va="center", fontsize=font, color="#757575")
            else:
                color = "white" if value > 0.6 * vmax else "black"
                ax.text(j, i, fixed(value, 2), ha="center", va="center", fontsize=font, color=color)
    label_font = 10 if n <= 10 else 8.5
    ax.set_xticks(range(n), names, rotation=45, ha="right", rotation_mode="anchor", fontsize=label_font)
    ax.set_yticks(range(n), names, fontsize=label_font)
    if xlabel:
        ax.set_xlabel("column member $r_j$ (its failures)", fontsize=label_font + 1)
    if ylabel:
        ax.set_ylabel("row member $r_i$ (avoids them)", fontsize=label_font + 1)
    ax.set_xticks(np.arange(n + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(n + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    ax.set_title(title, fontsize=label_font + 1)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)


def heatmap_size(n: int) -> float:
    """The side in inches of one heatmap of `n` members."""
    return 0.62 * n + 3.2
