"""Abstention at a chosen risk: the threshold on P(right) below which eor says "I don't know", chosen on
training questions so that the error rate among the questions it answers is at most ALPHA.

Learn then Test (Angelopoulos, Bates, Candès, Jordan and Lei 2021) with fixed-sequence testing, fixed before
any held-out question is seen:

1. **Probabilities** are out of fold: one P(right) per training question, from a model that did not fit on
   it (voters.right; never a voter's predictions on its own fitting data).
2. **Hypotheses.** For each threshold λ of the fixed grid `GRID` (0.00, 0.05, ..., 0.95), a question is
   answered when P(right) ≥ λ; H_λ says that the error rate among answered questions exceeds α.
3. **P-values.** With n_λ training questions answered at λ and e_λ of them wrong, p_λ = P(Binom(n_λ, α) ≤
   e_λ), the binomial tail: given n_λ, the answered questions are drawn from those a new question answered at
   λ is drawn from, so their errors are Binom(n_λ, r_λ) and p_λ is valid whenever r_λ ≥ α.
4. **Fixed sequence.** The hypotheses are tested in a fixed order, from the highest λ down, each at level δ,
   until the first that is not rejected; the threshold is the last rejected λ (the most questions answered
   among those shown safe). Whatever the order, the chance of rejecting any true H_λ is at most δ. A λ that
   answers less than `MIN_COVERAGE` (a tenth) of the training questions is skipped, not tested: a threshold
   that answers so few questions is of little use, and a few errors among them would end the sequence (on
   the 600 NQ training questions the cascade's sequence ended at λ = 0.8, 47 questions, with the 30-question
   minimum first tried; this rule was fixed then, before any dev question was seen). The skip depends on
   the probabilities alone, not on which answers were right. When nothing is rejected, eor abstains on every
   question at that α.

The guarantee, in plain words: if new questions are like the training ones (exchangeable with them), then with
probability at least 1 − δ over the draw of the training questions, the share of wrong answers among the
questions eor answers is at most α. It is about the long run of answered questions, not any one answer. It is
nominal here, for three reasons said in docs/abstention.md: the thresholds are chosen on cross-fitted
probabilities (voters.right) and applied to the logistic fitted on every row; the features, this procedure
and its minimum coverage were chosen after looking at the same training questions; and the skip of step 4
is exact only given the probabilities. The held-out dev figures are the evidence.

**For a mix** (`mixed_risk_threshold`) of answerable questions and a share s of questions the corpus cannot
answer, each λ is tested the same way by one test of the error among answered on the mix, from both samples at
once (`MixedCounts.p_value`: the two strata's sampling errors add as variances; Berger and Boos's p-value for the
nuisance rates). It replaced a union of three Clopper–Pearson bounds at δ/3 each (up to 6a51b45), which
added the bounds' widths; it was chosen after that union's results on the NQ training questions had been read
(docs/abstention.md says what each certifies).

`thresholds` applies it to a grid of α (`ALPHAS`) at δ = `DELTA` (eor.learning.calibration's `calibrate` fits a voter's
P(right) and these thresholds on training records), and `abstention` decides at answer time: answer when
P(right) is at least the threshold of the largest α of the grid not above the risk asked for.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from eor.core.errors import InputError
from eor.core.formatting import below

GRID = tuple(round(0.05 * i, 2) for i in range(20))  # 0.00 ... 0.95: fixed before dev is touched
ALPHAS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
DELTA = 0.1
MIN_COVERAGE = 0.1  # a threshold answering a smaller share of the training questions is not tested (step 4)
#: the share of questions the corpus cannot answer that a mixed guarantee holds for unless the user says otherwise:
#: a third, the share of NQ-open questions whose answer the shipped corpus lacks among those it was sampled with
#: (docs/abstention.md, "Beyond the corpus")
DEFAULT_SHARE = 0.33


@dataclass(frozen=True)
class RiskThreshold:
    """The threshold chosen for `alpha` (None: abstain on every question), and on the training questions its
    coverage, error rate among answered and p-value."""

    alpha: float
    threshold: float | None
    coverage: float
    error: float | None
    p_value: float | None
    # a threshold for a mix (`mixed_risk_threshold`): the unanswerable share it holds for, the bound it certified
    share: float | None = None
    bound: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        data = asdict(self)
        for key in ("share", "bound"):
            if data[key] is None:
                del data[key]
        return data


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
    min_coverage: float = MIN_COVERAGE,
) -> RiskThreshold:
    """The module's procedure for one `alpha` over out-of-fold `probability` and whether each answer was
    `right`."""
    if not 0 < alpha < 1 or not 0 < delta < 1:
        raise InputError(f"alpha and delta must lie in (0, 1), got {alpha} and {delta}")
    p = np.asarray(probability, dtype=float)
    wrong = ~np.asarray(right, dtype=bool)
    if p.shape != wrong.shape or p.ndim != 1:
        raise InputError(f"one probability per answer: {p.shape} probabilities, {wrong.shape} answers")
    chosen = RiskThreshold(alpha, None, 0.0, None, None)
    for threshold in sorted(grid, reverse=True):  # highest first: the fixed sequence
        answered = p >= threshold
        n, errors = int(answered.sum()), int(wrong[answered].sum())
        if n < min_coverage * len(p):
            continue
        p_value = binomial_p_value(errors, n, alpha)
        if p_value > delta:
            break
        chosen = RiskThreshold(alpha, float(threshold), n / len(p), errors / n, p_value)
    return chosen


def thresholds(
    probability: Sequence[float] | np.ndarray,
    right: Sequence[bool] | np.ndarray,
    alphas: Sequence[float] = ALPHAS,
    delta: float = DELTA,
) -> list[RiskThreshold]:
    """`risk_threshold` for every alpha of `alphas`."""
    return [risk_threshold(probability, right, alpha, delta) for alpha in alphas]


# -- a guarantee for a mix of answerable and unanswerable questions ------------------------------------------


@dataclass(frozen=True)
class Stratum:
    """One kind of training question (answerable, or whose answer the corpus does not hold): each question's
    out-of-fold P(right) and whether its answer was right."""

    probability: np.ndarray
    right: np.ndarray

    def counts(self, threshold: float) -> tuple[int, int, int]:
        """(questions, answered and wrong, answered and right) at `threshold`."""
        answered = np.asarray(self.probability, dtype=float) >= threshold
        right = np.asarray(self.right, dtype=bool)
        return len(right), int((answered & ~right).sum()), int((answered & right).sum())


def binomial_bound(count: int, n: int, level: float, upper: bool) -> float:
    """Clopper–Pearson's exact one-sided bound on a binomial rate from `count` of `n`, holding with probability
    1 − `level`:
    the upper bound (beta quantile 1 − level of Beta(count + 1, n − count)) or the lower (quantile `level` of
    Beta(count, n − count + 1)); 1 and 0 at the ends."""
    from scipy.stats import beta

    if upper:
        return 1.0 if count >= n else float(beta.ppf(1 - level, count + 1, n - count))
    return 0.0 if count <= 0 else float(beta.ppf(level, count, n - count + 1))


#: Berger and Boos's (1994) allowance: the two nuisance rates of the mixed test (the answerable questions' answered
#: share, the no-corpus questions' answered-and-wrong share) are confined to a 1 − GAMMA confidence set (GAMMA/2 to
#: each, Clopper–Pearson) and GAMMA is added to the p-value; 0.001 is their suggested value
GAMMA = 0.001
#: points of the no-corpus rate over which the supremum of the mixed test is taken (then refined around the best)
NUISANCE_POINTS = 201


@dataclass(frozen=True)
class MixedCounts:
    """At one threshold, what the mixed test reads: of the `n` answerable questions, `answered` answered and
    `wrong` of them wrong; of the `m` no-corpus questions, `wrong_unanswerable` answered wrongly (those answered
    rightly are left out, which can only make the test more cautious)."""

    n: int
    answered: int
    wrong: int
    m: int
    wrong_unanswerable: int

    @classmethod
    def at(cls, answerable: Stratum, unanswerable: Stratum, threshold: float) -> MixedCounts:
        n, wrong, right = answerable.counts(threshold)
        m, wrong_unanswerable, _ = unanswerable.counts(threshold)
        return cls(n, wrong + right, wrong, m, wrong_unanswerable)

    def p_value(self, alpha: float, share: float) -> float:
        """The p-value of H: the error among answered on a mix with `share` unanswerable exceeds `alpha`.

        That error is ((1 − s)·C·e + s·W) / ((1 − s)·C + s·W) (C the answerable questions' answered share, e their
        error among answered, W the no-corpus questions' answered-and-wrong share), so H is D = (1 − s)·C·(e − α) +
        s·(1 − α)·W ≥ 0. The statistic is D's estimate T = a·(X/N − α) + b·Y/m, with X the N answerable answered's
        errors (binomial given N), Y the no-corpus answered wrongly (binomial, independent), b = s·(1 − α) and a =
        (1 − s)·C_low, C at its Clopper–Pearson lower bound at GAMMA/2: a smaller C only widens H, so a test of the
        wider H is valid whenever C ≥ C_low. The p-value is Berger and Boos's: the largest P(T ≤ t) over the
        boundary of H (e = α − b·W/a, with W from 0 up to W's upper bound at GAMMA/2 and at most α·a/b, where e
        reaches 0: inside H a larger e or, at e = 0, a larger W only lowers the tail), plus GAMMA. One test of the
        mix, so the two strata's sampling errors add as variances, not as bounds."""
        if self.answered == 0:
            return 1.0
        low = binomial_bound(self.answered, self.n, GAMMA / 2, upper=False)
        high = binomial_bound(self.wrong_unanswerable, self.m, GAMMA / 2, upper=True)
        a, b = (1 - share) * low, share * (1 - alpha)
        observed = a * (self.wrong / self.answered - alpha) + b * self.wrong_unanswerable / self.m
        wrongs = np.arange(self.m + 1)
        # the answerable errors X at most allowed beside each Y for T ≤ t (a hair of slack for rounding)
        most = np.floor(self.answered * (alpha + (observed - b * wrongs / self.m) / a) + 1e-9)
        top = min(high, alpha * a / b) if b > 0 else 0.0

        def tail(rates: np.ndarray) -> np.ndarray:
            from scipy.stats import binom

            error = np.clip(alpha - b * rates / a, 0.0, 1.0)[:, None]
            return np.sum(binom.pmf(wrongs, self.m, rates[:, None]) * binom.cdf(most, self.answered, error), axis=1)

        grid = np.linspace(0.0, top, NUISANCE_POINTS)
        values = tail(grid)
        best = int(values.argmax())
        largest = float(values[best])
        if top > 0:
            from scipy.optimize import minimize_scalar

            around = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
            refined = minimize_scalar(lambda rate: -float(tail(np.array([rate]))[0]), bounds=around, method="bounded")
            largest = max(largest, -float(refined.fun))
        return min(1.0, largest + GAMMA)

    def bound(self, share: float, delta: float) -> float:
        """The error among answered on the mix that the test certifies at `delta`: the smallest α (to 1e-4) that
        `p_value` rejects at, found by bisection (the p-value falls as α grows; tests/test_mixed_guarantee.py);
        1 when no α below 1 is rejected."""
        low, high = 0.0, 1.0
        if self.p_value(1 - 1e-4, share) > delta:
            return 1.0
        while high - low > 1e-4:
            middle = (low + high) / 2
            low, high = (low, middle) if self.p_value(middle, share) <= delta else (middle, high)
        return high


def mixed_risk_threshold(
    answerable: Stratum,
    unanswerable: Stratum,
    alpha: float,
    share: float,
    delta: float = DELTA,
    grid: Sequence[float] = GRID,
    min_coverage: float = MIN_COVERAGE,
) -> RiskThreshold:
    """The threshold for `alpha` on a mix where a share `share` of the questions have no answer in the corpus:
    fixed-sequence testing from the highest λ of the grid down (as `risk_threshold`), H_λ rejected when the mixed
    test's p-value (`MixedCounts.p_value`) is at most δ. A λ answering less than `min_coverage` of the answerable
    questions is skipped. `coverage` and `error` are the training mix's at `share` (each stratum's rates weighted
    by its share), `p_value` the test's, `bound` the error on the mix it certifies (`MixedCounts.bound`)."""
    chosen = RiskThreshold(alpha, None, 0.0, None, None, share)
    last: MixedCounts | None = None
    for threshold, counts in mixed_sequence(answerable, unanswerable, share, delta, grid, min_coverage, alpha):
        p_value = counts.p_value(alpha, share)
        if p_value > delta:
            break
        wrong_rate = (1 - share) * counts.wrong / counts.n + share * counts.wrong_unanswerable / counts.m
        _, wrong_unanswerable, right_unanswerable = unanswerable.counts(threshold)
        answered_unanswerable = wrong_unanswerable + right_unanswerable
        coverage = (1 - share) * counts.answered / counts.n + share * answered_unanswerable / counts.m
        chosen, last = RiskThreshold(alpha, float(threshold), coverage, wrong_rate / coverage, p_value, share), counts
    if last is None:
        return chosen
    return RiskThreshold(**{**asdict(chosen), "bound": last.bound(share, delta)})


def mixed_sequence(
    answerable: Stratum,
    unanswerable: Stratum,
    share: float,
    delta: float = DELTA,
    grid: Sequence[float] = GRID,
    min_coverage: float = MIN_COVERAGE,
    alpha: float = 0.5,
) -> Iterator[tuple[float, MixedCounts]]:
    """The λ that `mixed_risk_threshold` tests, in its order (from the highest of the grid down, skipping those
    that answer less than `min_coverage` of the answerable questions), each with the counts its test reads;
    `alpha` is only checked."""
    if not 0 < alpha < 1 or not 0 < delta < 1 or not 0 <= share < 1:
        raise InputError(f"alpha and delta must lie in (0, 1) and the share in [0, 1), got {alpha}, {delta}, {share}")
    for threshold in sorted(grid, reverse=True):
        counts = MixedCounts.at(answerable, unanswerable, threshold)
        if counts.n == 0 or counts.m == 0:
            raise InputError("each stratum needs at least one question")
        if counts.answered < min_coverage * counts.n:
            continue
        yield float(threshold), counts


def sequence_end(
    answerable: Stratum,
    unanswerable: Stratum,
    alpha: float,
    share: float,
    delta: float = DELTA,
    grid: Sequence[float] = GRID,
    min_coverage: float = MIN_COVERAGE,
) -> tuple[float, float, float] | None:
    """Where `mixed_risk_threshold`'s sequence for `alpha` stops: the first λ tested whose p-value exceeds δ, that
    p-value and the error on the mix certified there (None: every λ tested is certified, or none was tested). What
    a report says when no threshold is certified."""
    for threshold, counts in mixed_sequence(answerable, unanswerable, share, delta, grid, min_coverage, alpha):
        p_value = counts.p_value(alpha, share)
        if p_value > delta:
            return threshold, p_value, counts.bound(share, delta)
    return None


# -- the decision at answer time ----------------------------------------------------------------------------


#: the two reasons of a decline (`Abstention.kind`, `abstention.kind` in every interface)
NOT_SURE, NOT_IN_DOCUMENTS = "not_sure", "not_in_documents"


@dataclass(frozen=True)
class Abstention:
    """At answer time: answer, or abstain because P(right) is below the threshold for the risk asked."""

    abstained: bool
    risk: float  # the error rate asked for
    alpha: float  # the grid's level used: the largest stored one not above `risk`
    threshold: float | None  # None: no threshold kept that error rate on the training questions
    probability: float
    correctness: str
    delta: float = DELTA
    # P(unanswerable) of the choice (voters.right.UnanswerableFit; None: the weights file has none), and the
    # unanswerable share the threshold holds for (None: a guarantee for answerable questions only)
    unanswerable: float | None = None
    share: float | None = None
    # why the thresholds do not hold here (eor.pipeline.pool.outside_guarantee: certified on another corpus or
    # reader's questions); None: they do, or nothing says otherwise
    outside: str | None = None

    @property
    def kind(self) -> str | None:
        """Why eor declined: NOT_IN_DOCUMENTS where P(unanswerable) reaches 1/2, else NOT_SURE; None: answered."""
        if not self.abstained:
            return None
        return NOT_IN_DOCUMENTS if self.unanswerable is not None and self.unanswerable >= 0.5 else NOT_SURE

    def reason(self) -> str:
        outside = "" if self.outside is None else f"; outside its guarantee here: {self.outside}"
        if self.abstained and not math.isfinite(self.probability):  # e.g. a judge with no candidate to choose
            return f"no answer to stand behind: P(right) unknown{outside}"
        if self.threshold is None:
            none = (
                f"no threshold kept an error rate of {self.alpha:g} on the training questions: every question is "
                f"declined at this risk{outside}"
            )
            if self.kind != NOT_IN_DOCUMENTS:
                return none
            # said as any decline of its kind is, then why no answer is given at this risk
            return f"the passages read do not seem to hold the answer (P(unanswerable) {self.unanswerable:.2f}); {none}"
        guarantee = (
            f"the threshold for an error rate of at most {self.alpha:g} ({self.correctness}; Learn then Test, fixed "
            f"sequence, δ {self.delta:g}"
            + (
                "; for answerable questions only: certified without questions the documents cannot answer"
                if self.share is None
                else f"; for a mix with a share {self.share:g} of questions the documents cannot answer"
            )
            + ")"
            + outside
        )
        if not self.abstained:
            return f"answered: P(right) {self.probability:.2f} ≥ {self.threshold:.2f}, {guarantee}"
        under = below(self.probability, self.threshold)
        if self.kind == NOT_IN_DOCUMENTS:
            return (
                f"the passages read do not seem to hold the answer (P(unanswerable) {self.unanswerable:.2f}); "
                f"P(right) {under}, {guarantee}"
            )
        return f"not sure enough: P(right) {under}, {guarantee}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "abstained": self.abstained,
            "kind": self.kind,
            "risk": self.risk,
            "alpha": self.alpha,
            "threshold": self.threshold,
            "probability": round(self.probability, 4) if math.isfinite(self.probability) else None,
            "correctness": self.correctness,
            "reason": self.reason(),
        }
        if self.unanswerable is not None:
            data["unanswerable"] = round(self.unanswerable, 4)
        if self.share is not None:
            data["share"] = self.share
        if self.outside is not None:
            data["outside_guarantee"] = self.outside
        return data


def check_risk(value: Any) -> float:
    """The risk as a float in (0, 1); InputError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InputError(
            f"risk must be a number in (0, 1), the largest error rate among answered questions; got {value!r}"
        )
    return float(value)


class Thresholded(Protocol):
    """What abstention reads of a fitted P(right): voters.right.RightModel, or a judge voter's fit
    (voters.judge_selector): the thresholds chosen by `thresholds`, the correctness and the δ they hold for."""

    @property
    def thresholds(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def correctness(self) -> str: ...

    @property
    def delta(self) -> float | None: ...


def abstention(
    model: Thresholded | None,
    probability: float,
    risk: float,
    source: str = "the weights file",
    unanswerable: float | None = None,
    outside: str | None = None,
) -> Abstention:
    """Whether to abstain at `risk` given P(right): the stored threshold of the largest α ≤ risk of `model`
    (that α's guarantee then holds, and so does risk's). `unanswerable`: P(unanswerable) of the choice, which
    names the reason of a decline; `outside`: why the guarantee does not hold for this pool (said with it).
    InputError when `model` holds no thresholds or none at or below risk."""
    risk = check_risk(risk)
    if model is None or not model.thresholds:
        raise InputError(
            f"a risk needs abstention thresholds, and {source} has none: train it again with this eor "
            f"(`eor train` stores them)"
        )
    levels = [row for row in model.thresholds if float(row["alpha"]) <= risk + 1e-12]
    if not levels:
        lowest = min(float(row["alpha"]) for row in model.thresholds)
        raise InputError(f"risk {risk:g} is below the lowest error rate {source} has a threshold for ({lowest:g})")
    row = max(levels, key=lambda row: float(row["alpha"]))
    threshold = None if row["threshold"] is None else float(row["threshold"])
    declined = threshold is None or not probability >= threshold  # an unknown (NaN) P(right) is declined
    delta = DELTA if model.delta is None else model.delta
    share = None if row.get("share") is None else float(row["share"])
    return Abstention(
        declined,
        risk,
        float(row["alpha"]),
        threshold,
        float(probability),
        model.correctness,
        delta,
        unanswerable,
        share,
        outside,
    )
