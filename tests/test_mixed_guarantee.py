"""The guarantee for a mix of answerable and unanswerable questions (eor.pipeline.abstention's
`mixed_risk_threshold`), worked by hand: the answerable questions' error among answered bounded above (given how
many were answered) and their answered share below, the unanswerable questions' answered-and-wrong share above
(Clopper–Pearson, δ/3 each), combined at the share of unanswerable questions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from eor.core.errors import InputError
from eor.pipeline.abstention import Stratum, binomial_bound, mixed_bound, mixed_risk_threshold, sequence_end


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


def _exact(k: int, n: int, level: float = DELTA / 3) -> tuple[float, float]:
    """scipy's exact two-sided interval at 1 − 2·level: its ends are the one-sided bounds at `level`."""
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - 2 * level, method="exact")
    return ci.low, ci.high


def test_binomial_bound_matches_scipy_and_the_ends() -> None:
    for k, n in [(20, 600), (180, 600), (10, 200), (0, 50), (50, 50)]:
        low, high = _exact(k, n, 0.025)
        assert binomial_bound(k, n, 0.025, upper=True) == pytest.approx(high, abs=1e-12)
        assert binomial_bound(k, n, 0.025, upper=False) == pytest.approx(low, abs=1e-12)
    assert binomial_bound(0, 50, 0.025, upper=False) == 0.0 and binomial_bound(50, 50, 0.025, upper=True) == 1.0


def test_the_mixed_threshold_by_hand() -> None:
    # At λ = 0.9 (and every grid point down to 0.65) 200 of the 600 answerable are answered, 20 of them wrong, and
    # 10 unanswerable, all wrong. The bounds at δ/3 (scipy's exact interval):
    #   e ≤ 0.146894 (20 of the 200 answered), C ≥ 0.298005 (200 of 600), W ≤ 0.087315 (10 of 200).
    # At share 0.33: (0.67·0.298005·0.146894 + 0.33·0.087315) / (0.67·0.298005 + 0.33·0.087315)
    #   = (0.029329 + 0.028814) / (0.199663 + 0.028814) = 0.25448 ≤ 0.3: certified.
    # At λ = 0.6, 400 answerable answered (100 wrong) and 39 unanswerable answered wrongly (one rightly):
    #   e ≤ 0.292528, C ≥ 0.629867, W ≤ 0.252800: (0.67·0.629867·0.292528 + 0.33·0.252800) /
    #   (0.67·0.629867 + 0.33·0.252800) = 0.40930 > 0.3: the sequence stops; the threshold is 0.65.
    bound = mixed_bound(ANSWERABLE, UNANSWERABLE, 0.9, DELTA)
    assert bound.error_answerable == pytest.approx(_exact(20, 200)[1], abs=1e-12) == pytest.approx(0.146894, abs=1e-6)
    assert bound.answered_answerable == pytest.approx(_exact(200, 600)[0], abs=1e-12)
    assert bound.wrong_unanswerable == pytest.approx(_exact(10, 200)[1], abs=1e-12)
    assert bound.error(0.33) == pytest.approx(0.25448, abs=1e-5)
    assert mixed_bound(ANSWERABLE, UNANSWERABLE, 0.6, DELTA).error(0.33) == pytest.approx(0.40930, abs=1e-5)
    chosen = mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.33, delta=DELTA)
    assert chosen.threshold == 0.65 and chosen.share == 0.33 and chosen.bound == pytest.approx(0.25448, abs=1e-5)
    # the training mix at 0.65: coverage 0.67·200/600 + 0.33·10/200, error (0.67·20/600 + 0.33·10/200) / coverage
    assert chosen.coverage == pytest.approx(0.67 / 3 + 0.33 * 0.05)
    assert chosen.error == pytest.approx((0.67 * 20 / 600 + 0.33 * 0.05) / (0.67 / 3 + 0.33 * 0.05))
    assert chosen.to_dict()["bound"] == chosen.bound and "p_value" in chosen.to_dict()
    # where the sequence stops, what a report says when nothing is certified: at α 0.3 the λ = 0.6 above; at α 0.2
    # the first λ tested, 0.9 (0.95 answers no answerable question: skipped, not tested), bound 0.25448 > 0.2
    assert sequence_end(ANSWERABLE, UNANSWERABLE, 0.3, 0.33) == (0.6, pytest.approx(0.40930, abs=1e-5))
    assert sequence_end(ANSWERABLE, UNANSWERABLE, 0.2, 0.33) == (0.9, pytest.approx(0.25448, abs=1e-5))
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.2, share=0.33).threshold is None
    # at α 0.9 every λ tested is certified: the sequence never stops
    assert sequence_end(ANSWERABLE, UNANSWERABLE, 0.9, 0.33) is None


def test_a_larger_share_certifies_less_and_no_share_is_the_answerable_alone() -> None:
    # At share 0.9 the 10 answered unanswerable questions dominate: the bound at 0.9 is 0.76544 > 0.3: no threshold.
    assert mixed_bound(ANSWERABLE, UNANSWERABLE, 0.9, DELTA).error(0.9) == pytest.approx(0.76544, abs=1e-5)
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.9).threshold is None
    # At share 0 the bound is the answerable questions' error bound alone: 0.292528 ≤ 0.3 at 0.6 (and down to
    # 0.25, which answer the same), then at 0.2 every answerable question, 240 of 600 wrong: 0.4 and more.
    assert mixed_bound(ANSWERABLE, UNANSWERABLE, 0.6, DELTA).error(0.0) == pytest.approx(0.292528, abs=1e-6)
    assert mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=0.0).threshold == 0.25
    # the bound grows with the share whenever the unanswerable questions answered are worse than the answerable
    errors = [mixed_bound(ANSWERABLE, UNANSWERABLE, 0.9, DELTA).error(s) for s in (0.0, 0.1, 0.33, 0.5, 0.9)]
    assert errors == sorted(errors)


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match="share"):
        mixed_risk_threshold(ANSWERABLE, UNANSWERABLE, alpha=0.3, share=1.0)
    with pytest.raises(InputError, match="at least one question"):
        mixed_risk_threshold(ANSWERABLE, Stratum(np.zeros(0), np.zeros(0, dtype=bool)), alpha=0.3, share=0.2)
