"""Matplotlib for the pictures eor writes (report figures, eRAG plots), set up once: the non-interactive
Agg backend, so pictures render on machines without a display. Matplotlib is imported on first use."""

from __future__ import annotations

from typing import Any


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
