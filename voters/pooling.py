"""Pooling functions (EoR paper, appendix C.4), vectorised over questions, in a name -> function registry.

Input: combined similarities S of shape (Q, M, M) (S[q, m, n] = S_sim(y_m, y_n), eq. 6) and a boolean
`active` mask of shape (M,) or (Q, M). For member m the pooled values are {S[q, m, n] : n ≠ m, n active}:
a dropped member (ω^r ≤ t, eq. 7 / section 4.2) neither receives a score nor counts as an n for the others,
so N = (number of active members) − 1. With s the threshold and c_m = #{n : S_mn > s} (strict):

    mean       (1/N) Σ_n S_mn                          0 when N = 0
    max        max_n S_mn                              0 when N = 0
    majority   1 if c_m ≥ N/2 else 0                   (so 1 when N = 0)
    plurality  1 if c_m = max over active k of c_k else 0

The value returned for a dropped member is 0; the voter never chooses it (its decision score is −inf).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from eor.core.errors import InputError
from eor.core.registry import Registry

PoolFunction = Callable[[np.ndarray, np.ndarray, float], np.ndarray]
POOLINGS: Registry[PoolFunction] = Registry("pooling")

#: (S⁺, the largest combined similarity) -> the largest value the pooling can give: what exact lazy voting
#: (voters.lazy) needs of a pooling that is monotone in every similarity.
UpperBound = Callable[[float], float]


def register_pooling(
    name: str, *, upper_bound: UpperBound | None = None, replace: bool = False
) -> Callable[[PoolFunction], PoolFunction]:
    """Register `function(similarities (Q,M,M), active (Q,M) bool, threshold) -> (Q,M)` under `name`;
    `upper_bound` only for a pooling monotone in every similarity (it then admits lazy voting)."""

    def register(function: PoolFunction) -> PoolFunction:
        function.upper_bound = upper_bound  # type: ignore[attr-defined]
        return POOLINGS.register(name, function, replace=replace)

    return register


def available_poolings() -> list[str]:
    return POOLINGS.names()


def get_pooling(name: str) -> PoolFunction:
    return POOLINGS[name]


def pooling_bound(name: str) -> UpperBound | None:
    """The upper bound of pooling `name` (None: not monotone, or unknown: no lazy voting)."""
    return getattr(POOLINGS.get(name), "upper_bound", None)


def others_mask(active: np.ndarray) -> np.ndarray:
    """(Q, M, M) bool: True where n ≠ m and n is active (the values member m pools over)."""
    size = active.shape[-1]
    return active[:, np.newaxis, :] & ~np.eye(size, dtype=bool)[np.newaxis]


def above_counts(similarities: np.ndarray, active: np.ndarray, threshold: float) -> np.ndarray:
    """c_m = #{n ≠ m active : S_mn > threshold}, shape (Q, M)."""
    return np.count_nonzero(others_mask(active) & (similarities > threshold), axis=-1)


@register_pooling("mean", upper_bound=lambda peak: peak)
def mean_pool(similarities: np.ndarray, active: np.ndarray, threshold: float) -> np.ndarray:
    others = others_mask(active)
    count = others.sum(axis=-1)
    total = np.where(others, similarities, 0.0).sum(axis=-1)
    return np.where(active & (count > 0), total / np.maximum(count, 1), 0.0)


@register_pooling("max", upper_bound=lambda peak: peak)
def max_pool(similarities: np.ndarray, active: np.ndarray, threshold: float) -> np.ndarray:
    others = others_mask(active)
    best = np.where(others, similarities, -np.inf).max(axis=-1, initial=-np.inf)
    return np.where(active & others.any(axis=-1), best, 0.0)


@register_pooling("majority", upper_bound=lambda peak: 1.0)
def majority_pool(similarities: np.ndarray, active: np.ndarray, threshold: float) -> np.ndarray:
    counts = above_counts(similarities, active, threshold)
    others = active.sum(axis=-1, keepdims=True) - 1
    return (active & (2 * counts >= others)).astype(float)


@register_pooling("plurality")
def plurality_pool(similarities: np.ndarray, active: np.ndarray, threshold: float) -> np.ndarray:
    counts = np.where(active, above_counts(similarities, active, threshold), -1)
    return (active & (counts == counts.max(axis=-1, keepdims=True))).astype(float)


def as_active(active: np.ndarray | None, n_questions: int, n_members: int) -> np.ndarray:
    """`active` broadcast to a (Q, M) bool array (None: every member active)."""
    if active is None:
        return np.ones((n_questions, n_members), dtype=bool)
    mask = np.asarray(active, dtype=bool)
    if mask.shape not in {(n_members,), (n_questions, n_members)}:
        raise InputError(
            f"member mask must have shape ({n_members},) or ({n_questions}, {n_members}), got {mask.shape}"
        )
    return np.broadcast_to(mask, (n_questions, n_members))


def pool(name: str, similarities: np.ndarray, active: np.ndarray | None = None, threshold: float = 0.5) -> np.ndarray:
    """Apply the pooling registered as `name` to (Q, M, M) similarities; returns (Q, M)."""
    function = get_pooling(name)
    values = np.asarray(similarities, dtype=float)
    if values.ndim != 3 or values.shape[1] != values.shape[2]:
        raise InputError(f"similarities must have shape (questions, members, members), got {values.shape}")
    return function(values, as_active(active, values.shape[0], values.shape[1]), float(threshold))
