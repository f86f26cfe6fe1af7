"""`AnswerSelector`: the learned answer selector (beyond the paper), a scikit-learn estimator like `voters.voter.Voter`.

Every candidate (question q, member m) is described by `voters.features` (pooled similarity per metric,
grounding, agreement, support in the pool's passages, length, refusals, the member itself); a logistic
regression (scikit-learn, L2-regularised, on standardised features) learns P(y_m correct | features) from
the training questions (a batch of recorded answers, voters.batch), and the selector picks argmax_m of its
decision function (the log-odds), ties to the lowest member index. It tells of itself (`describe`) and of one
vote (`explain_row`: each feature's contribution); its weights file (`"voter": "selector"`: the feature names,
the standardisation and the coefficients, as plain numbers, no pickles) is written and read by its codec
(voters.codecs), and a cascade's weights file holds one such document per step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import numpy as np
from sklearn.utils._param_validation import Interval

from eor.core.errors import InputError
from voters.batch import Confidence, Golds, Passages, VoteBatch
from voters.estimator import VoterEstimator
from voters.features import CONFIDENCE_FEATURES, FeatureSet, candidate_features
from voters.scoring import choose, mean_correctness
from voters.similarity import check_answers, similarity_tensor
from voters.voter_params import check_correctness_name, check_metric_names

KIND = "selector"


#: scikit-learn's validation of the hyper-parameters (an answer selector's, and every cascade step's)
SELECTOR_CONSTRAINTS: dict[str, list[Any]] = {
    "metrics": ["array-like"],
    "C": [Interval(Real, 0, None, closed="neither")],
    "correctness": [str],
    "metric_params": [Mapping, None],
    "cache_dir": [str, os.PathLike, None],
    "members": ["array-like", None],
    "confidence": ["boolean"],
}


class AnswerSelector(VoterEstimator):
    """Logistic-regression answer selector, a scikit-learn estimator (voters.estimator), with its account.

    Hyper-parameters:
        metrics: similarity metrics whose pooled values are features (`em`, `f1`, `cosine`, ...).
        C: inverse L2 regularisation strength of the logistic regression.
        correctness: the label g (`em`, `f1` ≥ 0.5, `contains`).
        metric_params: keyword arguments per metric.
        cache_dir: folder of the similarity pair-score cache.
        members: member names in order (recorded in the weights file and checked on load).
        confidence: take the reader's confidence in each answer as features where the batch holds it.
    """

    def __init__(
        self,
        metrics: Sequence[str] = ("em", "f1", "cosine"),
        C: float = 1.0,  # noqa: N803 - scikit-learn's name
        correctness: str = "em",
        metric_params: Mapping[str, Mapping[str, Any]] | None = None,
        cache_dir: str | Path | None = None,
        members: Sequence[str] | None = None,
        confidence: bool = True,
    ):
        self.metrics = metrics
        self.C = C
        self.correctness = correctness
        self.metric_params = metric_params
        self.cache_dir = cache_dir
        self.members = members
        self.confidence = confidence

    kind = KIND
    needs_passages = True

    @property
    def uses_confidence_(self) -> bool:
        """Whether its features read the reader's confidence (fitted or loaded with them)."""
        return CONFIDENCE_FEATURES[0] in vars(self).get("feature_names_", ())

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = SELECTOR_CONSTRAINTS

    def _check_params(self) -> None:
        """`_parameter_constraints`, then the metrics and the correctness metric against their registries."""
        super()._check_params()
        check_metric_names(self.metrics)
        check_correctness_name(self.correctness)

    # -- features ----------------------------------------------------------------------------------------

    def _names(self, n_members: int) -> list[str]:
        if self.members is not None:
            if len(self.members) != n_members:
                raise InputError(f"{len(self.members)} member names but answers from {n_members} members")
            return list(self.members)
        return [f"member{m}" for m in range(n_members)]

    def features(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages,
        questions: Sequence[str],
        member_index: Sequence[int] | None = None,
        confidence: Confidence | None = None,
    ) -> FeatureSet:
        """The features of a fitted selector's candidates; `member_index` places a subset of members among
        all of them; `confidence[q][m]`: each answer's confidence summary (eor.core.confidence), used when the
        selector was fitted with it."""
        self._check_fitted()
        check_answers(answers)
        tensor = similarity_tensor(answers, list(self.metrics), cache=self.cache_dir, metric_params=self.metric_params)
        wanted = confidence if self.uses_confidence_ else None
        features = candidate_features(
            tensor, answers, passages, questions, self.metrics, self.members_, member_index, wanted
        )
        return self._checked_confidence(features)

    def _checked_confidence(self, features: FeatureSet) -> FeatureSet:
        """`features`, checked to hold the reader's confidence where the selector was fitted with it: InputError
        naming what is missing for a question none of whose answers has it (no value is filled in for a feature
        set the selector never met; an answer without it among others that have it is as in training: the
        training mean)."""
        if not self.uses_confidence_:
            return features
        given = features.names[-len(CONFIDENCE_FEATURES) :] == list(CONFIDENCE_FEATURES)
        questions = features.matrix.shape[0]
        first = -len(CONFIDENCE_FEATURES)  # conf:mean
        lacking = questions if not given else int(np.isnan(features.matrix[:, :, first]).all(axis=1).sum())
        if lacking:
            raise InputError(
                f"this selector was fitted with the reader's confidence among its features "
                f"({', '.join(CONFIDENCE_FEATURES)}), and {lacking} of {questions} question(s) have none for any "
                "answer: records made before confidence was recorded, or a reader that reports none (an "
                "OpenAI-compatible server without log-probabilities); train one without it (eor train "
                "--no-confidence) to vote on them"
            )
        return features

    def _batch_features(self, X: VoteBatch, names: Sequence[str], confidence: bool) -> FeatureSet:
        """The features of every member's answers on batch X (computed over its whole batch and taken at its
        rows), with the reader's confidence where X has it and `confidence` asks for it."""
        blocks, rows = X.blocks(self.metrics, self.metric_params, self.cache_dir, confidence=confidence)
        features = blocks.features(range(X.n_members), names)
        return FeatureSet(features.names, features.matrix[rows])

    # -- fitting ------------------------------------------------------------------------------------------

    def fit(self, X: VoteBatch, y: Golds | None = None) -> Self:
        """Learn the logistic regression on the candidates of batch X (voters.batch: answers, passages and
        question texts; the reader's confidence, when `confidence` and X holds it) labelled by their
        correctness against the gold answers `y` (None: X's own)."""
        self._check_params()
        X = X.with_golds(y)
        names = self._names(X.n_members)
        features = self._batch_features(X, names, self.confidence)
        return fit_on_features(self, features, X.correctness(self.correctness) >= 0.5, names)

    # -- prediction ---------------------------------------------------------------------------------------

    def feature_scores(self, matrix: np.ndarray) -> np.ndarray:
        """Log-odds of correctness from a feature array (..., F) of its features (NaN: unknown, the training
        mean)."""
        values = np.where(np.isnan(matrix), self.mean_, matrix)
        return ((values - self.mean_) / self.scale_) @ self.coef_ + self.intercept_

    def decision_scores(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        members: Sequence[int] | None = None,
        confidence: Confidence | None = None,
    ) -> np.ndarray:
        """Log-odds of correctness per question and candidate, shape (Q, M); `members`: the positions of the
        answering members among the selector's members (a subset, e.g. after failures); `confidence`: their
        answers' confidence summaries (see `features`)."""
        self._check_fitted()
        if passages is None or questions is None:
            raise InputError("the answer selector needs each member's passages and the question texts")
        return self.feature_scores(self.features(answers, passages, questions, members, confidence).matrix)

    def decision_function(self, X: VoteBatch) -> np.ndarray:
        """Log-odds of correctness (Q, M) of every member's answer on batch X."""
        self._check_fitted()
        if X.n_members != self.n_members_:
            raise InputError(f"the selector has {self.n_members_} members, the answers come from {X.n_members}")
        features = self._batch_features(X, self.members_, self.uses_confidence_)
        return self.feature_scores(self._checked_confidence(features).matrix)

    def predict(self, X: VoteBatch) -> np.ndarray:
        """The chosen member's position per question (the highest log-odds; ties to the lowest)."""
        return choose(self.decision_function(X))

    def explain_row(
        self,
        answers: Sequence[str],
        passages: Sequence[Sequence[str]],
        question: str,
        members: Sequence[int],
        confidence: Sequence[Any] | None = None,
    ) -> dict[str, Any]:
        """Per answering member (positions `members`): its log-odds and, for every feature, the value and the
        contribution coef · (value − mean) / scale; the contributions and the intercept add up to the score."""
        known = None if confidence is None else [list(confidence)]
        features = self.features([list(answers)], [list(passages)], [question], members, known)
        rows = []
        for m in range(len(answers)):
            values = np.where(np.isnan(features.matrix[0, m]), self.mean_, features.matrix[0, m])
            contribution = (values - self.mean_) / self.scale_ * self.coef_
            rows.append(
                {
                    "score": float(contribution.sum() + self.intercept_),
                    "features": {
                        name: {"value": float(v), "contribution": float(c)}
                        for name, v, c in zip(self.feature_names_, values, contribution, strict=True)
                    },
                }
            )
        return {"voter": KIND, "intercept": float(self.intercept_), "members": rows}

    def describe(self) -> dict[str, Any]:
        """The fitted selector for reports: its kind, metrics, C and each feature's coefficient."""
        self._check_fitted()
        return {
            "voter": KIND,
            "metrics": list(self.metric_names_),
            "C": self.C,
            "coefficients": {name: float(c) for name, c in zip(self.feature_names_, self.coef_, strict=True)},
        }


Selector = TypeVar("Selector", bound=AnswerSelector)


def fit_on_features(selector: Selector, features: FeatureSet, labels: np.ndarray, members: Sequence[str]) -> Selector:
    """`selector` fitted on precomputed candidate features (Q, M, F) and correctness labels (Q, M): what its
    `fit` and each step of a cascade (voters.cascade_fit) learn by. The features are standardised (an unknown
    confidence: the mean of the known values) and an L2 logistic regression learns P(correct); with one
    class only, every candidate is equally likely."""
    from sklearn.linear_model import LogisticRegression

    selector._check_params()
    x = features.matrix.reshape(-1, features.matrix.shape[-1])
    y = np.asarray(labels, dtype=bool).reshape(-1)
    if len(y) != len(x) or not len(y):
        raise InputError("cannot fit an answer selector on zero candidates or mismatched labels")
    known = ~np.isnan(x)  # unknown confidence: filled with the mean of the known values
    mean = np.where(known.any(axis=0), np.nansum(x, axis=0) / np.maximum(known.sum(axis=0), 1), 0.0)
    x = np.where(known, x, mean)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    selector.feature_names_ = list(features.names)
    selector.mean_, selector.scale_ = mean, scale
    if y.all() or not y.any():  # one class only: every candidate equally likely
        selector.coef_ = np.zeros(x.shape[1])
        selector.intercept_ = 0.0
    else:
        model = LogisticRegression(C=float(selector.C), max_iter=2000)
        model.fit((x - mean) / scale, y)
        selector.coef_ = model.coef_[0].astype(float)
        selector.intercept_ = float(model.intercept_[0])
    selector.members_ = list(members)
    selector.n_members_ = len(selector.members_)
    selector.metric_names_ = list(selector.metrics)
    selector.metadata_ = dict(selector.metadata_)
    chosen = choose(selector.feature_scores(features.matrix))
    selector.train_score_ = mean_correctness(np.asarray(labels, dtype=float), chosen)
    return selector
