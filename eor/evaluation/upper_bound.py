"""The upper bound of an ensemble of retrievers (EoR paper, section 4 and figure 5).

An oracle voter picks a correct answer whenever any member of the pool has one, so the pool's oracle
accuracy is the mean over questions of the max over its members of I^m(n). Figure 5 shows, for every pool
size, the distribution of this bound over member subsets of that size, against the best single member.

Subsets of a size are all enumerated when there are at most `max_subsets_per_size` of them; otherwise a
seeded random sample of that many distinct subsets is drawn. Each size has its own generator, seeded
with (seed, size), so a size's sample does not depend on which other sizes were computed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.evaluation.inconsistency import as_indicator_matrix

DEFAULT_MAX_SUBSETS = 1000


@dataclass(frozen=True)
class PoolSizeBound:
    """Oracle accuracies of the member subsets (all, or a sample) of one pool size."""

    size: int
    subsets: list[tuple[str, ...]]
    accuracies: list[float]
    total_subsets: int  # C(M, size)
    exhaustive: bool  # False when `subsets` is a sample

    def as_dict(self) -> dict[str, Any]:
        return json_ready(
            {
                "size": self.size,
                "subsets": [list(subset) for subset in self.subsets],
                "accuracies": self.accuracies,
                "total_subsets": self.total_subsets,
                "exhaustive": self.exhaustive,
            }
        )


@dataclass(frozen=True)
class UpperBound:
    """The oracle bound for every pool size 1..M plus the best single member (figure 5's dashed line)."""

    by_size: list[PoolSizeBound]
    best_single: str
    best_single_accuracy: float

    def as_dict(self) -> dict[str, Any]:
        return json_ready(
            {
                "by_size": [bound.as_dict() for bound in self.by_size],
                "best_single": self.best_single,
                "best_single_accuracy": self.best_single_accuracy,
            }
        )


def top_member(correct: np.ndarray) -> int:
    """Top R: the position of the member most often right, `correct` (questions × members, correctness in [0, 1]);
    ties go to the first member, and with no question the first member. The one home of this choice (the paper's
    best single retriever): training's Top R (train), the benchmark's Top R, the judge's."""
    matrix = np.asarray(correct, dtype=float)
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise InputError(f"Top R needs a questions × members matrix with a member, got shape {matrix.shape}")
    if matrix.shape[0] == 0:
        return 0
    return int(np.argmax(np.nan_to_num(matrix.mean(axis=0), nan=-1.0)))


def oracle_accuracy(correct: np.ndarray) -> float:
    """Mean over questions of max over members of `correct` (members × questions); NaN with no questions."""
    indicators = as_indicator_matrix(correct)
    if indicators.shape[0] == 0:
        raise InputError("an oracle needs at least one member")
    if indicators.shape[1] == 0:
        return float("nan")
    return float(indicators.max(axis=0).mean())


def any_right(rights: Sequence[np.ndarray]) -> np.ndarray:
    """Per question, 1.0 where any of its options is right (`rights`: one array per question, of any length, as the
    judge's candidates are; an empty one: 0.0): the oracle per question where `oracle_accuracy`'s matrix cannot
    hold the options."""
    return np.array([bool(np.any(right)) for right in rights], dtype=float)


def sample_subsets(n_members: int, size: int, count: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """`count` distinct size-`size` subsets of range(n_members), sorted, drawn uniformly with `rng`."""
    total = math.comb(n_members, size)
    if count >= total:
        return list(itertools.combinations(range(n_members), size))
    if total <= 2 * count:
        # Few enough to list: choosing indices avoids rejection sampling's slow tail near `total`.
        every = list(itertools.combinations(range(n_members), size))
        return sorted(every[i] for i in rng.choice(total, size=count, replace=False))
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < count:  # each draw is new with probability > 1/2, so this ends quickly
        chosen.add(tuple(sorted(int(i) for i in rng.choice(n_members, size=size, replace=False))))
    return sorted(chosen)


def upper_bound_by_pool_size(
    correct: np.ndarray,
    names: Sequence[str],
    max_subsets_per_size: int = DEFAULT_MAX_SUBSETS,
    seed: int = 0,
) -> UpperBound:
    """The oracle accuracy of member subsets of every pool size 1..M and the best single member.

    `correct` is (members × questions) with rows in the order of `names`. Ties for the best single member
    go to the earliest name.
    """
    indicators = as_indicator_matrix(correct)
    n_members = indicators.shape[0]
    if len(names) != n_members:
        raise InputError(f"{len(names)} names given for {n_members} members (rows of correct)")
    if n_members == 0:
        raise InputError("an upper bound needs at least one member")
    if len(set(names)) != n_members:
        raise InputError("member names must be distinct")
    if seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed}")
    if max_subsets_per_size < 1:
        raise InputError(f"max_subsets_per_size must be at least 1, got {max_subsets_per_size}")

    by_size = []
    for size in range(1, n_members + 1):
        rng = np.random.default_rng([seed, size])
        subsets = sample_subsets(n_members, size, max_subsets_per_size, rng)
        total = math.comb(n_members, size)
        by_size.append(
            PoolSizeBound(
                size=size,
                subsets=[tuple(names[i] for i in subset) for subset in subsets],
                accuracies=[oracle_accuracy(indicators[list(subset)]) for subset in subsets],
                total_subsets=total,
                exhaustive=len(subsets) == total,
            )
        )
    singles = [oracle_accuracy(indicators[[m]]) for m in range(n_members)]
    best = top_member(indicators.T)
    return UpperBound(by_size=by_size, best_single=names[best], best_single_accuracy=singles[best])
