"""The one cumulative spend: what a cascade has spent on a question after each of its steps, the costs of the
members it ran so far, summed in the order it ran them.

A step costs its member's cost on the question (eor.runs.costs makes the costs, in reader seconds; this module
only sums them, since `voters` imports nothing of eor.runs). `voters.cascade.Cascade.spent` (the
trained cascade: `eor bench`, `eor train`'s cross-validation, the benchmarks) and `voters.cascade_fit`'s
held-out operating points both sum through `spend`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def spend(costs: np.ndarray, order: Sequence[int], stops: np.ndarray) -> np.ndarray:
    """Per row, the cost of running the members `order` (columns of `costs`, (R, M) per row and member) up to
    the step `stops[r]` (a position in `order`), that step included."""
    cumulative = np.cumsum(np.asarray(costs, dtype=float)[:, list(order)], axis=1)
    return cumulative[np.arange(len(stops)), np.asarray(stops, dtype=int)]
