"""The guarantee for a mix of answerable and unanswerable questions (eor.pipeline.abstention's
`mixed_risk_threshold`), worked by hand: each stratum's answered-and-wrong rate bounded above and answered-and-right
rate bounded below (Clopper–Pearson, δ/4 each), combined at the share of unanswerable questions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from eor.core.errors import InputError
from eor.pipeline.abstention import Stratum, binomial_bound, mixed_bound, mixed_risk_threshold


def _stratum(*groups: tuple[float, int, int]) -> Stratum:
    """Questions in groups of (P(right), how many, how many of them right)."""
    probability = np.concatenate([np.full(n, p) for p, n, _ in groups])
    right = np.concatenate([np.arange(n) < k for _, n, k in groups])
    return Stratum(probability, right)


# 600 answerable: 200 at P 0.9 (180 right), 200 at 0.6 (120 right), 200 at 0.2 (40 right);
# 200 unanswerable: 10 at 0.9 (none right), 30 at 0.6 (one right), 160 at 0.1 (none right).
ANSWERABLE = _stratum((0.9, 200, 180), (0.6, 200, 120), (0.2, 200, 40))
UNANSWERABLE = _stratum((0.9, 10, 0), (0.6, 30, 1), (0.1, 160, 0))


def _exact(k: int, n: int) -> tuple[float, float]:
    """scipy's exact two-sided 95% interval: its ends are the one-sided bounds at 2.5% = δ/4 for δ = 0.1."""
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return ci.low, ci.high


def test_binomial_bound_matches_scipy_and_the_ends() -> None:
    for k, n in [(20, 600), (180, 600), (10, 200), (0, 50), (50, 50)]:
        low, high = _exact(k, n)
        assert binomial_bound(k, n, 0.025, upper=True) == pytest.approx(high, abs=1e-12)
        assert binomial_bound(k, n, 0.025, upper=False) == pytest.approx(low, abs=1e-12)
    assert binomial_bound(0, 50, 0.025, upper=False) == 0.0 and binomial_bound(50, 50, 0.025, upper=True) == 1.0


def test_the_mixed_threshold_by_hand() -> None:
    # At λ = 0.9 (and every grid point down to 0.65) 200 answerable are answered, 20 wrong and 180 right, and 10
    # unanswerable, all wrong. The bounds at δ/4 = 0.025 (scipy's exact interval):
    #   W_A ≤ 0.051013 (20/600), R_A ≥ 0.263561 (180/600), W_U ≤ 0.090028 (10/200), R_U ≥ 0.
    # At share 0.33: W = 0.67·0.051013 + 0.33·0.090028 = 0.063887, R = 0.67·0.263561 = 0.176586, so the error
    # among answered is at most 0.063887 / 0.240473 = 0.26567 ≤ 0.3: certified.
    # At λ = 0.6, 400 answerable (100 wrong, 300 right) and 40 unanswerable (39 wrong, 1 right):
    #   W = 0.67·0.198944 + 0.33·0.256786 = 0.218031, R = 0.67·0.459244 + 0.33·0.000127 = 0.307735,
    #   bound 0.41469 > 0.3: the sequence stops, and the threshold is the last certified λ, 0.65.
    bound = mixed_bound(ANSWERABLE, UNANSWERABLE, 0.9, delta=0.1)
    assert bound.wrong == pytest.approx((_exact(20, 600)[1], _exact(10, 200)[1]), abs=1e-12)
    assert bound.right == pytest.approx((_exact(180, 600)[0], 0.0), abs=1e-12)
    assert bound.error(0.33) == pytest.approx(0.26567, abs=1e-5)
    assert mixed_bound(ANSWERABLE, UNANSWERABLE, 0.6, delta=0.1).error(0.33) == pytest.approx(0.41469, abs=1e-5)
    chosen = mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.33, delta=0.1)
    assert chosen.threshold == 0.65 and chosen.share == 0.33 and chosen.bound == pytest.approx(0.26567, abs=1e-5)
    # the training mix at 0.65: coverage 0.67·200/600 + 0.33·10/200, error (0.67·20/600 + 0.33·10/200) / coverage
    assert chosen.coverage == pytest.approx(0.67 / 3 + 0.33 * 0.05)
    assert chosen.error == pytest.approx((0.67 * 20 / 600 + 0.33 * 0.05) / (0.67 / 3 + 0.33 * 0.05))
    assert chosen.to_dict()["bound"] == chosen.bound and "p_value" in chosen.to_dict()


def test_a_larger_share_certifies_less_and_no_share_is_the_answerable_alone() -> None:
    # At share 0.9 the 10 answered unanswerable questions dominate: W = 0.1·0.051013 + 0.9·0.090028 = 0.086127,
    # R = 0.1·0.263561 = 0.026356, bound 0.7657 > 0.3 at the first λ tested: no threshold.
    assert mixed_bound(ANSWERABLE, UNANSWERABLE, 0.9, delta=0.1).error(0.9) == pytest.approx(0.7657, abs=1e-4)
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.9).threshold is None
    # At share 0 only the answerable bounds count: 0.051013 / (0.051013 + 0.263561) = 0.16216 at 0.9, and at 0.6
    # 0.198944 / (0.198944 + 0.459244) = 0.30226 > 0.3: the threshold is again 0.65.
    assert mixed_bound(ANSWERABLE, UNANSWERABLE, 0.6, delta=0.1).error(0.0) == pytest.approx(0.30226, abs=1e-5)
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.0).threshold == 0.65
    # the bound grows with the share whenever the unanswerable questions answered are worse than the answerable
    errors = [mixed_bound(ANSWERABLE, UNANSWERABLE, 0.9, delta=0.1).error(s) for s in (0.0, 0.1, 0.33, 0.5, 0.9)]
    assert errors == sorted(errors)


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match="share"):
        mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=1.0)
    with pytest.raises(InputError, match="at least one question"):
        mixed_risk_threshold(ANSWERABLE, Stratum(np.zeros(0), np.zeros(0, dtype=bool)), alpha=0.3, share=0.2)
