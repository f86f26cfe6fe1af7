"""The one cumulative spend: what a cascade has spent on a question after each of its steps, the costs of the
members it ran so far, summed in the order it ran them.

A step costs its member's cost on the question (eor.runs.costs makes the costs, in reader seconds; this module
only sums them, since `voters` imports nothing of eor.runs). `voters.cascade.Cascade.spent` (the
trained cascade: `eor bench`, `eor train`'s cross-validation, the benchmarks) and `voters.cascade_fit`'s
held-out operating points both sum through `spend`.

What a member costs may depend on the member run just before it: the reader keeps the prefix that two prompts
share (eor.runs.costs.PromptReplay). `StepCosts` is what a cascade learns its order and threshold from: each
member's cost on each question when it runs right after another member (or first), so that every order is
charged as it would be paid; `FixedCosts` is the case where the member before changes nothing (a matrix of
recorded costs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class StepCosts(Protocol):
    """Each member's cost on every question (of a whole batch) when it runs right after another."""

    def after(self, previous: int | None, member: int) -> np.ndarray:
        """Per question, the cost of `member` run right after `previous` (None: first)."""
        ...

    def in_order(self, order: Sequence[int], members: int) -> np.ndarray:
        """(Q, members): each member of `order` charged as run right after the one before it in `order`, the
        others as run first."""
        ...


@dataclass(frozen=True)
class FixedCosts:
    """Costs that do not depend on the member run before: `matrix` (Q, M) per question and member."""

    matrix: np.ndarray

    def after(self, previous: int | None, member: int) -> np.ndarray:
        return np.asarray(self.matrix, dtype=float)[:, member]

    def in_order(self, order: Sequence[int], members: int) -> np.ndarray:
        return np.asarray(self.matrix, dtype=float)


@dataclass(frozen=True)
class TakenCosts:
    """The costs `costs` at the questions `rows` (positions among its questions)."""

    costs: StepCosts
    rows: np.ndarray

    def after(self, previous: int | None, member: int) -> np.ndarray:
        return self.costs.after(previous, member)[self.rows]

    def in_order(self, order: Sequence[int], members: int) -> np.ndarray:
        return self.costs.in_order(order, members)[self.rows]


def costs_after(costs: StepCosts, previous: int | None, members: int) -> np.ndarray:
    """(Q, members): every member's cost when run right after `previous` (None: first)."""
    return np.column_stack([costs.after(previous, m) for m in range(members)])


def spend(costs: np.ndarray, order: Sequence[int], stops: np.ndarray) -> np.ndarray:
    """Per row, the cost of running the members `order` (columns of `costs`, (R, M) per row and member) up to
    the step `stops[r]` (a position in `order`), that step included."""
    cumulative = np.cumsum(np.asarray(costs, dtype=float)[:, list(order)], axis=1)
    return cumulative[np.arange(len(stops)), np.asarray(stops, dtype=int)]
