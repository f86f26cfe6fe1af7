"""`AnswerSelector`: a learned answer selector (beyond the paper), an sklearn-style estimator like `Voter`.

The estimator (features, the logistic regression, decision scores) is `SelectorModel` (voters.selector_model);
`AnswerSelector` subclasses it and adds what a fitted selector tells of itself: its description, the account
of one vote (each feature's contribution), and its weights-file document both ways (`"voter": "selector"`):
its feature names, the standardisation (mean and scale) and the logistic regression's coefficients and
intercept, as plain numbers (no pickles). A cascade's weights file holds one such document per step
(voters.cascade). Dependencies run one way: this module imports the model, never the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from eor.core.errors import ConfigError
from voters.features import BASE_FEATURES, CONFIDENCE_FEATURES, PER_MEMBER, feature_names
from voters.selector_model import KIND, SelectorModel, fit_on_features
from voters.weights_file import header, member_order, write_document

__all__ = ["KIND", "AnswerSelector", "fit_on_features"]


class AnswerSelector(SelectorModel):
    """Logistic-regression answer selector, with its account and weights file (the estimator and its
    hyper-parameters: `voters.selector_model.SelectorModel`)."""

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

    # -- the weights file (voters.weights_file) ------------------------------------------------------------

    def to_document(self, **meta: Any) -> dict[str, Any]:
        """The weights-file document of the fitted selector (what `save` writes). `meta`: reader, dataset,
        objective, ... (JSON values)."""
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

    def save(self, path: str | Path, **meta: Any) -> Path:
        """Write the weights file (JSON), `to_document(**meta)`. `meta`: reader, dataset, objective, ... (JSON
        values)."""
        return write_document(path, self.to_document(**meta))

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Self:
        """A fitted selector from a weights-file document (see `voters.load_voter`), its member features in the
        order of `members` when given."""
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
        selector.mean_, selector.scale_, selector.coef_ = arrays
        selector.intercept_ = intercept
        selector.members_ = file_members
        if members is not None:  # the pool's order: permute the member one-hot features
            _reorder(selector, order, list(members))
        selector.members = list(selector.members_)
        selector.n_members_ = len(selector.members_)
        selector.metric_names_ = list(selector.metrics)
        selector.train_score_ = document.get("train_score")
        selector.metadata_ = dict(document.get("meta") or {})
        return selector


def _reorder(selector: AnswerSelector, order: list[int], members: list[str]) -> None:
    """Permute the per-member features (voters.features.PER_MEMBER) of a loaded selector to `members`' order."""
    width = len(selector.members_)
    base = len(selector.metrics) + len(BASE_FEATURES)
    after = base + len(PER_MEMBER) * width  # the confidence features, when there are
    columns = list(range(base)) + [base + b * width + i for b in range(len(PER_MEMBER)) for i in order]
    columns += list(range(after, len(selector.feature_names_)))
    selector.feature_names_ = [selector.feature_names_[c] for c in columns]
    selector.mean_, selector.scale_, selector.coef_ = (
        a[columns] for a in (selector.mean_, selector.scale_, selector.coef_)
    )
    selector.members_ = members
