"""Choosing among a question's candidates (members' answers and spans) by the reader-as-judge features
(voters.judge_features).

`JudgeSelector` is one fit: an L2 logistic regression (scikit-learn) on standardised features of the chosen
`families` learns P(candidate right) from training questions; the members' answers and the first `spans` span
candidates (the rule's order) compete, and the one with the highest log-odds is chosen (ties to the first: the
members' answers come first, in pool order). Its P(right) is a logistic on the chosen candidate's log-odds,
its margin over the best other candidate, its own features and the absolute ones the fit's scores give
(voters.judge_features.ABSOLUTE: how likely the reader finds it at all, how split the members are), fitted on
out-of-fold choices (`calibrate`): the highest of several log-odds is over-confident by construction.

`JudgeVoter` holds several fits, richest first, and answers with the first whose likelihood families the
question's scores hold (`fit_for`): a fit with the reader's scores where there are scores, one on the text
alone where the reader gave none (records scored by no one, a config that answers without scoring, as one
must with an OpenAI-compatible server that returns no log-probabilities). A question no fit covers is refused
with an error that names what is missing, never answered by a fit that learned from scores the question lacks.

Only plain numbers are learned, so a fitted voter is a JSON document (its codec: voters.codecs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
from scipy.special import expit

from eor.core.errors import InputError
from voters.batch import Golds, Passages, VoteBatch
from voters.candidates import candidates
from voters.estimator import VoterEstimator
from voters.judge_features import (
    ABSOLUTE,
    FAMILIES,
    NULL,
    RETRIEVAL,
    SCORED_FAMILIES,
    Evidence,
    JudgeFeatures,
    family_prefixes,
    judge_features,
)

ALL_FAMILIES = tuple(FAMILIES)


class JudgeSelector:
    """Hyper-parameters: `families` (names of voters.judge_features.FAMILIES), `spans` (how many span candidates
    compete, in the rule's order; 0: the members' answers alone), `C` (inverse L2 strength), `retrieval`
    (whether P(right) also reads the retrieved passages' relevance to the question, voters.judge_features
    RETRIEVAL: what tells a question the corpus cannot answer apart), `null` (whether it reads the null
    candidate's likelihood, voters.judge_features NULL); neither changes the choice. Fitted: `names_`,
    `mean_`, `scale_`, `coef_`, `intercept_`; after `calibrate`, `calibration_` (P(right)'s coefficients); and
    `thresholds_`, the abstention thresholds on P(right) that training chose (eor.pipeline.abstention)."""

    def __init__(
        self,
        families: Sequence[str] = ALL_FAMILIES,
        spans: int = 10,
        C: float = 1.0,  # noqa: N803
        retrieval: bool = False,
        null: bool = False,
    ) -> None:
        self.prefixes = family_prefixes(families)
        self.retrieval = bool(retrieval)
        self.null = bool(null)
        self.families = tuple(families)
        if spans < 0:
            raise InputError(f"the number of competing spans must be 0 or more, not {spans}")
        self.spans = int(spans)
        self.C = C
        self.calibration_: dict[str, Any] | None = None
        self.unanswerable_: dict[str, Any] | None = None  # P(unanswerable), beyond the corpus (eor.learning)
        self.thresholds_: list[dict[str, Any]] = []  # abstention's, eor.pipeline.abstention (set by training)
        self.delta_: float | None = None  # the δ they were chosen at

    # What eor.pipeline.abstention reads of a fitted P(right): right means an exact match with a gold answer.
    correctness = "em"

    @property
    def thresholds(self) -> list[dict[str, Any]]:
        return self.thresholds_

    @property
    def delta(self) -> float | None:
        return self.delta_

    @property
    def needs(self) -> frozenset[str]:
        """The likelihood families (voters.judge_features.SCORED_FAMILIES) this fit reads."""
        return frozenset(self.families) & frozenset(SCORED_FAMILIES)

    @property
    def label(self) -> str:
        """Names the fit in answers and reports, e.g. `votes+evidence+scores, 10 spans`."""
        return f"{'+'.join(self.families)}, {self.spans} span{'s' if self.spans != 1 else ''}"

    @property
    def absolute(self) -> list[str]:
        """The absolute features P(right) reads besides this fit's own: those of the scores it reads, and the
        retrieval family's where it reads that."""
        reads = self.needs | ({RETRIEVAL} if self.retrieval else set())
        if self.null and "scores" in self.needs:  # scored under the members' prompts, like the candidates
            reads |= {NULL}
        return [name for name, family in ABSOLUTE.items() if family is None or family in reads]

    def unfitted(self) -> JudgeSelector:
        """A selector of the same hyper-parameters that learned nothing."""
        return JudgeSelector(self.families, self.spans, self.C, self.retrieval, self.null)

    def missing(self, features: JudgeFeatures) -> list[str]:
        """The likelihood families this fit reads that `features` lack (sorted)."""
        return sorted(self.needs - features.scored)

    def competing(self, features: JudgeFeatures) -> np.ndarray:
        """Which candidates compete: every member's answer and the first `spans` spans."""
        if not len(features.texts):
            return np.zeros(0, dtype=bool)
        span = features.matrix[:, features.names.index("span")] > 0
        return ~span | (np.cumsum(span) <= self.spans)

    def _columns(self, names: Sequence[str]) -> list[int]:
        return [i for i, name in enumerate(names) if name.startswith(self.prefixes)]

    def fit(self, questions: Sequence[JudgeFeatures], right: Sequence[np.ndarray]) -> Self:
        """Learn from each training question's candidate features and whether each candidate is right."""
        from sklearn.linear_model import LogisticRegression

        if not questions or len(questions) != len(right):
            raise InputError("a judge selector needs the features and labels of at least one question")
        lacking = sorted({family for question in questions for family in self.missing(question)})
        if lacking:
            raise InputError(f"cannot fit {self.label}: the training questions lack the reader's {', '.join(lacking)}")
        columns = self._columns(questions[0].names)
        rows = []
        for question, labels in zip(questions, right, strict=True):
            kept = self.competing(question)
            rows.append((question.matrix[kept][:, columns], np.asarray(labels, dtype=bool)[kept]))
        x = np.vstack([matrix for matrix, _ in rows])
        y = np.concatenate([labels for _, labels in rows])
        self.names_ = [questions[0].names[i] for i in columns]
        self.mean_ = x.mean(axis=0)
        self.scale_ = np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        if y.all() or not y.any():  # one class only: every candidate equally likely
            self.coef_, self.intercept_ = np.zeros(x.shape[1]), 0.0
        else:
            model = LogisticRegression(C=float(self.C), max_iter=3000).fit((x - self.mean_) / self.scale_, y)
            self.coef_, self.intercept_ = model.coef_[0].astype(float), float(model.intercept_[0])
        # what was learned from the previous fit's choices goes with it
        self.calibration_, self.unanswerable_, self.thresholds_, self.delta_ = None, None, [], None
        return self

    def decision(self, features: JudgeFeatures) -> np.ndarray:
        """Log-odds of each candidate being right; −inf for a candidate that does not compete."""
        if not hasattr(self, "coef_"):
            raise InputError("this JudgeSelector is not fitted yet: call fit first")
        lacking = self.missing(features)
        if lacking:
            raise InputError(
                f"the fit {self.label} reads the reader's {', '.join(lacking)}, which these "
                "candidates were not scored with"
            )
        columns = [features.names.index(name) for name in self.names_]
        scores = ((features.matrix[:, columns] - self.mean_) / self.scale_) @ self.coef_ + self.intercept_
        return np.where(self.competing(features), scores, -np.inf)

    def choose(self, features: JudgeFeatures) -> Choice | None:
        """The chosen candidate with its log-odds, margin and P(right) (None when no candidate competes)."""
        if not len(features.texts):
            return None
        scores = self.decision(features)
        if not np.isfinite(scores).any():  # e.g. no member wrote anything and no span competes
            return None
        index = int(np.argmax(scores))
        others = np.delete(scores, index)
        margin = float(scores[index] - others.max()) if len(others) and np.isfinite(others.max()) else 0.0
        columns = [features.names.index(name) for name in self.names_]
        row = (features.matrix[index, columns] - self.mean_) / self.scale_
        absolute = features.matrix[index, [features.names.index(name) for name in self.absolute]]
        evidence = (float(scores[index]), margin, *(float(v) for v in row), *(float(v) for v in absolute))
        return Choice(index, features.texts[index], float(scores[index]), margin, evidence, self.probability(evidence))

    def probability(self, evidence: Sequence[float]) -> float | None:
        """P(right) of a choice from its `evidence` (None before `calibrate`)."""
        return None if self.calibration_ is None else _logistic_at(self.calibration_, evidence)

    def calibrate(self, choices: Sequence[Choice], right: Sequence[bool] | np.ndarray) -> Self:
        """Fit P(right) on out-of-fold choices (from fits that did not see their questions) and whether each
        was right: a logistic (L2, C = 1) on each choice's evidence, standardised: its log-odds, its margin over
        the best other candidate, its own features and the absolute ones (`absolute`)."""
        self.calibration_ = _logistic(choices, right, "P(right)")
        return self

    def unanswerable(self, evidence: Sequence[float]) -> float | None:
        """P(unanswerable) of a question from its choice's `evidence`, at the share of unanswerable questions the
        thresholds hold for (Bayes' rule: the odds moved from the training mix's share to it); None without a
        fit (a voter fitted on answerable questions alone)."""
        fit = self.unanswerable_
        if fit is None:
            return None
        if fit["share"] <= 0:
            return 0.0
        p = min(max(_logistic_at(fit, evidence), 1e-9), 1 - 1e-9)
        logit = math.log(p / (1 - p)) + _logit(fit["share"]) - _logit(fit["trained_share"])
        return float(expit(logit))

    def fit_unanswerable(
        self, choices: Sequence[Choice], unanswerable: Sequence[bool] | np.ndarray, share: float
    ) -> Self:
        """Fit P(unanswerable) (`unanswerable`) on choices of questions whose answer is (False) or is not (True)
        in the corpus, read at the unanswerable `share`."""
        label = np.asarray(unanswerable, dtype=bool)
        self.unanswerable_ = {
            **_logistic(choices, label, "P(unanswerable)"),
            "trained_share": float(np.clip(label.mean(), 1e-3, 1 - 1e-3)),
            "share": float(share),
        }
        return self


def _logistic(choices: Sequence[Choice], label: Sequence[bool] | np.ndarray, what: str) -> dict[str, Any]:
    """A logistic (L2, C = 1) of `label` on the choices' standardised evidence; one class: a constant (its share,
    kept within [0.001, 0.999])."""
    from sklearn.linear_model import LogisticRegression

    x = np.array([choice.evidence for choice in choices], dtype=float)
    y = np.asarray(label, dtype=bool)
    if len(y) != len(x) or not len(y):
        raise InputError(f"{what} needs at least one out-of-fold choice and its label")
    mean = x.mean(axis=0)
    scale = np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    if y.all() or not y.any():
        coef, intercept = np.zeros(x.shape[1]), _logit(float(np.clip(y.mean(), 1e-3, 1 - 1e-3)))
    else:
        model = LogisticRegression(C=1.0, max_iter=3000).fit((x - mean) / scale, y)
        coef, intercept = model.coef_[0].astype(float), float(model.intercept_[0])
    return {"mean": mean, "scale": scale, "coef": coef, "intercept": intercept}


def _logistic_at(fit: Mapping[str, Any], evidence: Sequence[float]) -> float:
    x = (np.asarray(evidence, dtype=float) - fit["mean"]) / fit["scale"]
    return float(expit(float(x @ fit["coef"] + fit["intercept"])))


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


@dataclass(frozen=True)
class Choice:
    """A chosen candidate: its index among the question's candidates, its text, log-odds, margin over the best
    other candidate, the evidence P(right) reads (log-odds, margin, its standardised features) and P(right)
    (None before the fit is calibrated)."""

    index: int
    text: str
    score: float
    margin: float
    evidence: tuple[float, ...]
    probability: float | None


#: the fits of a judge voter given none: the reader's scores under the members' prompts, then the text alone (a
#: question scored by no one), each with 10 competing spans
DEFAULT_FITS = (("votes", "evidence", "scores"), ("votes", "evidence"))


class JudgeVoter(VoterEstimator):
    """The reader as judge, a voter kind (voters.protocol) that chooses among each question's *candidates* (the
    members' answers and spans of their passages, scored by the reader: `VoteBatch.candidates`) where the other
    kinds choose among the members' answers (`chooses`).

    Hyper-parameters: `fits` (unfitted JudgeSelectors, richest first: each question is answered by the first fit
    whose likelihood families its scores hold, `fit_for`; None: `DEFAULT_FITS`) and `members` (the pool whose
    answers the candidates' features read, in the training records' order; None: read from the candidates'
    features). `fit(X)` fits a copy of each on the batch's questions that hold its scores, as scikit-learn's
    VotingClassifier fits copies of its estimators: `fits_`, `members_`. P(right) and the abstention thresholds of
    each fit are the training policy's (eor.learning.judge_training: each setting chosen by cross-validation,
    P(right) calibrated on out-of-fold choices), which builds the voter of its fitted selectors (`of_fits`)."""

    kind = "judge"
    chooses: ClassVar[str] = "candidates"
    needs_passages: ClassVar[bool] = True
    correctness = "em"  # a candidate is right when it matches a gold answer exactly (JudgeSelector.correctness)
    metric_params = None
    fits_: list[JudgeSelector]  # fitted, richest first
    members_: list[str]  # fitted: the pool, in the training records' order

    def __init__(self, fits: Sequence[JudgeSelector] | None = None, members: Sequence[str] | None = None) -> None:
        self.fits = fits
        self.members = members

    @classmethod
    def of_fits(cls, fits: Sequence[JudgeSelector], members: Sequence[str]) -> JudgeVoter:
        """The fitted voter whose fits are `fits` (fitted selectors, richest first) for the pool `members`: what the
        training policy and the weights file's codec build (voters.codecs)."""
        if not fits:
            raise InputError("a judge voter needs at least one fit")
        voter = cls([fit.unfitted() for fit in fits], list(members))
        voter.fits_, voter.members_ = list(fits), [str(member) for member in members]
        return voter

    @property
    def n_members_(self) -> int:
        return len(self.members_)

    @property
    def metric_names_(self) -> list[str]:
        return []  # it compares no answers with a similarity metric

    def fit_scoring(self, scored: frozenset[str]) -> JudgeSelector:
        """The fit that answers candidates scored with the likelihood families `scored` (its first fit that
        needs no more); InputError when none does."""
        for fit in self.fits_:
            if fit.needs <= scored:
                return fit
        raise InputError(
            f"this judge voter has no fit for candidates scored with {', '.join(sorted(scored)) or 'nothing'}"
        )

    @property
    def reads_retrieval(self) -> bool:
        """Whether a fit's P(right) reads the retrieved passages' relevance (voters.judge_features.relevance_of)."""
        return any(fit.retrieval for fit in self.fits_)

    @property
    def reads_null(self) -> bool:
        """Whether a fit's P(right) reads the null candidate's likelihood (eor.pipeline.judging.null_scores)."""
        return any(fit.null for fit in self.fits_)

    def fit_for(self, features: JudgeFeatures) -> JudgeSelector:
        """The first fit whose likelihood families `features` hold; InputError naming what each fit lacks."""
        for fit in self.fits_:
            if not fit.missing(features):
                return fit
        lacking = "; ".join(f"{fit.label} needs {', '.join(fit.missing(features))}" for fit in self.fits_)
        raise InputError(
            f"no fit of this judge voter answers candidates scored with "
            f"{', '.join(sorted(features.scored)) or 'nothing'}: {lacking}"
        )

    def choose(self, features: JudgeFeatures) -> tuple[Choice | None, JudgeSelector]:
        """The chosen candidate (None when there is none) and the fit that chose it."""
        fit = self.fit_for(features)
        return fit.choose(features), fit

    # -- the voter contract (voters.protocol): batches of recorded questions ---------------------------------

    def fit(self, X: VoteBatch, y: Golds | None = None) -> Self:
        """Fit a copy of each of `fits` on the questions of X whose candidates hold its scores (InputError when none
        do, or there is no fit), against the gold answers `y` (None: X's own)."""
        templates = [JudgeSelector(families, 10) for families in DEFAULT_FITS] if self.fits is None else self.fits
        if not templates:
            raise InputError("a judge voter needs at least one fit")
        X = X.with_golds(y)
        found = _candidates(X)
        if not found:
            raise InputError("a judge voter needs the candidates of at least one question")
        right = X.option_correctness(self.chooses, self.correctness) > 0
        fitted = []
        for template in templates:
            rows = [q for q, features in enumerate(found) if not template.missing(features)]
            if not rows:
                raise InputError(f"no question of this batch holds the scores the fit {template.label} reads")
            fit = template.unfitted().fit([found[q] for q in rows], [right[q, : len(found[q].texts)] for q in rows])
            fitted.append(fit)
        written = [name[len("wrote:") :] for name in found[0].names if name.startswith("wrote:")]
        self.members_ = [str(m) for m in self.members] if self.members is not None else written
        self.fits_ = fitted
        return self

    def decision_function(self, X: VoteBatch) -> np.ndarray:
        """Each candidate's log-odds by the fit that answers its question, shape (Q, the most candidates of a
        question): −inf for a candidate that does not compete and past a question's last candidate."""
        self._check_fitted()
        found = _candidates(X)
        scores = np.full((len(found), max((len(f.texts) for f in found), default=0)), -np.inf)
        for q, features in enumerate(found):
            if len(features.texts):
                scores[q, : len(features.texts)] = self.fit_for(features).decision(features)
        return scores

    def predict(self, X: VoteBatch) -> np.ndarray:
        """The chosen candidate's position per question (0 where none competes, as `choose` reads it: no
        answer)."""
        scores = self.decision_function(X)
        if not scores.shape[1]:
            return np.zeros(len(scores), dtype=int)
        return np.argmax(scores, axis=1)

    def decision_scores(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        members: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Scores (Q, M) of the answering members' answers (positions `members` among `members`; None: all) by the
        judge's fit on the text alone, the members' answers as the only candidates: each member's score is the
        log-odds of its answer (−inf for an empty one). Answering with the reader's scores and the spans is the
        judged vote stage's (eor.pipeline.stages.judged)."""
        self._check_fitted()
        if passages is None or questions is None:
            raise InputError("the judge voter weighs answers against their passages and the question: give both")
        fit = self.fit_scoring(frozenset())
        positions = list(range(self.n_members_)) if members is None else list(members)
        names = [self.members_[m] for m in positions]
        scores = np.full((len(answers), len(positions)), -np.inf)
        if any(len(row) != len(positions) for row in answers):
            raise InputError(f"give each question the answers of the {len(positions)} answering members, in order")
        for q, row in enumerate(answers):
            given = dict(zip(names, row, strict=True))
            read = dict(zip(names, passages[q], strict=True))
            evidence = Evidence(questions[q], given, {name: list(texts) for name, texts in read.items()})
            made = candidates(questions[q], given, [])
            rows = [{"text": c.text, "members": list(c.members), "scores": {}} for c in made]
            decided = fit.decision(judge_features(rows, self.members_, evidence))
            for c, candidate in enumerate(made):
                for name in candidate.members:
                    scores[q, names.index(name)] = decided[c]
        return scores

    def explain_row(
        self, answers: Sequence[str], passages: Sequence[Sequence[str]], question: str, members: Sequence[int]
    ) -> dict[str, Any]:
        """Why the text fit's vote came out so for one question: each answering member's answer with its log-odds."""
        scores = self.decision_scores([answers], [passages], [question], members)[0]
        return {
            "voter": self.kind,
            "fit": self.fit_scoring(frozenset()).label,
            "members": [
                {"member": self.members_[m], "answer": answer, "score": float(score) if np.isfinite(score) else None}
                for m, answer, score in zip(members, answers, scores, strict=True)
            ],
        }

    def describe(self) -> dict[str, Any]:
        """The fits, richest first, each by its label and the likelihood families it needs."""
        return {
            "voter": self.kind,
            "members": self.members_,
            "fits": [{"fit": fit.label, "needs": sorted(fit.needs)} for fit in self.fits_],
        }


def _candidates(X: VoteBatch) -> Sequence[JudgeFeatures]:
    if X.candidates is None:
        raise InputError("the judge voter chooses among the judge's candidates: give them (VoteBatch candidates=...)")
    return X.candidates
