"""What a fitted `Cascade` holds, from its fit (`take_fit`) or its weights file (`from_document`), its
description, and its weights-file document (`"voter": "cascade"`): each step's members, selector document
and calibration, the threshold, the operating points and the members' costs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from eor.core.errors import ConfigError
from voters import selector_file
from voters.cascade_fit import Calibration, CascadeFit, OperatingPoint
from voters.selector import AnswerSelector
from voters.weights_file import header, member_order

if TYPE_CHECKING:
    from voters.cascade import Cascade

KIND = "cascade"


@dataclass
class CascadeStep:
    """Step j: the members that have answered once it ran (a prefix of the order), its selector and its
    calibration."""

    members: list[str]
    selector: AnswerSelector
    calibration: Calibration


def take_fit(cascade: Cascade, fitted: CascadeFit, names: list[str], costs: np.ndarray, unit: str) -> None:
    """Keep what `fit_steps` (voters.cascade_fit) learned for the members `names` as the cascade's fitted
    attributes: the stop target, the order, each step, the threshold and the operating points held out on
    the training questions; and each member's mean cost over the training questions' `costs` (in `unit`)."""
    found = fitted.search
    cascade.stop_on_ = fitted.stop_on
    cascade.stop_targets_ = {name: point.to_dict() for name, point in fitted.targets.items()}
    cascade.members_ = list(names)
    cascade.n_members_ = len(cascade.members_)
    cascade.metric_names_ = list(cascade.metrics)
    cascade.order_ = [cascade.members_[m] for m in found.order]
    cascade.steps_ = [
        CascadeStep(cascade.order_[: j + 1], selector, calibration)
        for j, (selector, calibration) in enumerate(zip(fitted.selectors, found.calibrations, strict=True))
    ]
    cascade.threshold_ = fitted.chosen.threshold
    cascade.operating_points_ = list(fitted.held_out.points)
    cascade.held_out_ = fitted.held_out  # each threshold's held-out answers (not saved: for training's reports)
    cascade.chosen_point_ = fitted.chosen
    cascade.full_accuracy_ = fitted.held_out.full_accuracy
    cascade.full_cost_ = fitted.held_out.full_cost
    cascade.cost_unit_ = unit
    cascade.member_costs_ = {name: float(value) for name, value in zip(names, costs.mean(axis=0), strict=True)}
    cascade.train_score_ = None  # eor.commands.train_command replays the cascade on the training records
    cascade.metadata_ = getattr(cascade, "metadata_", {})


def describe(cascade: Cascade) -> dict[str, Any]:
    """The fitted cascade for reports: its order, stop rule, steps, costs and operating points."""
    return {
        "voter": KIND,
        "metrics": list(cascade.metric_names_),
        "order": list(cascade.order_),
        "stop_on": cascade.stop_on_,
        "stop_targets": dict(getattr(cascade, "stop_targets_", {})),
        "threshold": _finite_or_none(cascade.threshold_),
        "steps": [{"members": list(s.members), "calibration": s.calibration.to_dict()} for s in cascade.steps_],
        "cost_unit": cascade.cost_unit_,
        "member_costs": dict(cascade.member_costs_),
        "full_accuracy": cascade.full_accuracy_,
        "full_cost": cascade.full_cost_,
        "chosen": cascade.chosen_point_.to_dict(),
        "operating_points": [point.to_dict() for point in cascade.operating_points_],
    }


def document(cascade: Cascade, **meta: Any) -> dict[str, Any]:
    """The weights-file document of a fitted cascade: every step's selector document and calibration."""
    meta.setdefault("objective", cascade.correctness)
    return {
        **header(KIND, cascade.members_, cascade.metric_names_),
        **{key: value for key, value in describe(cascade).items() if key not in ("voter", "metrics", "steps")},
        "steps": [
            {
                "members": s.members,
                "calibration": s.calibration.to_dict(),
                "selector": selector_file.document(s.selector),
            }
            for s in cascade.steps_
        ],
        "train_score": cascade.train_score_,
        "params": {
            "metrics": list(cascade.metrics),
            "C": float(cascade.C),
            "correctness": cascade.correctness,
            "metric_params": cascade.metric_params,
            "max_loss": cascade.max_loss,
            "budget": cascade.budget,
            "stop_on": cascade.stop_on,
            "folds": cascade.folds,
            "seed": cascade.seed,
        },
        "meta": {**cascade.metadata_, **meta},
    }


def from_document(
    cls: type[Cascade], document: Mapping[str, Any], source: str, members: Sequence[str] | None = None
) -> Cascade:
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
