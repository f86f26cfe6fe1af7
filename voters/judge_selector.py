"""`JudgeSelector`: chooses among a question's candidates (members' answers and spans) by the reader-as-judge
features (voters.judge_features): an L2 logistic regression (scikit-learn) on standardised features learns
P(candidate right) from training questions, and the candidate with the highest log-odds is chosen (ties to
the first: the members' answers come first, in pool order).

`families` picks the features by name prefix (`wrote:`, `lp:`, `mix:members`, ...), `spans` whether span
candidates compete. Only plain numbers are learned, so a fitted selector is a JSON document (`to_document`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

import numpy as np

from eor.core.errors import InputError
from voters.judge_features import JudgeFeatures

ALL_FEATURES = ("",)  # every feature: each name starts with the empty prefix


class JudgeSelector:
    """Hyper-parameters: `families` (feature-name prefixes kept), `spans` (span candidates compete), `C` (inverse
    L2 strength). Fitted: `names_`, `mean_`, `scale_`, `coef_`, `intercept_`."""

    def __init__(self, families: Sequence[str] = ALL_FEATURES, spans: bool = True, C: float = 1.0) -> None:  # noqa: N803
        self.families = tuple(families)
        self.spans = spans
        self.C = C

    def _columns(self, names: Sequence[str]) -> list[int]:
        return [i for i, name in enumerate(names) if name.startswith(self.families)]

    def _kept(self, features: JudgeFeatures) -> np.ndarray:
        """The rows of the candidates that compete (all, or the members' answers alone)."""
        if self.spans or not len(features.texts):
            return np.ones(len(features.texts), dtype=bool)
        return features.matrix[:, features.names.index("span")] == 0

    def fit(self, questions: Sequence[JudgeFeatures], right: Sequence[np.ndarray]) -> Self:
        """Learn from each training question's candidate features and whether each candidate is right."""
        from sklearn.linear_model import LogisticRegression

        if not questions or len(questions) != len(right):
            raise InputError("a judge selector needs the features and labels of at least one question")
        columns = self._columns(questions[0].names)
        rows = []
        for question, labels in zip(questions, right, strict=True):
            kept = self._kept(question)
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
        return self

    def decision(self, features: JudgeFeatures) -> np.ndarray:
        """Log-odds of each candidate being right; −inf for a candidate that does not compete."""
        if not hasattr(self, "coef_"):
            raise InputError("this JudgeSelector is not fitted yet: call fit first")
        columns = [features.names.index(name) for name in self.names_]
        scores = ((features.matrix[:, columns] - self.mean_) / self.scale_) @ self.coef_ + self.intercept_
        return np.where(self._kept(features), scores, -np.inf)

    def choose(self, features: JudgeFeatures) -> int | None:
        """The chosen candidate's index (None when the question has no candidate)."""
        if not len(features.texts):
            return None
        return int(np.argmax(self.decision(features)))

    def to_document(self) -> dict[str, Any]:
        return {
            "voter": "judge",
            "families": list(self.families),
            "spans": self.spans,
            "C": self.C,
            "features": self.names_,
            "mean": self.mean_.tolist(),
            "scale": self.scale_.tolist(),
            "coef": self.coef_.tolist(),
            "intercept": self.intercept_,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Self:
        selector = cls(document["families"], bool(document["spans"]), float(document["C"]))
        selector.names_ = list(document["features"])
        selector.mean_, selector.scale_ = np.asarray(document["mean"]), np.asarray(document["scale"])
        selector.coef_, selector.intercept_ = np.asarray(document["coef"]), float(document["intercept"])
        return selector
