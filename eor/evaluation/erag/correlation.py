"""Rank and linear correlations across questions (Kendall's τ-b, Spearman's ρ, Pearson's r), NaN-aware.

Written out in numpy so that they can be checked against scipy.stats (kendalltau with its default τ-b,
spearmanr, pearsonr): the tests require equality to 1e-12. Conventions:

- pairs where either value is missing (None or NaN) are dropped first (pairwise-complete), and `correlate`
  reports how many pairs were used as `n`;
- a correlation is NaN when it is undefined: fewer than two pairs, or a constant input (zero variance, or
  for τ-b every pair tied in one variable), where scipy also returns NaN;
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from eor.core.errors import InputError

_CHUNK = 1024


def _pairs(x: Iterable[float | None], y: Iterable[float | None]) -> tuple[np.ndarray, np.ndarray]:
    xs = np.array([math.nan if value is None else value for value in x], dtype=float)
    ys = np.array([math.nan if value is None else value for value in y], dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise InputError(f"correlation needs two sequences of equal length, got {xs.shape} and {ys.shape}")
    keep = ~(np.isnan(xs) | np.isnan(ys))
    return xs[keep], ys[keep]


def kendall_tau(x: Sequence[float | None], y: Sequence[float | None]) -> float:
    """Kendall's τ-b: Σ sign(Δx)·sign(Δy) / sqrt(#pairs untied in x · #pairs untied in y)."""
    xs, ys = _pairs(x, y)
    if len(xs) < 2:
        return math.nan
    agreement = untied_x = untied_y = 0.0
    for start in range(0, len(xs), _CHUNK):
        sx = np.sign(xs[start : start + _CHUNK, None] - xs[None, :])
        sy = np.sign(ys[start : start + _CHUNK, None] - ys[None, :])
        agreement += float((sx * sy).sum())
        untied_x += float(np.abs(sx).sum())
        untied_y += float(np.abs(sy).sum())
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return float(np.clip(agreement / math.sqrt(untied_x * untied_y), -1.0, 1.0))


def _pearson(xs: np.ndarray, ys: np.ndarray) -> float:
    if len(xs) < 2:
        return math.nan
    dx = xs - xs.mean()
    dy = ys - ys.mean()
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    if denominator == 0 or (np.ptp(xs) == 0 or np.ptp(ys) == 0):
        return math.nan
    return float(np.clip(float((dx * dy).sum()) / denominator, -1.0, 1.0))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    ranks = np.empty(len(values), dtype=float)
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman_rho(x: Sequence[float | None], y: Sequence[float | None]) -> float:
    """Spearman's ρ: Pearson's r between average ranks."""
    xs, ys = _pairs(x, y)
    return _pearson(average_ranks(xs), average_ranks(ys))


def pearson_r(x: Sequence[float | None], y: Sequence[float | None]) -> float:
    """Pearson's product-moment correlation."""
    return _pearson(*_pairs(x, y))


CORRELATIONS: dict[str, Callable[[Sequence[float | None], Sequence[float | None]], float]] = {
    "kendall_tau": kendall_tau,
    "spearman_rho": spearman_rho,
    "pearson_r": pearson_r,
}
RANK_CORRELATIONS = ("kendall_tau", "spearman_rho")


def correlate(
    x: Sequence[float | None],
    y: Sequence[float | None],
    measures: Iterable[str] = RANK_CORRELATIONS,
) -> dict[str, float]:
    """measure name -> value, plus `n`, the number of complete pairs used."""
    unknown = [name for name in measures if name not in CORRELATIONS]
    if unknown:
        raise InputError(f"unknown correlation {', '.join(unknown)}; known: {', '.join(CORRELATIONS)}")
    result: dict[str, float] = {name: CORRELATIONS[name](x, y) for name in measures}
    result["n"] = len(_pairs(x, y)[0])
    return result


def correlate_columns(
    columns: Mapping[str, Sequence[float | None]],
    target: Sequence[float | None],
    measures: Iterable[str] = RANK_CORRELATIONS,
) -> dict[str, dict[str, float]]:
    """Each named column (e.g. one retrieval metric over questions) against the same target."""
    names = list(measures)
    return {name: correlate(column, target, names) for name, column in columns.items()}
