"""Learning a cascade (voters.cascade) from training records: the member order, each step's answer selector
and calibration, and the stopping threshold. Everything is decided on held-out scores.

For a set S of members that have answered, `StepScores.of(S)` cross-validates an answer selector over S
(K folds by question, seeded): every training question gets a held-out log-odds per candidate, the leading
candidate (argmax, ties to the first), its log-odds z, its margin δ over the best candidate with another
normalised answer (MARGIN_CAP when no candidate differs) and whether it is right. Subsets are cached, so the
order search and the steps of the chosen order share their fits.

1. **Order** (`greedy_order`): start empty; append the member with the most cross-validated accuracy gained
   per unit of cost (its mean cost per question on the records when it runs right after the member appended
   before it: voters.spend.StepCosts, the prompt prefix the reader keeps), acc(S ∪ {m}) − acc(S) over cost(m);
   once no member gains, the rest follow, each the cheapest after the one before it. Every member is in the
   order, so the last step is the full pool's selector. Held out (step 3), every member is charged right after
   the one before it in the cascade's order.
2. **Calibration** (`fit_calibration`): per step, a logistic regression on (z, min(δ, MARGIN_CAP)) over the
   out-of-fold rows of the event "the step's leading answer is right" (`stop_on="right"`) or "it is the full
   pool's" (`stop_on="agreement"`): P = σ(a + b·z + c·min(δ, MARGIN_CAP)). `stop_on="auto"` (the default)
   tries both and keeps the one whose held-out operating point (step 3) is cheaper.
3. **Threshold** (`held_out_points`; `choose_point`, voters.cascade_points): one threshold t for every step; a
   question stops at the first step with P ≥ t, at the last step otherwise. Steps 1-2 are run again on the other
   folds of `REPEATS` K-fold splits and replayed on each held-out fold, so every t of THRESHOLDS has a held-out
   accuracy, loss against the full pool's selector and cost. Under `max_loss` the cheapest t from which on
   every higher t loses at most max_loss is chosen; under `budget` the t of least loss within the budget.

A cascade may end in a `LastStep` of its own (the reader as judge, eor.learning.judge_cascade): a question that
no step stops answers with that step's choice at that step's extra cost, and "the full pool" above is that
step on every question. Its correctness per question is held out on the same repeated splits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from eor.core.cache_policy import KeyedMemo
from eor.core.errors import ConfigError, InputError
from voters.cascade_points import HeldOut, LastStep, OperatingPoint, choose_point
from voters.features import CandidateBlocks, FeatureSet
from voters.folds import cross_fit, folds
from voters.scoring import choose
from voters.selector import AnswerSelector, fit_on_features
from voters.spend import StepCosts, costs_after, spend

#: the margin of a leading answer that no other candidate contradicts (and the cap of every margin).
MARGIN_CAP = 10.0


@dataclass(frozen=True)
class Calibration:
    """P = σ(intercept + top · z + margin · min(δ, MARGIN_CAP)) of a step's leading candidate: that it is right,
    or that it is the full pool's answer (the cascade's stop target)."""

    intercept: float
    top: float
    margin: float

    def probability(self, top: np.ndarray, margin: np.ndarray) -> np.ndarray:
        logit = self.intercept + self.top * np.asarray(top) + self.margin * np.minimum(margin, MARGIN_CAP)
        return 1.0 / (1.0 + np.exp(-logit))

    def to_dict(self) -> dict[str, float]:
        return {"intercept": self.intercept, "top": self.top, "margin": self.margin}


def fit_calibration(top: np.ndarray, margin: np.ndarray, right: np.ndarray) -> Calibration:
    """The logistic calibration of a step from its out-of-fold (z, δ, event) rows."""
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
    member: np.ndarray  # the leading candidate's member (a position among every member)
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
    metric_params: Mapping[str, Mapping[str, Any]] | None = None

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
        self.seed = seed
        self.parts = folds(len(self.rows), k, seed)
        self._cache: KeyedMemo[tuple[int, ...], OutOfFold] = KeyedMemo()

    def features(self, subset: Sequence[int]) -> FeatureSet:
        return self.blocks.features(subset, [self.names[m] for m in subset])

    def fit(self, subset: Sequence[int], rows: np.ndarray) -> AnswerSelector:
        """The subset's selector fitted on `rows`."""
        features = self.features(subset)
        names = [self.names[m] for m in subset]
        return fit_on_features(
            self.settings.selector(names),
            FeatureSet(features.names, features.matrix[rows]),
            self.labels[np.ix_(rows, np.asarray(subset, dtype=np.intp))],
            names,
        )

    def of(self, subset: Sequence[int]) -> OutOfFold:
        key = tuple(int(m) for m in subset)
        found = self._cache.get(key)
        return self._cache.keep(key, self._out_of_fold(key)) if found is None else found

    def _out_of_fold(self, subset: tuple[int, ...]) -> OutOfFold:
        features = self.features(subset).matrix
        scores = np.zeros((len(self.rows), len(subset)))

        def scored(selector: Any, held: np.ndarray) -> None:
            scores[held] = selector.feature_scores(features[self.rows[held]])

        positions = np.arange(len(self.rows))
        cross_fit(self.parts, positions, lambda train: self.fit(subset, self.rows[train]), scored)
        columns = np.asarray(subset, dtype=np.intp)
        same = self.blocks.same[np.ix_(self.rows, columns, columns)]
        pick, top, margin = leading(scores, same)
        member = np.asarray(subset)[pick]
        return OutOfFold(pick, member, top, margin, self.labels[self.rows, member])


def greedy_order(scores: StepScores, costs: StepCosts) -> list[int]:
    """Members by cross-validated accuracy gained per unit of cost, each charged its mean cost over the rows of
    `scores` run right after the member chosen before it; then (no gain left) the cheapest after the last."""
    order: list[int] = []
    accuracy = 0.0
    remaining = list(range(len(scores.names)))
    gaining = True
    while remaining:
        unit = mean_costs(scores, costs, order[-1] if order else None)
        gains = [(scores.of([*order, m]).accuracy - accuracy) / unit[m] for m in remaining] if gaining else [0.0]
        best = int(np.argmax(gains))  # ties: the earlier member
        if gains[best] <= 0:
            gaining = False
            best = min(range(len(remaining)), key=lambda i: (unit[remaining[i]], remaining[i]))
        member = remaining.pop(best)
        order.append(member)
        accuracy = scores.of(order).accuracy if gaining else accuracy
    return order


def mean_costs(scores: StepScores, costs: StepCosts, previous: int | None) -> np.ndarray:
    """Each member's mean cost over the rows of `scores` when run right after `previous` (at least 1e-9);
    InputError unless every cost is a finite number."""
    per_question = costs_after(costs, previous, len(scores.names))[scores.rows]
    if not np.all(np.isfinite(per_question)):
        raise InputError("member costs must be finite numbers, one per question and member")
    return np.maximum(per_question.mean(axis=0), 1e-9)


#: what a step's calibration predicts: that its leading answer is right, or that it is the full pool's.
STOP_TARGETS = ("right", "agreement")
#: the thresholds tried on held-out folds (+inf: never stop before the last step).
THRESHOLDS = (*np.round(np.arange(0.05, 0.99, 0.01), 2), 0.995, 0.999, float("inf"))
#: repetitions of the K-fold split (seeds seed, seed + 1, ...) that held-out figures are averaged over: one
#: split of 600 questions moves a threshold's loss by about ±0.5 points (docs/cascade.md).
REPEATS = 3


def stop_steps(probability: np.ndarray, threshold: float) -> np.ndarray:
    """Per question, the first step whose P ≥ threshold; the last step when none is."""
    values = np.asarray(probability, dtype=float)
    last = values.shape[1] - 1
    early = values[:, :last] >= threshold
    return np.where(early.any(axis=1), np.argmax(early, axis=1), last)


@dataclass
class Search:
    """A cascade's order (positions) and each step's calibration, learned out of fold on training rows."""

    order: list[int]
    calibrations: list[Calibration]


def search(scores: StepScores, costs: StepCosts, stop_on: str = "right") -> Search:
    """The order and calibrations over the training rows of `scores`; `costs` each member's cost per question
    run after another (voters.spend; the rows of `scores.rows` are used)."""
    if stop_on not in STOP_TARGETS:
        raise ConfigError(f"stop_on must be one of {', '.join(STOP_TARGETS)}, got {stop_on!r}")
    order = greedy_order(scores, costs)
    full = scores.of(order)
    calibrations = []
    for j in range(len(order)):
        held = scores.of(order[: j + 1])
        target = held.right if stop_on == "right" else scores.blocks.same[scores.rows, held.member, full.member]
        calibrations.append(fit_calibration(held.top, held.margin, target))
    return Search(order, calibrations)


Step = tuple[Sequence[int], AnswerSelector, Calibration]  # member positions answered, selector, calibration


def step_probabilities(
    blocks: CandidateBlocks, steps: Sequence[Step], rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(P (R, J), leading member position (R, J), each step's selector log-odds of its members (R, j)) per
    question at `rows` and step."""
    probability, picks, scored = [], [], []
    for positions, selector, calibration in steps:
        positions = list(positions)
        features = blocks.features(positions, selector.members_).matrix[rows]
        scores = selector.feature_scores(features)
        columns = np.asarray(positions, dtype=np.intp)
        pick, top, margin = leading(scores, blocks.same[np.ix_(rows, columns, columns)])
        probability.append(calibration.probability(top, margin))
        picks.append(np.asarray(positions)[pick])
        scored.append(scores)
    return np.column_stack(probability), np.column_stack(picks), scored


def stop_scores(
    blocks: CandidateBlocks, steps: Sequence[Step], threshold: float, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per question at `rows`: the log-odds (R, M) of the step it stops at over every member (−inf for the
    members it did not run), that step, and the chosen member's position."""
    rows = np.asarray(rows, dtype=int)
    n_members = blocks.members
    if not len(rows):
        return np.zeros((0, n_members)), np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    probability, picks, scored = step_probabilities(blocks, steps, rows)
    stops = stop_steps(probability, threshold)
    scores = np.full((len(rows), n_members), -np.inf)
    for j, (positions, _, _) in enumerate(steps):
        here = stops == j
        scores[np.ix_(here, list(positions))] = scored[j][here]
    return scores, stops.astype(int), picks[np.arange(len(rows)), stops].astype(int)


def replay_steps(
    blocks: CandidateBlocks, steps: Sequence[Step], threshold: float, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(chosen member position, step stopped at) per question at `rows`: a question stops at the first step
    whose P ≥ threshold, at the last step otherwise."""
    rows = np.asarray(rows, dtype=int)
    if not len(rows):
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    probability, picks, _ = step_probabilities(blocks, steps, rows)
    stops = stop_steps(probability, threshold)
    return picks[np.arange(len(rows)), stops].astype(int), stops.astype(int)


def held_out_points(
    scores: StepScores,
    costs: StepCosts,
    stop_on: str,
    repeats: int = REPEATS,
    thresholds=THRESHOLDS,
    last: LastStep | None = None,
) -> HeldOut:
    """Each threshold's held-out figures: for each of `repeats` K-fold splits of the rows of `scores`, the
    cascade is searched and fitted on the other folds and replayed on the held-out one (with `last`, the
    questions no step stops take its choice and its cost)."""
    n_rows = len(scores.rows)
    if last is not None and (np.shape(last.right) != (repeats, n_rows) or np.shape(last.cost) != (n_rows,)):
        raise InputError(f"the last step holds {np.shape(last.right)} choices for {repeats} repeats × {n_rows} rows")
    right = np.zeros((len(thresholds), repeats, n_rows))
    spent = np.zeros_like(right)
    steps_run = np.zeros_like(right)
    probability = np.full_like(right, np.nan)
    full_right = np.zeros((repeats, n_rows))
    for repeat in range(repeats):
        parts = folds(n_rows, len(scores.parts), scores.seed + repeat)
        searched = partial(_searched, scores, costs, stop_on)
        replayed = partial(_replayed, scores, costs, stop_on, thresholds, last, repeat)
        for held, outcome in zip(parts, cross_fit(parts, np.arange(n_rows), searched, replayed), strict=True):
            full_right[repeat, held] = outcome[0]
            right[:, repeat, held], spent[:, repeat, held], steps_run[:, repeat, held] = outcome[1:4]
            probability[:, repeat, held] = outcome[4]
    full = float(full_right.mean())
    points = [
        OperatingPoint(
            float(threshold),
            float(right[t].mean()),
            float(full - right[t].mean()),
            float(spent[t].mean()),
            float(np.percentile(spent[t], 90)),
            float(steps_run[t].mean()),
        )
        for t, threshold in enumerate(thresholds)
    ]
    return HeldOut(points, full, float(spent[-1].mean()), right.astype(bool), probability, steps_run.astype(int))


def _searched(scores: StepScores, costs: StepCosts, stop_on: str, train: np.ndarray) -> tuple[Search, list[Any]]:
    """The cascade searched on the rows of `scores` at the positions `train` (its own inner folds), and each of
    its steps (members, selector, calibration) fitted on them."""
    inner = StepScores(
        scores.blocks,
        scores.labels,
        scores.names,
        scores.rows[train],
        scores.settings,
        len(scores.parts),
        scores.seed,
    )
    found = search(inner, costs, stop_on)
    steps = [
        (found.order[: j + 1], inner.fit(found.order[: j + 1], inner.rows), found.calibrations[j])
        for j in range(len(found.order))
    ]
    return found, steps


def _replayed(
    scores: StepScores,
    costs: StepCosts,
    stop_on: str,
    thresholds: Sequence[float],
    last: LastStep | None,
    repeat: int,
    searched: tuple[Search, list[Any]],
    held: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """On the rows of `scores` at the positions `held`: the full pool's selector (or `last`, repeat `repeat`'s
    choices at these rows) right, and per threshold the cascade `searched` on the other rows right, its cost
    and the members it ran."""
    found, steps = searched
    if last is not None:
        given = None if last.probability is None else last.probability[repeat, held]
        last = LastStep(last.right[repeat, held], last.cost[held], given)
    test = scores.rows[held]
    probability, picks, _ = step_probabilities(scores.blocks, steps, test)
    rows = costs.in_order(found.order, len(scores.names))[test]  # each member after the one before it
    index = np.arange(len(test))
    final = len(found.order) - 1
    right, spent, steps_run, given = [], [], [], []
    for threshold in thresholds:
        stops = stop_steps(probability, threshold)
        chosen = scores.labels[test, picks[index, stops]]
        cost = spend(rows, found.order, stops)
        # the stopping step's P is P(right) only when the steps stop on `right`
        said = probability[index, stops] if stop_on == "right" else np.full(len(test), np.nan)
        if last is not None:
            ended = stops == final
            chosen = np.where(ended, last.right, chosen)
            cost = np.where(ended, cost + last.cost, cost)
            said = np.where(ended, np.nan if last.probability is None else last.probability, said)
        right.append(chosen)
        spent.append(cost)
        steps_run.append(stops + 1)
        given.append(said)
    full = scores.labels[test, picks[:, -1]] if last is None else np.asarray(last.right, dtype=bool)
    return full, np.array(right), np.array(spent), np.array(steps_run), np.array(given)


@dataclass
class CascadeFit:
    """A fitted cascade: its stop target, the search over every training row, each step's selector fitted on
    every training row, the held-out operating points and the chosen one; `targets`: the chosen point of
    every stop target that was tried."""

    stop_on: str
    search: Search
    selectors: list[AnswerSelector]
    held_out: HeldOut
    chosen: OperatingPoint
    targets: dict[str, OperatingPoint]


def fit_steps(
    scores: StepScores,
    costs: StepCosts,
    *,
    max_loss: float | None = 0.005,
    budget: float | None = None,
    stop_on: str = "auto",
    repeats: int = REPEATS,
    last: LastStep | None = None,
) -> CascadeFit:
    """The cascade of the training rows of `scores`, its threshold chosen on held-out folds (`choose_point`).
    `stop_on="auto"` tries every stop target and keeps the one whose chosen point is cheapest (under a
    budget: loses least), held out too. With `last`, the questions no step stops answer with it."""
    if stop_on != "auto" and stop_on not in STOP_TARGETS:
        raise ConfigError(f"stop_on must be auto or one of {', '.join(STOP_TARGETS)}, got {stop_on!r}")
    tried = {}
    for target in STOP_TARGETS if stop_on == "auto" else (stop_on,):
        held_out = held_out_points(scores, costs, target, repeats, last=last)
        tried[target] = (held_out, choose_point(held_out.points, max_loss, budget))
    rank = (lambda p: (p.loss, p.cost)) if budget is not None else (lambda p: (p.cost, p.loss))
    target = min(tried, key=lambda name: rank(tried[name][1]))  # ties: the first target
    held_out, chosen = tried[target]
    found = search(scores, costs, target)
    selectors = [scores.fit(found.order[: j + 1], scores.rows) for j in range(len(found.order))]
    return CascadeFit(target, found, selectors, held_out, chosen, {name: point for name, (_, point) in tried.items()})
