"""The threshold of abstention at a chosen risk (eor.pipeline.abstention): fixed-sequence Learn then Test against
cases worked by hand, its binomial tail against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from eor.core.errors import InputError
from eor.pipeline.abstention import binomial_p_value, risk_threshold, thresholds


def _tail(errors: int, answered: int, alpha: float) -> float:
    """P(Binom(answered, alpha) ≤ errors), summed term by term."""
    return sum(math.comb(answered, k) * alpha**k * (1 - alpha) ** (answered - k) for k in range(errors + 1))


def test_the_binomial_tail_by_hand_and_by_scipy() -> None:
    assert binomial_p_value(1, 10, 0.3) == pytest.approx(0.7**10 + 10 * 0.3 * 0.7**9)
    for errors, answered, alpha in [(4, 40, 0.3), (20, 80, 0.4), (0, 5, 0.5)]:
        assert binomial_p_value(errors, answered, alpha) == pytest.approx(_tail(errors, answered, alpha))
        assert binomial_p_value(errors, answered, alpha) == pytest.approx(binom.cdf(errors, answered, alpha))
    assert binomial_p_value(0, 0, 0.3) == 1.0  # nothing answered rejects nothing


# Three groups of 40 questions: P(right) 0.9 with 4 wrong, 0.5 with 16 wrong, 0.1 with 36 wrong.
PROBABILITY = np.repeat([0.9, 0.5, 0.1], 40)
RIGHT = np.concatenate([np.arange(40) >= 4, np.arange(40) >= 16, np.arange(40) >= 36])
GRID = (0.0, 0.5, 0.9)  # tested from 0.9 down, each at δ = 0.1, until one is not rejected


def test_the_fixed_sequence_by_hand() -> None:
    # α = 0.3: λ = 0.9 (4 wrong of 40) is rejected, λ = 0.5 (20 of 80) is not: the sequence stops at 0.9.
    assert _tail(4, 40, 0.3) <= 0.1 < _tail(20, 80, 0.3)
    found = risk_threshold(PROBABILITY, RIGHT, 0.3, 0.1, GRID)
    assert (found.threshold, found.coverage, found.error) == (0.9, pytest.approx(1 / 3), pytest.approx(0.1))
    assert found.p_value == pytest.approx(_tail(4, 40, 0.3))
    # α = 0.4: λ = 0.9 and 0.5 (20 wrong of 80) are rejected, λ = 0 (56 of 120) is not: two thirds answered.
    assert _tail(20, 80, 0.4) <= 0.1 < _tail(56, 120, 0.4)
    found = risk_threshold(PROBABILITY, RIGHT, 0.4, 0.1, GRID)
    assert (found.threshold, found.coverage, found.error) == (0.5, pytest.approx(2 / 3), pytest.approx(0.25))
    # α = 0.05: 4 wrong of 40 is no evidence of an error rate below 5%: abstain on everything.
    assert _tail(4, 40, 0.05) > 0.1
    found = risk_threshold(PROBABILITY, RIGHT, 0.05, 0.1, GRID)
    assert found.threshold is None and found.coverage == 0.0


def test_the_sequence_stops_at_the_first_threshold_not_rejected() -> None:
    # 40 questions at 0.9 with 20 wrong, then 200 at 0.5 all right: 20 of 240 wrong at λ = 0.5 would be
    # rejected at α = 0.3, but the sequence never gets there.
    p = np.repeat([0.9, 0.5], [40, 200])
    right = np.concatenate([np.arange(40) >= 20, np.ones(200, dtype=bool)])
    assert _tail(20, 40, 0.3) > 0.1 and _tail(20, 240, 0.3) <= 0.1
    assert risk_threshold(p, right, 0.3, 0.1, (0.5, 0.9)).threshold is None


def test_a_threshold_answering_too_few_questions_is_skipped_not_failed() -> None:
    # five questions at 0.99, all wrong, stand above the three groups: under a tenth of 125, never tested
    p = np.concatenate([np.full(5, 0.99), PROBABILITY])
    right = np.concatenate([np.zeros(5, dtype=bool), RIGHT])
    assert _tail(5, 5, 0.3) > 0.1
    found = risk_threshold(p, right, 0.4, 0.1, (0.0, 0.5, 0.9, 0.95))
    assert found.threshold == 0.5 and found.error == pytest.approx(25 / 85)
    assert risk_threshold(p, right, 0.4, 0.1, (0.0, 0.5, 0.9, 0.95), min_coverage=0).threshold is None


def test_a_lower_alpha_never_answers_more() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=600)
    right = rng.uniform(size=600) < p  # calibrated by construction
    chosen = thresholds(p, right)
    coverage = [t.coverage for t in chosen]
    assert coverage == sorted(coverage) and coverage[-1] > 0  # ALPHAS ascending
    for t in chosen:
        if t.threshold is not None:
            assert t.error <= t.alpha


@pytest.mark.parametrize(("alpha", "delta"), [(0.0, 0.1), (1.0, 0.1), (0.3, 0.0), (0.3, 1.5)])
def test_alpha_and_delta_lie_strictly_between_0_and_1(alpha: float, delta: float) -> None:
    with pytest.raises(InputError, match="must lie in"):
        risk_threshold([0.5], [True], alpha, delta)
