"""A cascade's operating points (voters.cascade_fit): what each stopping threshold gave on held-out training
questions (`OperatingPoint`, all of them with the per-question outcomes in `HeldOut`), what answers the questions
no step stops when the cascade ends with a step of its own (`LastStep`: the reader as judge), and the choice of a
threshold among the points under a loss or a budget (`choose_point`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eor.core.errors import ConfigError, InputError


@dataclass(frozen=True)
class OperatingPoint:
    """A threshold and what it gave on held-out training questions (repeated K-fold): accuracy, loss against
    the full pool's selector, mean and 90th-percentile cost per question, mean members run."""

    threshold: float
    accuracy: float
    loss: float
    cost: float
    cost_p90: float
    members_run: float

    def to_dict(self) -> dict[str, float | None]:
        return {
            "threshold": None if np.isinf(self.threshold) else self.threshold,
            "accuracy": self.accuracy,
            "loss": self.loss,
            "cost": self.cost,
            "cost_p90": self.cost_p90,
            "members_run": self.members_run,
        }


@dataclass(frozen=True)
class LastStep:
    """What answers the questions a cascade runs to its end, instead of the last step's selector: per training
    row (the rows of `StepScores`), whether its choice is right, held out on each of the REPEATS splits
    (`right` (repeats, R): repeat r's choice from a fit on the other folds of `folds(R, K, seed + r)`), and its
    cost on top of every member's (`cost` (R,), in the members' cost unit)."""

    right: np.ndarray
    cost: np.ndarray
    probability: np.ndarray | None = None  # (repeats, R): its P(right) of each held-out choice, where it gives one


@dataclass
class HeldOut:
    """Every threshold's operating point, and the full pool's selector, on held-out training questions; and per
    threshold, repeat and row (T, repeats, R) whether the answer was right and its P(right) (the stopping
    step's calibrated P when the cascade stops on `right`, the last step's own where it answered; NaN else)."""

    points: list[OperatingPoint]
    full_accuracy: float
    full_cost: float
    right: np.ndarray | None = None
    probability: np.ndarray | None = None
    steps: np.ndarray | None = None  # (T, repeats, R): the steps run (the last step's count: no step stopped)


def choose_point(points: Sequence[OperatingPoint], max_loss: float | None, budget: float | None) -> OperatingPoint:
    """Under `budget`: the point of least loss whose mean cost is at most the budget. Under `max_loss` (a
    fraction): the cheapest threshold from which on every higher threshold also loses at most max_loss (a
    lucky dip of a low threshold does not count)."""
    ordered = sorted(points, key=lambda p: p.threshold)
    if budget is not None:
        within = [p for p in ordered if p.cost <= budget]
        if not within:
            cheapest = min(p.cost for p in ordered)
            raise InputError(f"no cascade fits a budget of {budget:g} per question: the cheapest costs {cheapest:.3g}")
        return min(within, key=lambda p: (p.loss, p.cost))
    if max_loss is None or max_loss < 0:
        raise ConfigError(f"max_loss must be a number ≥ 0, got {max_loss!r}")
    chosen = ordered[-1]
    for point in reversed(ordered):
        if point.loss > max_loss + 1e-12:
            break
        chosen = point
    return chosen
