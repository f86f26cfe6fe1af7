"""`Cascade`: answer with only the members a question needs (beyond the paper), an sklearn-style estimator
like `Voter` and `AnswerSelector`.

The estimator (the steps, the stop decision, the replay over recorded answers) is `CascadeModel`
(voters.cascade_model); `Cascade` subclasses it and adds what a fitted cascade tells of itself: its
description, the account of one vote (the covering step's selector's), and its weights-file document both
ways (`"voter": "cascade"`): each step's members, selector document and calibration, the threshold, the
operating points and the members' costs. Dependencies run one way: this module imports the model, never the
reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from eor.core.errors import ConfigError
from voters.cascade_fit import Calibration
from voters.cascade_model import DEFAULT_MAX_LOSS, EVENT_LABELS, KIND, CascadeModel, CascadeStep
from voters.cascade_points import OperatingPoint
from voters.protocol import confidence_kwargs
from voters.selector import AnswerSelector
from voters.weights_file import header, member_order, write_document

__all__ = ["DEFAULT_MAX_LOSS", "EVENT_LABELS", "KIND", "Cascade"]


class Cascade(CascadeModel):
    """Learned cascade of answer selectors, with its account and weights file (the estimator and its
    hyper-parameters: `voters.cascade_model.CascadeModel`)."""

    def explain_row(
        self,
        answers: Sequence[str],
        passages: Sequence[Sequence[str]],
        question: str,
        members: Sequence[int],
        confidence: Sequence[Any] | None = None,
    ) -> dict[str, Any]:
        """The covering step's selector account (each feature's contribution), with the step named."""
        names = [self.members_[int(m)] for m in members]
        j = self.covering_step(names)
        step = self.steps_[j]
        index = [step.members.index(n) for n in names]
        known = confidence_kwargs(step.selector, confidence)
        account = step.selector.explain_row(answers, passages, question, index, **known)
        return {**account, "voter": KIND, "step": j, "step_members": list(step.members)}

    def describe(self) -> dict[str, Any]:
        """The fitted cascade for reports: its order, stop rule, steps, costs and operating points."""
        self._check_fitted()
        return {
            "voter": KIND,
            "metrics": list(self.metric_names_),
            "order": list(self.order_),
            "stop_on": self.stop_on_,
            "stop_targets": dict(getattr(self, "stop_targets_", {})),
            "threshold": _finite_or_none(self.threshold_),
            "steps": [{"members": list(s.members), "calibration": s.calibration.to_dict()} for s in self.steps_],
            "cost_unit": self.cost_unit_,
            "member_costs": dict(self.member_costs_),
            "full_accuracy": self.full_accuracy_,
            "full_cost": self.full_cost_,
            "chosen": self.chosen_point_.to_dict(),
            "operating_points": [point.to_dict() for point in self.operating_points_],
        }

    # -- the weights file (voters.weights_file) ------------------------------------------------------------

    def to_document(self, **meta: Any) -> dict[str, Any]:
        """The weights-file document of the fitted cascade (what `save` writes): every step's selector document
        and calibration. `meta`: reader, dataset, objective, ... (JSON values)."""
        self._check_fitted()
        meta.setdefault("objective", self.correctness)
        return {
            **header(KIND, self.members_, self.metric_names_),
            **{key: value for key, value in self.describe().items() if key not in ("voter", "metrics", "steps")},
            "steps": [
                {
                    "members": s.members,
                    "calibration": s.calibration.to_dict(),
                    "selector": s.selector.to_document(),
                }
                for s in self.steps_
            ],
            "train_score": self.train_score_,
            "params": {
                "metrics": list(self.metrics),
                "C": float(self.C),
                "correctness": self.correctness,
                "metric_params": self.metric_params,
                "max_loss": self.max_loss,
                "budget": self.budget,
                "stop_on": self.stop_on,
                "folds": self.folds,
                "seed": self.seed,
            },
            "meta": {**self.metadata_, **meta},
        }

    def save(self, path: str | Path, **meta: Any) -> Path:
        """Write the weights file (JSON), `to_document(**meta)`. `meta`: reader, dataset, objective, ... (JSON
        values)."""
        return write_document(path, self.to_document(**meta))

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Self:
        """A fitted cascade from a weights-file document (see `voters.load_voter`)."""
        try:
            params = dict(document["params"])
            file_members = [str(name) for name in document["members"]]
            order = [str(name) for name in document["order"]]
            threshold = document["threshold"]
            steps = [
                CascadeStep(
                    [str(name) for name in step["members"]],
                    AnswerSelector.from_document(step["selector"], source),
                    Calibration(**{key: float(value) for key, value in step["calibration"].items()}),
                )
                for step in document["steps"]
            ]
            points = [_point(point) for point in document["operating_points"]]
            chosen = _point(document["chosen"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"weights file {source!r} is incomplete or malformed: {exc!r}") from None
        cascade = cls(**params)
        cascade._check_params()
        _check_steps(steps, order, file_members, source)
        positions = member_order(file_members, members, len(file_members), source)
        cascade.members_ = [file_members[i] for i in positions]
        cascade.members = list(cascade.members_)
        cascade.n_members_ = len(cascade.members_)
        cascade.metric_names_ = list(cascade.metrics)
        cascade.order_ = order
        cascade.stop_on_ = str(document.get("stop_on", "agreement"))
        cascade.stop_targets_ = dict(document.get("stop_targets") or {})
        cascade.steps_ = steps
        cascade.threshold_ = float("inf") if threshold is None else float(threshold)
        cascade.operating_points_ = points
        cascade.chosen_point_ = chosen
        cascade.full_accuracy_ = float(document["full_accuracy"])
        cascade.full_cost_ = float(document["full_cost"])
        cascade.cost_unit_ = str(document.get("cost_unit", "seconds"))
        cascade.member_costs_ = {str(k): float(v) for k, v in dict(document.get("member_costs") or {}).items()}
        cascade.train_score_ = document.get("train_score")
        cascade.metadata_ = dict(document.get("meta") or {})
        return cascade


def _finite_or_none(value: float) -> float | None:
    return None if np.isinf(value) else float(value)


def _point(entry: Mapping[str, Any]) -> OperatingPoint:
    threshold = entry["threshold"]
    return OperatingPoint(
        float("inf") if threshold is None else float(threshold),
        float(entry["accuracy"]),
        float(entry["loss"]),
        float(entry["cost"]),
        float(entry["cost_p90"]),
        float(entry["members_run"]),
    )


def _check_steps(steps: list[CascadeStep], order: list[str], members: list[str], source: str) -> None:
    """The steps must be the prefixes of an order of every member, each selector over its step's members."""
    if sorted(order) != sorted(members) or len(steps) != len(order):
        raise ConfigError(f"weights file {source!r}: the cascade's order must hold every member once")
    for j, step in enumerate(steps):
        if step.members != order[: j + 1] or list(step.selector.members_) != step.members:
            raise ConfigError(f"weights file {source!r}: step {j} does not hold the first {j + 1} members of the order")
