"""K disjoint folds of questions, seeded: what every cross-validation in eor splits by (voter candidates in
eor.learning.crossval, as a scikit-learn `PredefinedSplit`; the cascade's out-of-fold step scores in
voters.cascade_fit)."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import PredefinedSplit

from eor.core.errors import InputError


def folds(n_questions: int, k: int, seed: int) -> list[np.ndarray]:
    """K disjoint held-out folds covering every question once (a seeded permutation cut in K parts)."""
    if not isinstance(k, int) or k < 2:
        raise InputError(f"cross-validation needs at least 2 folds, got {k!r}")
    if n_questions < k:
        raise InputError(f"cannot make {k} folds of {n_questions} questions")
    order = np.random.default_rng(seed).permutation(n_questions)
    return [np.sort(part) for part in np.array_split(order, k)]


def fold_split(n_questions: int, k: int, seed: int) -> PredefinedSplit:
    """`folds` as scikit-learn's splitter: `split()` yields (training positions, held-out positions) per
    fold, in the order of `folds`, both ascending."""
    test_fold = np.empty(n_questions, dtype=int)
    for index, held in enumerate(folds(n_questions, k, seed)):
        test_fold[held] = index
    return PredefinedSplit(test_fold)
