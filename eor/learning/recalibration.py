"""P(right) recalibrated on a few labelled questions of one's own (`eor calibrate`): the shipped voter and its
P(right) kept, made to fit another corpus or reader with two parameters, and thresholds of `--risk` chosen on
those questions.

**Platt scaling** (Platt 1999) over the shipped probability: P' = σ(a · logit P + b), fitted by logistic
regression on the labelled questions (one feature, two parameters; scikit-learn, C = 1e4: next to no
penalty), a fit of voters.right apart for each of its fits (voters.choice_evidence.FITS) that scores at least
MIN_QUESTIONS of them. With questions the documents cannot answer as well (`--nocorpus`), each kind is weighted
so that they make up the share s of the mix the user expects.

**The thresholds** are chosen on the shipped P, not on P': the fixed grid of eor.pipeline.abstention (0.00,
0.05, ..., 0.95, fixed before any of the user's questions is read) is tested on the labelled questions by
Learn then Test's fixed sequence (`risk_threshold`), or for a mix by `mixed_risk_threshold` (one test of the mix,
both kinds at once, at the stated share), and each threshold λ chosen is stored as its image σ(a · logit λ + b). As
P' rises with P (a > 0, checked), a question has P' at least that image exactly when P ≥ λ: the fitted a and b
change what P(right) says, never which questions are answered at a threshold, so the guarantee is that of a
grid fixed in advance, with the user's questions as the test's sample (exchangeable with the questions asked
later, the one assumption). Without questions the documents cannot answer, it holds for answerable questions
only, and says so.

**The slack** of a threshold: the exact upper bound on the error among answered questions that the labelled
questions certify (Clopper–Pearson at δ, or the error on the mix the mixed test certifies) minus the error seen on
them; with 60 questions, tens of points at every α (`Recalibrated.lines` prints it): what so few questions cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from eor.core.errors import InputError
from eor.core.formatting import fixed, pct, signed, significant
from eor.pipeline.abstention import (
    ALPHAS,
    DELTA,
    GRID,
    RiskThreshold,
    Stratum,
    binomial_bound,
    mixed_risk_threshold,
    risk_threshold,
)
from voters.right import Platt, RightFit, RightModel

#: a fit of the shipped P(right) is recalibrated only where it scores at least this many labelled questions
MIN_QUESTIONS = 30


@dataclass(frozen=True)
class Labelled:
    """The shipped voter's choices on labelled questions of one kind: P(right), the fit that scored each
    (voters.choice_evidence.FITS) and whether the chosen answer was right."""

    probability: np.ndarray
    fits: np.ndarray
    right: np.ndarray

    def __post_init__(self) -> None:
        if not len(self.probability) == len(self.fits) == len(self.right):
            raise InputError("one P(right), fit and label per question")

    def __len__(self) -> int:
        return len(self.right)

    def of(self, name: str) -> Labelled:
        keep = np.asarray(self.fits) == name
        return Labelled(np.asarray(self.probability)[keep], np.asarray(self.fits)[keep], np.asarray(self.right)[keep])


def fit_platt(probability: np.ndarray, right: np.ndarray, weight: np.ndarray | None = None) -> Platt:
    """σ(a · logit P + b) fitted to `right` by (weighted) logistic regression; InputError unless both right and
    wrong answers are among them and a > 0 (P(right) that does not rise with being right cannot be rescaled)."""
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(right, dtype=bool)
    if y.all() or not y.any():
        raise InputError(
            f"recalibration needs right and wrong answers among the labelled questions; all {len(y)} are "
            + ("right" if y.all() else "wrong")
        )
    x = Platt.logit(np.asarray(probability, dtype=float)).reshape(-1, 1)
    model = LogisticRegression(C=1e4, max_iter=5000).fit(x, y, sample_weight=weight)
    platt = Platt(float(model.coef_[0][0]), float(model.intercept_[0]))
    if platt.slope <= 0:
        raise InputError(
            f"on these {len(y)} questions the shipped P(right) does not rise with being right (Platt slope "
            f"{fixed(platt.slope, 2)}): it cannot be rescaled to them; label more questions, or train a voter on "
            "records of your own (eor train)"
        )
    return platt


@dataclass
class FitFigures:
    """One recalibrated fit: how many labelled questions of each kind it was fitted on, its Platt scaling, and
    for each α the threshold chosen on the shipped P with its coverage, error and certified bound."""

    name: str
    questions: int
    nocorpus: int
    platt: Platt
    chosen: list[RiskThreshold]


@dataclass
class Recalibrated:
    """The recalibrated P(right) (voters.right.RightModel) and what each fit found; `dropped`: the fits left out,
    with how many labelled questions each scored: poorer ones that scored too few (a choice they would score is
    refused), or richer ones that scored none (their features are never there: a reader that reports no
    confidence, whose choices all fall to a poorer fit, when answering as here)."""

    model: RightModel
    figures: list[FitFigures]
    dropped: dict[str, int] = field(default_factory=dict)
    share: float | None = None
    delta: float = DELTA

    def lines(self, alphas: Sequence[float] = (0.1, 0.2, 0.3)) -> list[str]:
        """What `eor calibrate` prints: each fit's scaling, and at a few α the threshold, coverage, error and slack."""
        held = (
            "answerable questions only (no --nocorpus questions)"
            if self.share is None
            else f"a mix with a share {significant(self.share)} of questions the documents cannot answer"
        )
        out = [f"thresholds certified at δ {significant(self.delta)} for {held}"]
        for fit in self.figures:
            extra = f" and {fit.nocorpus} the documents cannot answer" if fit.nocorpus else ""
            out.append(
                f"fit {fit.name!r}: {fit.questions} labelled questions{extra}; P' = σ({fixed(fit.platt.slope, 2)} · "
                f"logit P {signed(fit.platt.intercept, 2)})"
            )
            for row in fit.chosen:
                if row.alpha not in alphas:
                    continue
                level = significant(row.alpha)
                if row.threshold is None:
                    out.append(f"  α {level}: no threshold certified on these questions (every one declined)")
                    continue
                assert row.error is not None and row.bound is not None
                out.append(
                    f"  α {level}: answer at P' ≥ {fixed(fit.platt.apply(row.threshold), 2)} (shipped P ≥ "
                    f"{fixed(row.threshold, 2)}): {pct(row.coverage)}% answered, {pct(row.error)}% of them wrong; "
                    f"certified ≤ {pct(row.bound)}%, a slack of {pct(row.bound - row.error)} points for so few "
                    "questions"
                )
        for name, count in self.dropped.items():
            # none: e.g. a reader that reports no confidence (its choices fall to a poorer fit, as when answering)
            why = f"it scored {count} of the labelled questions (needs {MIN_QUESTIONS})" if count else ""
            out.append(f"fit {name!r} left out: {why or 'no labelled choice has its features (no confidence?)'}")
        return out


def recalibrate(
    model: RightModel,
    answerable: Labelled,
    nocorpus: Labelled | None = None,
    share: float | None = None,
    pool: dict[str, Any] | None = None,
    delta: float = DELTA,
    alphas: Sequence[float] = ALPHAS,
) -> Recalibrated:
    """`model` with each fit that scores at least MIN_QUESTIONS `answerable` questions Platt-scaled on them (and on
    the `nocorpus` ones it scores, weighted to `share`) and given thresholds chosen on them (the module's text);
    the other fits left out. `pool`: the identity of the pool the labelled questions were answered by
    (eor.pipeline.pool), which the recalibrated P(right) is then valid for."""
    if nocorpus is not None and share is None:
        raise InputError("questions the documents cannot answer need the share of them to expect")
    figures, dropped = [], {}
    fits: dict[str, RightFit] = {}
    for name, fit in model.fits.items():  # richest first (voters.choice_evidence.FITS)
        mine = answerable.of(name)
        if len(mine) < MIN_QUESTIONS:
            dropped[name] = len(mine)
            continue
        if any(dropped.values()):  # a choice the richer fit scored would fall to this one, recalibrated on others
            richer = ", ".join(f"{other!r} ({count})" for other, count in dropped.items() if count)
            raise InputError(
                f"too few labelled questions for the fit {richer} of this P(right), which scores choices before "
                f"{name!r} does ({len(mine)}): label at least {MIN_QUESTIONS} questions it scores"
            )
        theirs = nocorpus.of(name) if nocorpus is not None else None
        if theirs is not None and not len(theirs):
            raise InputError(
                f"none of the {len(nocorpus or [])} --nocorpus questions is scored by the fit {name!r} that scores "
                f"{len(mine)} labelled questions: their records lack what it reads (answer them with the same pool)"
            )
        platt, chosen = _one_fit(mine, theirs, share, delta, alphas)
        rows = [
            {**row.to_dict(), "threshold": None if row.threshold is None else platt.apply(row.threshold)}
            for row in chosen
        ]
        fits[name] = RightFit(name, fit.groups, fit.questions, rows, fit.correctness, delta, platt)
        figures.append(FitFigures(name, len(mine), 0 if theirs is None else len(theirs), platt, chosen))
    if not fits:
        raise InputError(
            f"no fit of this P(right) scores {MIN_QUESTIONS} of the {len(answerable)} labelled questions "
            f"({', '.join(f'{name}: {count}' for name, count in dropped.items())}): label more questions"
        )
    recalibration = {
        "method": "platt",
        "questions": len(answerable),
        "nocorpus": 0 if nocorpus is None else len(nocorpus),
        "share": share if nocorpus is not None else None,
        "pool": pool,
    }
    unanswerable = model.unanswerable  # read at the share the user states, where they state one
    if unanswerable is not None and nocorpus is not None and share is not None:
        unanswerable = replace(unanswerable, share=share)
    recalibrated = RightModel(
        model.correctness, fits, model.questions, model.folds, model.seed, unanswerable, recalibration
    )
    return Recalibrated(recalibrated, figures, dropped, share if nocorpus is not None else None, delta)


def _one_fit(
    mine: Labelled, theirs: Labelled | None, share: float | None, delta: float, alphas: Sequence[float]
) -> tuple[Platt, list[RiskThreshold]]:
    """A fit's Platt scaling and thresholds (on the shipped P) from its labelled questions of each kind."""
    if theirs is None:
        platt = _checked(fit_platt(mine.probability, mine.right))
        plain = (risk_threshold(mine.probability, mine.right, alpha, delta) for alpha in alphas)
        return platt, [_with_bound(row, len(mine), delta) for row in plain]
    assert share is not None
    p = np.concatenate([mine.probability, theirs.probability])
    right = np.concatenate([mine.right, theirs.right])
    weight = np.concatenate([np.full(len(mine), (1 - share) / len(mine)), np.full(len(theirs), share / len(theirs))])
    platt = _checked(fit_platt(p, right, weight * len(p)))
    a, u = Stratum(mine.probability, mine.right), Stratum(theirs.probability, theirs.right)
    return platt, [mixed_risk_threshold(a, u, alpha, share, delta) for alpha in alphas]


def _checked(platt: Platt) -> Platt:
    """`platt` where it keeps the grid's thresholds apart: their images strictly increasing below 1 (a threshold's
    image then answers exactly the questions the threshold does); InputError for a scaling so steep that floats
    cannot keep them apart."""
    images = np.asarray(platt.apply(np.asarray(GRID[1:], dtype=float)))
    if not (np.all(np.diff(images) > 0) and images[-1] < 1):
        raise InputError(
            f"the Platt scaling fitted (slope {fixed(platt.slope, 2)}) is too steep to keep the thresholds apart: "
            "the labelled questions are too few or too easy; label more"
        )
    return platt


def _with_bound(row: RiskThreshold, questions: int, delta: float) -> RiskThreshold:
    """A threshold of `risk_threshold` on `questions` with its certified bound: Clopper–Pearson's upper bound at δ
    on the error among the answered (at most α exactly when the test rejected)."""
    if row.threshold is None or row.error is None:
        return row
    answered = round(row.coverage * questions)
    bound = binomial_bound(round(row.error * answered), answered, delta, upper=True)
    return RiskThreshold(row.alpha, row.threshold, row.coverage, row.error, row.p_value, row.share, bound)
