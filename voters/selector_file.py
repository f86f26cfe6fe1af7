"""An `AnswerSelector`'s weights-file document both ways (`"voter": "selector"`): its feature names, the
standardisation (mean and scale) and the logistic regression's coefficients and intercept, as plain numbers
(no pickles). A cascade's weights file holds one such document per step (voters.cascade_file)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from eor.core.errors import ConfigError
from voters.features import BASE_FEATURES, CONFIDENCE_FEATURES, PER_MEMBER, feature_names
from voters.weights_file import header, member_order

if TYPE_CHECKING:
    from voters.selector import AnswerSelector

KIND = "selector"


def document(selector: AnswerSelector, **meta: Any) -> dict[str, Any]:
    """The weights-file document of a fitted selector. `meta`: reader, dataset, objective, ... (JSON values)."""
    meta.setdefault("objective", selector.correctness)
    return {
        **header(KIND, selector.members_, selector.metric_names_),
        "feature_names": selector.feature_names_,
        "mean": [float(v) for v in selector.mean_],
        "scale": [float(v) for v in selector.scale_],
        "coefficients": [float(v) for v in selector.coef_],
        "intercept": float(selector.intercept_),
        "train_score": selector.train_score_,
        "params": {
            "metrics": list(selector.metrics),
            "C": float(selector.C),
            "correctness": selector.correctness,
            "metric_params": selector.metric_params,
        },
        "meta": {**selector.metadata_, **meta},
    }


def from_document(
    cls: type[AnswerSelector], document: Mapping[str, Any], source: str, members: Sequence[str] | None = None
) -> AnswerSelector:
    """A fitted selector of class `cls` from a weights-file document (see `voters.load_voter`), its member
    features in the order of `members` when given."""
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
