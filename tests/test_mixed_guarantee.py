"""The guarantee for a mix of answerable and unanswerable questions (eor.pipeline.abstention's
`mixed_risk_threshold`): one test of the error among answered on the mix, its statistic the estimate of
D = (1 − s)·C·(e − α) + s·(1 − α)·W from both strata, its p-value Berger and Boos's supremum over the null's
boundary within a 1 − γ confidence set of the nuisance rates, plus γ. Checked against a brute-force enumeration
written apart, against scipy's binomial tail where the mix has no unanswerable share, and for its size by exact
enumeration of every outcome at points of the null."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from eor.core.errors import InputError
from eor.pipeline.abstention import (
    GAMMA,
    MixedCounts,
    Stratum,
    binomial_bound,
    binomial_p_value,
    mixed_risk_threshold,
    sequence_end,
)


def _stratum(*groups: tuple[float, int, int]) -> Stratum:
    """Questions in groups of (P(right), how many, how many of them right)."""
    probability = np.concatenate([np.full(n, p) for p, n, _ in groups])
    right = np.concatenate([np.arange(n) < k for _, n, k in groups])
    return Stratum(probability, right)


# 600 answerable: 200 at P 0.9 (180 right), 200 at 0.6 (120 right), 200 at 0.2 (40 right);
# 200 unanswerable: 10 at 0.9 (none right), 30 at 0.6 (one right), 160 at 0.1 (none right).
ANSWERABLE = _stratum((0.9, 200, 180), (0.6, 200, 120), (0.2, 200, 40))
UNANSWERABLE = _stratum((0.9, 10, 0), (0.6, 30, 1), (0.1, 160, 0))
DELTA = 0.1


def _one_sided(k: int, n: int, level: float) -> tuple[float, float]:
    """scipy's exact two-sided interval at 1 − 2·level: its ends are the one-sided bounds at `level`."""
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - 2 * level, method="exact")
    return ci.low, ci.high


def _brute_p_value(counts: MixedCounts, alpha: float, share: float, points: int = 4001) -> float:
    """The mixed test's p-value written apart: every outcome (X errors of the N answered, Y no-corpus answered
    wrongly) enumerated, its statistic compared with the observed one, the tail's largest value over a fine grid
    of the boundary of H within the Clopper–Pearson set at γ/2 (scipy's exact interval), plus γ."""
    low = _one_sided(counts.answered, counts.n, GAMMA / 2)[0]
    high = _one_sided(counts.wrong_unanswerable, counts.m, GAMMA / 2)[1]
    a, b = (1 - share) * low, share * (1 - alpha)
    n_answered, m = counts.answered, counts.m

    def statistic(x: int, y: int) -> float:
        return a * (x / n_answered - alpha) + b * y / m

    observed = statistic(counts.wrong, counts.wrong_unanswerable)
    below = [
        (x, y) for x, y in itertools.product(range(n_answered + 1), range(m + 1)) if statistic(x, y) <= observed + 1e-12
    ]
    xs, ys = np.array([x for x, _ in below]), np.array([y for _, y in below])
    best = 0.0
    for rate in np.linspace(0.0, min(high, alpha * a / b), points):
        error = alpha - b * rate / a
        best = max(best, float(np.sum(binom.pmf(xs, n_answered, error) * binom.pmf(ys, m, rate))))
    return best + GAMMA


def test_binomial_bound_matches_scipy_and_the_ends() -> None:
    for k, n in [(20, 600), (180, 600), (10, 200), (0, 50), (50, 50)]:
        low, high = _one_sided(k, n, 0.025)
        assert binomial_bound(k, n, 0.025, upper=True) == pytest.approx(high, abs=1e-12)
        assert binomial_bound(k, n, 0.025, upper=False) == pytest.approx(low, abs=1e-12)
    assert binomial_bound(0, 50, 0.025, upper=False) == 0.0 and binomial_bound(50, 50, 0.025, upper=True) == 1.0


@pytest.mark.parametrize(
    ("counts", "alpha", "share"),
    [
        (MixedCounts(n=30, answered=12, wrong=2, m=15, wrong_unanswerable=1), 0.3, 0.33),
        (MixedCounts(n=40, answered=20, wrong=3, m=20, wrong_unanswerable=0), 0.3, 0.5),
        (MixedCounts(n=25, answered=10, wrong=4, m=12, wrong_unanswerable=2), 0.4, 0.1),
    ],
)
def test_the_p_value_against_an_enumeration_written_apart(counts: MixedCounts, alpha: float, share: float) -> None:
    assert counts.p_value(alpha, share) == pytest.approx(_brute_p_value(counts, alpha, share), abs=2e-5)


def test_with_no_unanswerable_share_it_is_the_binomial_tail_plus_gamma() -> None:
    # s = 0: T = a·(X/N − α), H's boundary is e = α, so the p-value is P(Binom(200, 0.3) ≤ 20) + γ
    counts = MixedCounts.at(ANSWERABLE, UNANSWERABLE, 0.9)
    assert (counts.n, counts.answered, counts.wrong, counts.m, counts.wrong_unanswerable) == (600, 200, 20, 200, 10)
    expected = float(binom.cdf(20, 200, 0.3)) + GAMMA
    assert (
        counts.p_value(0.3, 0.0)
        == pytest.approx(expected, rel=1e-9)
        == pytest.approx(binomial_p_value(20, 200, 0.3) + GAMMA)
    )


def test_the_p_value_falls_as_alpha_grows_and_the_bound_is_where_it_crosses_delta() -> None:
    for threshold in (0.9, 0.6):
        counts = MixedCounts.at(ANSWERABLE, UNANSWERABLE, threshold)
        values = [counts.p_value(alpha, 0.33) for alpha in np.linspace(0.05, 0.95, 37)]
        assert all(later <= earlier + 1e-12 for earlier, later in itertools.pairwise(values))
        bound = counts.bound(0.33, DELTA)
        assert counts.p_value(bound, 0.33) <= DELTA < counts.p_value(bound - 2e-4, 0.33)


def _size(n: int, m: int, coverage: float, rate: float, alpha: float, share: float) -> tuple[float, float]:
    """The chance that the test rejects at level DELTA when the truth is (C, W = rate) on H's boundary (e = α −
    b·W/((1 − s)·C)), summed exactly over every outcome (N answered, X of them wrong, Y); outcomes of probability
    below 1e-9 are not computed, and their mass is returned beside the sum (the size is at most the two added)."""
    error = alpha - share * (1 - alpha) * rate / ((1 - share) * coverage)
    rejected = neglected = 0.0
    for answered, wrong, y in itertools.product(range(1, n + 1), range(n + 1), range(m + 1)):
        if wrong > answered:
            continue
        chance = binom.pmf(answered, n, coverage) * binom.pmf(wrong, answered, error) * binom.pmf(y, m, rate)
        if chance < 1e-9:
            neglected += chance
        elif MixedCounts(n, answered, wrong, m, y).p_value(alpha, share) <= DELTA:
            rejected += chance
    return rejected, neglected


@pytest.mark.parametrize(("coverage", "rate"), [(0.5, 0.0), (0.5, 0.04), (0.7, 0.1)])
def test_its_size_at_points_of_the_null_is_at_most_delta(coverage: float, rate: float) -> None:
    rejected, neglected = _size(n=36, m=16, coverage=coverage, rate=rate, alpha=0.3, share=0.33)
    assert rejected + neglected <= DELTA
    assert neglected < 1e-5


def test_it_has_power_where_the_mix_is_well_below_alpha() -> None:
    # the truth C 0.5, e 0.1, W 0: a mix error of 0.1 where α is 0.3; the same 36 and 16 questions reject in 49% of
    # draws (so few questions pay for the nuisance rates' confidence set; the NQ strata are 1,566 and 200)
    rejected = 0.0
    for answered, wrong in itertools.product(range(1, 37), range(37)):
        if wrong <= answered and MixedCounts(36, answered, wrong, 16, 0).p_value(0.3, 0.33) <= DELTA:
            rejected += binom.pmf(answered, 36, 0.5) * binom.pmf(wrong, answered, 0.1)
    assert rejected == pytest.approx(0.4913, abs=1e-4)


def test_the_mixed_threshold() -> None:
    # At λ = 0.9 (and every grid point down to 0.65) 200 of the 600 answerable are answered, 20 of them wrong, and
    # 10 unanswerable, all wrong; at λ = 0.6, 400 answered (100 wrong) and 39 unanswerable answered wrongly.
    high, low = MixedCounts.at(ANSWERABLE, UNANSWERABLE, 0.9), MixedCounts.at(ANSWERABLE, UNANSWERABLE, 0.6)
    assert (low.answered, low.wrong, low.wrong_unanswerable) == (400, 100, 39)
    assert high.p_value(0.3, 0.33) == pytest.approx(_brute_p_value(high, 0.3, 0.33, points=801), abs=2e-5)
    assert high.p_value(0.3, 0.33) <= DELTA < low.p_value(0.3, 0.33)
    chosen = mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.33, delta=DELTA)
    assert chosen.threshold == 0.65 and chosen.share == 0.33 and chosen.p_value == high.p_value(0.3, 0.33)
    assert chosen.bound == high.bound(0.33, DELTA) and chosen.bound is not None and chosen.bound <= 0.3
    # the training mix at 0.65: coverage 0.67·200/600 + 0.33·10/200, error (0.67·20/600 + 0.33·10/200) / coverage
    assert chosen.coverage == pytest.approx(0.67 / 3 + 0.33 * 0.05)
    assert chosen.error == pytest.approx((0.67 * 20 / 600 + 0.33 * 0.05) / (0.67 / 3 + 0.33 * 0.05))
    assert chosen.to_dict()["bound"] == chosen.bound and chosen.to_dict()["p_value"] == chosen.p_value
    # where the sequence stops, what a report says when nothing is certified: at α 0.3 the λ = 0.6 above; at α 0.2
    # the first λ tested, 0.9 (0.95 answers no answerable question: skipped, not tested), its bound above 0.2
    assert sequence_end(ANSWERABLE, UNANSWERABLE, 0.3, 0.33) == (0.6, low.p_value(0.3, 0.33), low.bound(0.33, DELTA))
    stop = sequence_end(ANSWERABLE, UNANSWERABLE, 0.2, 0.33)
    assert stop is not None and stop[0] == 0.9 and stop[1] > DELTA and stop[2] > 0.2
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.2, share=0.33).threshold is None
    # at α 0.9 every λ tested is certified: the sequence never stops
    assert sequence_end(ANSWERABLE, UNANSWERABLE, 0.9, 0.33) is None


def test_a_larger_share_certifies_less() -> None:
    # At share 0.9 the 10 answered unanswerable questions dominate: no threshold at α 0.3
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.9).threshold is None
    # At share 0 only the answerable questions count: 0.25 (which answers as 0.6 does) is certified at α 0.3
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.0).threshold == 0.25
    # the certified error grows with the share whenever the unanswerable questions answered are worse
    counts = MixedCounts.at(ANSWERABLE, UNANSWERABLE, 0.9)
    bounds = [counts.bound(s, DELTA) for s in (0.0, 0.1, 0.33, 0.5, 0.9)]
    assert bounds == sorted(bounds)


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match="share"):
        mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=1.0)
    with pytest.raises(InputError, match="at least one question"):
        mixed_risk_threshold(ANSWERABLE, Stratum(np.zeros(0), np.zeros(0, dtype=bool)), alpha=0.3, share=0.2)
