"""Abstention at a chosen risk: the threshold on P(right) below which eor says "I don't know", chosen on
training questions so that the error rate among the questions it answers is at most ALPHA.

Learn then Test (Angelopoulos, Bates, Candès, Jordan and Lei 2021), fixed before any held-out question is
seen:

1. **Probabilities** are out of fold: one P(right) per training question, from a model that did not fit on
   it (never a voter's predictions on its own fitting data).
2. **Hypotheses.** For each threshold λ of the fixed grid `GRID` (0.00, 0.05, ..., 0.95), a question is
   answered when P(right) ≥ λ; H_λ says that the error rate among answered questions exceeds α.
3. **P-values.** With n_λ training questions answered at λ and e_λ of them wrong, p_λ = P(Binom(n_λ, α) ≤
   e_λ), the binomial tail: given n_λ, the answered questions are drawn from those a new question answered at
   λ is drawn from, so their errors are Binom(n_λ, r_λ) and p_λ is valid whenever r_λ ≥ α. No answered
   question: p_λ = 1.
4. **Family.** Every λ is tested at δ / |GRID| (Bonferroni): with probability at least 1 − δ over the
   training questions, every λ rejected has error rate at most α on new questions exchangeable with them.
   The threshold is the lowest rejected λ (the most questions answered); when none is rejected, eor
   abstains on every question at that α.

`thresholds` applies it to a grid of α (`ALPHAS`) at δ = `DELTA`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from eor.errors import InputError

GRID = tuple(round(0.05 * i, 2) for i in range(20))  # 0.00 ... 0.95: fixed before dev is touched
ALPHAS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
DELTA = 0.1


@dataclass(frozen=True)
class RiskThreshold:
    """The threshold chosen for `alpha` (None: abstain on every question), and on the training questions its
    coverage, error rate among answered and p-value."""

    alpha: float
    threshold: float | None
    coverage: float
    error: float | None
    p_value: float | None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def binomial_p_value(errors: int, answered: int, alpha: float) -> float:
    """P(Binom(answered, alpha) ≤ errors): how unlikely so few errors are if the error rate were alpha."""
    from scipy.stats import binom

    if answered == 0:
        return 1.0
    return float(binom.cdf(errors, answered, alpha))


def risk_threshold(
    probability: Sequence[float] | np.ndarray,
    right: Sequence[bool] | np.ndarray,
    alpha: float,
    delta: float = DELTA,
    grid: Sequence[float] = GRID,
) -> RiskThreshold:
    """The module's procedure for one `alpha` over out-of-fold `probability` and whether each answer was
    `right`."""
    if not 0 < alpha < 1 or not 0 < delta < 1:
        raise InputError(f"alpha and delta must lie in (0, 1), got {alpha} and {delta}")
    p = np.asarray(probability, dtype=float)
    wrong = ~np.asarray(right, dtype=bool)
    if p.shape != wrong.shape or p.ndim != 1:
        raise InputError(f"one probability per answer: {p.shape} probabilities, {wrong.shape} answers")
    level = delta / len(grid)
    for threshold in sorted(grid):  # lowest first: the first rejected answers the most questions
        answered = p >= threshold
        n, errors = int(answered.sum()), int(wrong[answered].sum())
        p_value = binomial_p_value(errors, n, alpha)
        if p_value <= level:
            return RiskThreshold(alpha, float(threshold), n / len(p), errors / n, p_value)
    return RiskThreshold(alpha, None, 0.0, None, None)


def thresholds(
    probability: Sequence[float] | np.ndarray,
    right: Sequence[bool] | np.ndarray,
    alphas: Sequence[float] = ALPHAS,
    delta: float = DELTA,
) -> list[RiskThreshold]:
    """`risk_threshold` for every alpha of `alphas`."""
    return [risk_threshold(probability, right, alpha, delta) for alpha in alphas]
