"""K disjoint folds of questions, seeded: what every cross-validation in eor splits by, and `cross_fit`, the one
loop over them (every out-of-fold estimate: voter candidates, P(right), the judge, the cascade's steps and
operating points, the benchmarks' nested cross-validations): each held-out part answered by what was fitted on the
other parts, as scikit-learn's `cross_val_predict` does for estimators (`fold_split`: the same folds as its
splitter)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
from sklearn.model_selection import PredefinedSplit

from eor.core.errors import InputError

Fitted = TypeVar("Fitted")
Held = TypeVar("Held")


def folds(n_questions: int, k: int, seed: int) -> list[np.ndarray]:
    """K disjoint held-out folds covering every question once (a seeded permutation cut in K parts)."""
    if not isinstance(k, int) or k < 2:
        raise InputError(f"cross-validation needs at least 2 folds, got {k!r}")
    if n_questions < k:
        raise InputError(f"cannot make {k} folds of {n_questions} questions")
    order = np.random.default_rng(seed).permutation(n_questions)
    return [np.sort(part) for part in np.array_split(order, k)]


def fold_labels(n_questions: int, k: int, seed: int) -> np.ndarray:
    """Each question's fold under `folds` (0 to K − 1)."""
    labels = np.empty(n_questions, dtype=int)
    for index, held in enumerate(folds(n_questions, k, seed)):
        labels[held] = index
    return labels


def fold_split(n_questions: int, k: int, seed: int) -> PredefinedSplit:
    """`folds` as scikit-learn's splitter: `split()` yields (training positions, held-out positions) per
    fold, in the order of `folds`, both ascending."""
    return PredefinedSplit(fold_labels(n_questions, k, seed))


def cross_fit(
    parts: Sequence[np.ndarray],
    teach: np.ndarray,
    fit: Callable[[np.ndarray], Fitted],
    apply: Callable[[Fitted, np.ndarray], Held],
    progress: Callable[[int], None] | None = None,
) -> list[Held]:
    """Per held-out part of `parts` (disjoint positions, in order): `apply(fit(train), held)`, `train` the rows of
    `teach` (ascending positions: the rows a fit may learn from) outside `held`, ascending. One part is fitted and
    applied before the next is fitted (a fit may be an object refitted in place); `progress(number)` after each,
    numbered from 1."""
    teach = np.asarray(teach, dtype=int)
    answered = []
    for number, held in enumerate(parts, start=1):
        answered.append(apply(fit(np.setdiff1d(teach, held)), held))
        if progress is not None:
            progress(number)
    return answered


def in_row_order(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The positions that put what was answered per part, concatenated in the parts' order, back in row order."""
    return np.argsort(np.concatenate(parts), kind="stable")
