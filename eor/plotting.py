"""Matplotlib for the pictures eor writes (report figures, eRAG plots), set up in one place. Matplotlib is
imported on first use; a process that has not chosen a backend gets the non-interactive Agg backend, so
pictures render on machines without a display, while one that already imported pyplot (a notebook) keeps
its own: eor only saves figures to files, which every backend does."""

from __future__ import annotations

import sys
from typing import Any


def pyplot() -> Any:
    """`matplotlib.pyplot`, on the Agg backend unless the process already set pyplot up."""
    if "matplotlib.pyplot" not in sys.modules:
        import matplotlib

        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
