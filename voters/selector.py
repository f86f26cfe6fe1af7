"""`AnswerSelector`: a learned answer selector (beyond the paper), an sklearn-style estimator like `Voter`.

Every candidate (question q, member m) is described by `voters.features` (pooled similarity per metric,
grounding, agreement, support in the pool's passages, length, refusals, the member itself); a logistic
regression (scikit-learn, L2-regularised, on standardised features) learns P(y_m correct | features) from
the training questions, and the selector picks argmax_m of its decision function (the log-odds), ties to
the lowest member index. Only plain numbers are learned, so the model serialises into the voter weights
file family (JSON, `"voter": "selector"`) without pickles.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval

from eor.correctness import CORRECTNESS, correctness_matrix
from eor.errors import ConfigError, InputError, NotFittedError
from voters.estimator import VoterEstimator
from voters.features import (
    BASE_FEATURES,
    CONFIDENCE_FEATURES,
    PER_MEMBER,
    FeatureSet,
    candidate_features,
    feature_names,
)
from voters.scoring import choose, mean_correctness
from voters.similarity import available_metrics, check_answers, similarity_tensor
from voters.weights_file import header, member_order, write_document

log = logging.getLogger(__name__)

KIND = "selector"
Passages = Sequence[Sequence[Sequence[str]]]
Confidence = Sequence[Sequence[Any]]  # [question][member] -> a confidence summary (eor.confidence) or None


#: scikit-learn's validation of the hyper-parameters (an answer selector's, and every cascade step's)
SELECTOR_CONSTRAINTS: dict[str, list[Any]] = {
    "metrics": ["array-like"],
    "C": [Interval(Real, 0, None, closed="neither")],
    "correctness": [str],
    "metric_params": [Mapping, None],
    "cache_dir": [str, os.PathLike, None],
    "members": ["array-like", None],
}


class AnswerSelector(VoterEstimator):
    """Logistic-regression answer selector, a scikit-learn estimator (voters.estimator).

    Hyper-parameters:
        metrics: similarity metrics whose pooled values are features (`em`, `f1`, `cosine`, ...).
        C: inverse L2 regularisation strength of the logistic regression.
        correctness: the label g (`em`, `f1` ≥ 0.5, `contains`).
        metric_params: keyword arguments per metric.
        cache_dir: folder of the similarity pair-score cache.
        members: member names in order (recorded in the weights file and checked on load).
    """

    def __init__(
        self,
        metrics: Sequence[str] = ("em", "f1", "cosine"),
        C: float = 1.0,  # noqa: N803 - scikit-learn's name
        correctness: str = "em",
        metric_params: Mapping[str, Mapping[str, Any]] | None = None,
        cache_dir: str | Path | None = None,
        members: Sequence[str] | None = None,
    ):
        self.metrics = metrics
        self.C = C
        self.correctness = correctness
        self.metric_params = metric_params
        self.cache_dir = cache_dir
        self.members = members

    kind = KIND
    needs_passages = True
    needs_questions = True
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = SELECTOR_CONSTRAINTS

    def _check_params(self) -> None:
        """`_parameter_constraints`, then the metrics and the correctness metric against their registries."""
        super()._check_params()
        known = available_metrics()
        if isinstance(self.metrics, str) or not self.metrics or any(name not in known for name in self.metrics):
            raise ConfigError(f"metrics must name registered metrics; available: {', '.join(known)}")
        if self.correctness not in CORRECTNESS:
            raise ConfigError(f"unknown correctness metric {self.correctness!r}; available: {', '.join(CORRECTNESS)}")

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
        """The candidates' features; `member_index` places a subset of members among all of them;
        `confidence[q][m]`: each answer's confidence summary (eor.confidence), used by a selector fitted
        with it (a fitted selector without confidence features ignores it; one with them and no confidence
        given gets NaN, filled with the training means: those features then count for nothing)."""
        check_answers(answers)
        tensor = similarity_tensor(answers, list(self.metrics), cache=self.cache_dir, metric_params=self.metric_params)
        fitted = hasattr(self, "members_")
        members = self.members_ if fitted else self._names(tensor.shape[1])
        wanted = confidence if not fitted or self.uses_confidence_ else None
        features = candidate_features(tensor, answers, passages, questions, self.metrics, members, member_index, wanted)
        if fitted and self.uses_confidence_ and len(features.names) < len(self.feature_names_):
            unknown = np.full((*features.matrix.shape[:2], len(CONFIDENCE_FEATURES)), np.nan)
            features = FeatureSet(self.feature_names_, np.concatenate([features.matrix, unknown], axis=2))
        return features

    # -- fitting ------------------------------------------------------------------------------------------

    def fit(
        self,
        answers: Sequence[Sequence[str]],
        golds: Sequence[Sequence[str]],
        passages: Passages,
        questions: Sequence[str],
        confidence: Confidence | None = None,
    ) -> AnswerSelector:
        self._check_params()
        if len(answers) != len(golds):
            raise InputError(f"got answers for {len(answers)} questions but gold answers for {len(golds)}")
        n_members = check_answers(answers)
        self.__dict__.pop("members_", None)
        names = self._names(n_members)
        features = self.features(answers, passages, questions, confidence=confidence)
        labels = correctness_matrix(answers, golds, self.correctness) >= 0.5
        return self.fit_features(features, labels, names)

    def fit_features(self, features: FeatureSet, labels: np.ndarray, members: Sequence[str]) -> AnswerSelector:
        """Fit on precomputed features (Q, M, F) and correctness labels (Q, M)."""
        from sklearn.linear_model import LogisticRegression

        self._check_params()
        x = features.matrix.reshape(-1, features.matrix.shape[-1])
        y = np.asarray(labels, dtype=bool).reshape(-1)
        if len(y) != len(x) or not len(y):
            raise InputError("cannot fit an answer selector on zero candidates or mismatched labels")
        known = ~np.isnan(x)  # unknown confidence: filled with the mean of the known values
        mean = np.where(known.any(axis=0), np.nansum(x, axis=0) / np.maximum(known.sum(axis=0), 1), 0.0)
        x = np.where(known, x, mean)
        scale = x.std(axis=0)
        scale[scale == 0] = 1.0
        self.feature_names_ = list(features.names)
        self.uses_confidence_ = CONFIDENCE_FEATURES[0] in self.feature_names_
        self.mean_, self.scale_ = mean, scale
        if y.all() or not y.any():  # one class only: every candidate equally likely
            self.coef_ = np.zeros(x.shape[1])
            self.intercept_ = 0.0
        else:
            model = LogisticRegression(C=float(self.C), max_iter=2000)
            model.fit((x - mean) / scale, y)
            self.coef_ = model.coef_[0].astype(float)
            self.intercept_ = float(model.intercept_[0])
        self.members_ = list(members)
        self.n_members_ = len(self.members_)
        self.metric_names_ = list(self.metrics)
        self.metadata_: dict[str, Any] = getattr(self, "metadata_", {})
        chosen = choose(self.feature_scores(features.matrix))
        self.train_score_: float | None = mean_correctness(np.asarray(labels, dtype=float), chosen)
        return self

    # -- prediction ---------------------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError("this AnswerSelector is not fitted: call fit(...) or load a weights file")

    def feature_scores(self, matrix: np.ndarray) -> np.ndarray:
        """Log-odds of correctness from a feature array (..., F) computed by `features` (NaN: unknown, the
        training mean)."""
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

    def predict(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        confidence: Confidence | None = None,
    ) -> np.ndarray:
        return choose(self.decision_scores(answers, passages, questions, confidence=confidence))

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
        self._check_fitted()
        return {
            "voter": KIND,
            "metrics": list(self.metric_names_),
            "C": self.C,
            "coefficients": {name: float(c) for name, c in zip(self.feature_names_, self.coef_, strict=True)},
        }

    # -- persistence --------------------------------------------------------------------------------------

    def save(self, path: str | Path, **meta: Any) -> Path:
        return write_document(path, self.document(**meta))

    def document(self, **meta: Any) -> dict[str, Any]:
        """The weights-file document (what `save` writes and `from_document` reads)."""
        self._check_fitted()
        meta.setdefault("objective", self.correctness)
        return {
            **header(KIND, self.members_, self.metric_names_),
            "feature_names": self.feature_names_,
            "mean": [float(v) for v in self.mean_],
            "scale": [float(v) for v in self.scale_],
            "coefficients": [float(v) for v in self.coef_],
            "intercept": float(self.intercept_),
            "train_score": self.train_score_,
            "params": {
                "metrics": list(self.metrics),
                "C": float(self.C),
                "correctness": self.correctness,
                "metric_params": self.metric_params,
            },
            "meta": {**self.metadata_, **meta},
        }

    @classmethod
    def from_document(
        cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None
    ) -> AnswerSelector:
        """A fitted selector from a weights-file document (see `voters.load_voter`)."""
        try:
            params = dict(document["params"])
            names = [str(name) for name in document["feature_names"]]
            arrays = [np.asarray(document[key], dtype=float) for key in ("mean", "scale", "coefficients")]
            intercept = float(document["intercept"])
            file_members = [str(name) for name in document["members"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"weights file {source!r} is incomplete or malformed: {exc!r}") from None
        if any(a.shape != (len(names),) or not np.all(np.isfinite(a)) for a in arrays) or np.any(arrays[1] <= 0):
            raise ConfigError(f"weights file {source!r} is inconsistent: feature arrays do not match their names")
        selector = cls(
            metrics=tuple(params.get("metrics", ())),
            C=params.get("C", 1.0),
            correctness=params.get("correctness", "em"),
            metric_params=params.get("metric_params"),
        )
        selector._check_params()
        order = member_order(file_members, members, len(file_members), source)
        expected = feature_names(selector.metrics, file_members, CONFIDENCE_FEATURES[0] in names)
        if names != expected:
            raise ConfigError(f"weights file {source!r} lists features this eor does not compute")
        selector.feature_names_ = names
        selector.uses_confidence_ = CONFIDENCE_FEATURES[0] in names
        selector.mean_, selector.scale_, selector.coef_ = arrays
        selector.intercept_ = intercept
        selector.members_ = file_members
        if members is not None:  # the pool's order: permute the member one-hot features
            selector._reorder(order, list(members))
        selector.members = list(selector.members_)
        selector.n_members_ = len(selector.members_)
        selector.metric_names_ = list(selector.metrics)
        selector.train_score_ = document.get("train_score")
        selector.metadata_ = dict(document.get("meta") or {})
        return selector

    def _reorder(self, order: list[int], members: list[str]) -> None:
        width = len(self.members_)
        base = len(self.metric_names_ if hasattr(self, "metric_names_") else self.metrics) + len(BASE_FEATURES)
        after = base + len(PER_MEMBER) * width  # the confidence features, when there are
        columns = list(range(base)) + [base + b * width + i for b in range(len(PER_MEMBER)) for i in order]
        columns += list(range(after, len(self.feature_names_)))
        self.feature_names_ = [self.feature_names_[c] for c in columns]
        self.mean_, self.scale_, self.coef_ = (a[columns] for a in (self.mean_, self.scale_, self.coef_))
        self.members_ = members
