"""Learning a cascade (voters.cascade) from training records: the member order, each step's answer selector
and calibration, and the frontier of stopping thresholds. Everything is decided on out-of-fold scores.

For a set S of members that have answered, `StepScores.of(S)` cross-validates an answer selector over S
(K folds by question, seeded): every training question gets a held-out log-odds per candidate, the leading
candidate (argmax, ties to the first), its log-odds z, its margin δ over the best candidate with another
normalised answer (MARGIN_CAP when no candidate differs) and whether it is right. Subsets are cached, so an
order search and the steps of the chosen order share their fits.

1. **Order** (`greedy_order`): start empty; append the member with the most cross-validated accuracy gained
   per unit of cost (its mean cost per question on the records), acc(S ∪ {m}) − acc(S) over cost(m); once no
   member gains, the rest follow cheapest first. Every member is in the order, so the last step is the full
   pool's selector.
2. **Calibration** (`fit_calibration`): per step, a logistic regression of "the leading candidate is right"
   on (z, min(δ, MARGIN_CAP)) over the out-of-fold rows: P(right) = σ(a + b·z + c·min(δ, MARGIN_CAP)).
3. **Frontier** (`frontier`): one threshold t for every step (per-step thresholds overfit the training
   records in nested cross-validation, docs/cascade.md); a question stops at the first step with P ≥ t, at
   the last step otherwise. Each candidate t (every out-of-fold P, and +inf: never stop early) gives an
   accuracy and a mean cost; the Pareto-optimal ones are the operating points.
4. **Choice** (`choose_point`): the cheapest point within `max_loss` of the full pool's out-of-fold
   accuracy, or the most accurate point whose mean cost is at most `budget`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eor.errors import ConfigError, InputError
from voters.features import CandidateBlocks, FeatureSet
from voters.folds import folds
from voters.scoring import choose
from voters.selector import AnswerSelector

#: the margin of a leading answer that no other candidate contradicts (and the cap of every margin).
MARGIN_CAP = 10.0


@dataclass(frozen=True)
class Calibration:
    """P(right) = σ(intercept + top · z + margin · min(δ, MARGIN_CAP)) of a step's leading candidate."""

    intercept: float
    top: float
    margin: float

    def probability(self, top: np.ndarray, margin: np.ndarray) -> np.ndarray:
        logit = self.intercept + self.top * np.asarray(top) + self.margin * np.minimum(margin, MARGIN_CAP)
        return 1.0 / (1.0 + np.exp(-logit))

    def to_dict(self) -> dict[str, float]:
        return {"intercept": self.intercept, "top": self.top, "margin": self.margin}


def fit_calibration(top: np.ndarray, margin: np.ndarray, right: np.ndarray) -> Calibration:
    """The logistic calibration of a step from its out-of-fold (z, δ, right) rows."""
    from sklearn.linear_model import LogisticRegression

    labels = np.asarray(right, dtype=bool)
    if labels.all() or not labels.any():  # one class: a constant probability
        share = float(np.clip(labels.mean() if len(labels) else 0.5, 1e-3, 1 - 1e-3))
        return Calibration(float(np.log(share / (1 - share))), 0.0, 0.0)
    x = np.column_stack([top, np.minimum(margin, MARGIN_CAP)])
    model = LogisticRegression(C=1.0, max_iter=1000).fit(x, labels)
    return Calibration(float(model.intercept_[0]), float(model.coef_[0, 0]), float(model.coef_[0, 1]))


def leading(scores: np.ndarray, same: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pick, z, δ) per question from candidate log-odds (Q, S) and equal normalised answers (Q, S, S)."""
    values = np.asarray(scores, dtype=float)
    pick = choose(values)
    rows = np.arange(len(values))
    top = values[rows, pick]
    agrees = np.asarray(same, dtype=bool)[rows, pick]  # (Q, S): candidates with the leader's answer
    rival = np.where(agrees, -np.inf, values).max(axis=1) if values.shape[1] else np.full(len(values), -np.inf)
    margin = np.where(np.isfinite(rival), top - rival, MARGIN_CAP)
    return pick, top, np.minimum(margin, MARGIN_CAP)


@dataclass(frozen=True)
class OutOfFold:
    """Held-out results of a selector over one member subset, per training question."""

    pick: np.ndarray  # position in the subset of the leading candidate
    top: np.ndarray
    margin: np.ndarray
    right: np.ndarray  # bool

    @property
    def accuracy(self) -> float:
        return float(self.right.mean()) if len(self.right) else 0.0


@dataclass
class SelectorSettings:
    """The hyper-parameters of every step's answer selector."""

    metrics: tuple[str, ...] = ("em", "f1", "cosine")
    C: float = 1.0  # noqa: N815 - scikit-learn's name
    correctness: str = "em"
    metric_params: dict | None = None

    def selector(self, members: Sequence[str]) -> AnswerSelector:
        return AnswerSelector(
            metrics=self.metrics,
            C=self.C,
            correctness=self.correctness,
            metric_params=self.metric_params,
            members=list(members),
        )


class StepScores:
    """Out-of-fold selector results of member subsets over the training `rows`, cached by subset.

    blocks: candidate feature blocks of every member (voters.features); labels (Q, M): each member's answer
    is right; names: the member names; folds/seed: the cross-validation."""

    def __init__(
        self,
        blocks: CandidateBlocks,
        labels: np.ndarray,
        names: Sequence[str],
        rows: np.ndarray,
        settings: SelectorSettings,
        k: int = 5,
        seed: int = 0,
    ) -> None:
        self.blocks = blocks
        self.labels = np.asarray(labels, dtype=bool)
        self.names = list(names)
        self.rows = np.asarray(rows)
        self.settings = settings
        self.parts = folds(len(self.rows), k, seed)
        self._cache: dict[tuple[int, ...], OutOfFold] = {}

    def features(self, subset: Sequence[int]) -> FeatureSet:
        return self.blocks.features(subset, [self.names[m] for m in subset])

    def fit(self, subset: Sequence[int], rows: np.ndarray) -> AnswerSelector:
        """The subset's selector fitted on `rows`."""
        features = self.features(subset)
        names = [self.names[m] for m in subset]
        return self.settings.selector(names).fit_features(
            FeatureSet(features.names, features.matrix[rows]), self.labels[np.ix_(rows, list(subset))], names
        )

    def of(self, subset: Sequence[int]) -> OutOfFold:
        key = tuple(int(m) for m in subset)
        if key not in self._cache:
            self._cache[key] = self._out_of_fold(key)
        return self._cache[key]

    def _out_of_fold(self, subset: tuple[int, ...]) -> OutOfFold:
        features = self.features(subset).matrix
        scores = np.zeros((len(self.rows), len(subset)))
        for held in self.parts:
            train = np.delete(self.rows, held)
            scores[held] = self.fit(subset, train).feature_scores(features[self.rows[held]])
        same = self.blocks.same[np.ix_(self.rows, subset, subset)]
        pick, top, margin = leading(scores, same)
        right = self.labels[self.rows[:, None], np.asarray(subset)[None, :]][np.arange(len(self.rows)), pick]
        return OutOfFold(pick, top, margin, right)


def greedy_order(scores: StepScores, costs: np.ndarray) -> list[int]:
    """Members by cross-validated accuracy gained per unit of cost, then (no gain left) cheapest first."""
    unit = np.maximum(np.asarray(costs, dtype=float), 1e-9)
    order: list[int] = []
    accuracy = 0.0
    remaining = list(range(len(unit)))
    while remaining:
        gains = [(scores.of([*order, m]).accuracy - accuracy) / unit[m] for m in remaining]
        best = int(np.argmax(gains))  # ties: the earlier member
        if gains[best] <= 0:
            order += sorted(remaining, key=lambda m: (unit[m], m))
            break
        member = remaining.pop(best)
        order.append(member)
        accuracy = scores.of(order).accuracy
    return order


@dataclass(frozen=True)
class OperatingPoint:
    """A threshold and what it gave on the training records out of fold: accuracy, mean and 90th-percentile
    cost per question, mean members run."""

    threshold: float
    accuracy: float
    cost: float
    cost_p90: float
    members_run: float

    def to_dict(self) -> dict[str, float | None]:
        return {
            "threshold": None if np.isinf(self.threshold) else self.threshold,
            "accuracy": self.accuracy,
            "cost": self.cost,
            "cost_p90": self.cost_p90,
            "members_run": self.members_run,
        }


def stop_steps(probability: np.ndarray, threshold: float) -> np.ndarray:
    """Per question, the first step whose P(right) ≥ threshold; the last step when none is."""
    values = np.asarray(probability, dtype=float)
    last = values.shape[1] - 1
    early = values[:, :last] >= threshold
    return np.where(early.any(axis=1), np.argmax(early, axis=1), last)


def frontier(probability: np.ndarray, right: np.ndarray, cumulative: np.ndarray) -> list[OperatingPoint]:
    """The Pareto-optimal operating points (ascending cost) of one threshold over every step.

    probability, right, cumulative: (R, J) per training question and step: P(right) of the leading
    candidate, whether it is right, and the cost of running the steps up to this one."""
    probability = np.asarray(probability, dtype=float)
    candidates = np.unique(probability[:, :-1])[::-1] if probability.shape[1] > 1 else np.zeros(0)
    rows = np.arange(len(probability))
    points = []
    for threshold in (np.inf, *candidates):
        stop = stop_steps(probability, threshold)
        cost = cumulative[rows, stop]
        points.append(
            OperatingPoint(
                float(threshold),
                float(right[rows, stop].mean()),
                float(cost.mean()),
                float(np.percentile(cost, 90)),
                float(stop.mean() + 1),
            )
        )
    points.sort(key=lambda p: (p.cost, -p.accuracy))
    pareto: list[OperatingPoint] = []
    for point in points:
        if not pareto or point.accuracy > pareto[-1].accuracy:
            pareto.append(point)
    return pareto


def choose_point(
    points: Sequence[OperatingPoint], full_accuracy: float, max_loss: float | None, budget: float | None
) -> OperatingPoint:
    """The cheapest point within `max_loss` (a fraction) of `full_accuracy`, or the most accurate point whose
    mean cost is at most `budget`."""
    if budget is not None:
        within = [p for p in points if p.cost <= budget]
        if not within:
            cheapest = min(p.cost for p in points)
            raise InputError(f"no cascade fits a budget of {budget:g} per question: the cheapest costs {cheapest:.3g}")
        return max(within, key=lambda p: (p.accuracy, -p.cost))
    if max_loss is None or max_loss < 0:
        raise ConfigError(f"max_loss must be a number ≥ 0, got {max_loss!r}")
    within = [p for p in points if p.accuracy >= full_accuracy - max_loss - 1e-12]
    return min(within or points, key=lambda p: (p.cost, -p.accuracy) if within else (-p.accuracy, p.cost))


@dataclass
class CascadeFit:
    """What the search learned: the order (positions), per step the selector fitted on every training
    question and the calibration, the frontier, the chosen point and the full pool's out-of-fold accuracy."""

    order: list[int]
    selectors: list[AnswerSelector]
    calibrations: list[Calibration]
    points: list[OperatingPoint]
    chosen: OperatingPoint
    full_accuracy: float
    full_cost: float


def fit_steps(
    scores: StepScores, costs: np.ndarray, *, max_loss: float | None = 0.005, budget: float | None = None
) -> CascadeFit:
    """The cascade of the training rows of `scores`; costs (Q, M) per question and member (the rows of
    `scores.rows` are used)."""
    per_question = np.asarray(costs, dtype=float)[scores.rows]
    if per_question.shape[1] != len(scores.names) or not np.all(np.isfinite(per_question)):
        raise InputError("member costs must be finite numbers, one per question and member")
    order = greedy_order(scores, per_question.mean(axis=0))
    probability, right, cumulative, calibrations = [], [], [], []
    spent = np.zeros(len(scores.rows))
    for j in range(len(order)):
        held = scores.of(order[: j + 1])
        calibration = fit_calibration(held.top, held.margin, held.right)
        calibrations.append(calibration)
        probability.append(calibration.probability(held.top, held.margin))
        right.append(held.right)
        spent = spent + per_question[:, order[j]]
        cumulative.append(spent.copy())
    points = frontier(np.column_stack(probability), np.column_stack(right), np.column_stack(cumulative))
    full = scores.of(order).accuracy
    chosen = choose_point(points, full, max_loss, budget)
    selectors = [scores.fit(order[: j + 1], scores.rows) for j in range(len(order))]
    return CascadeFit(order, selectors, calibrations, points, chosen, full, float(spent.mean()))
