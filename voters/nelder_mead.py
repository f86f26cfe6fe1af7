"""Learning the voter's weights (EoR paper, section 4.2): Nelder-Mead over a precomputed similarity tensor.

The objective is the mean correctness of the chosen answers, (1/N) Σ_i g(y_{m*_i}, a_i), for weights
x = [ω^s (K metrics), ω^r (M members), ω^g (grounding, when used)], each bounded to [0, max_weight]. The
similarity tensor and the correctness matrix are computed once by the caller; one evaluation is a few array
operations (`VoteScorer`). The objective is piecewise constant, so Nelder-Mead stalls easily; the search
therefore starts from several deterministic points and keeps the best point ever evaluated:

    uniform             equal metric weights 1/K, every member at min(0.5, max_weight)
    accuracy            ω^r_m = max_weight · acc_m / max acc (members never right start dropped)
    grounded-accuracy   accuracy, plus ω^g = max_weight (only with grounding)
    single:m            member m alone at max_weight, the others at 0 (below the threshold): its own
                        training accuracy, so a fit never ends below the best single member
    random:i            `restarts` points drawn uniformly in the box from a generator seeded with `seed`

Every start is evaluated; Nelder-Mead (`max_evals` evaluations at most, an initial simplex of step
max_weight/4 so that it sees more than one plateau) runs from all of them except the single-member starts,
of which only the best one is refined. Ties keep the earlier point (the order above, poolings in the order
given). Only the training score chooses; a dev split is scored for the report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eor.core.errors import ConfigError, InputError
from voters.scoring import VoteScorer, as_tensor, choose, mean_correctness

log = logging.getLogger(__name__)

Callback = Callable[[dict[str, Any]], None]


@dataclass
class VoteData:
    """One split for training or scoring: similarity tensor (Q,M,M,K), correctness (Q,M), grounding (Q,M)."""

    tensor: np.ndarray
    correctness: np.ndarray
    grounding: np.ndarray | None = None
    scorer: VoteScorer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tensor = as_tensor(self.tensor)
        self.correctness = np.asarray(self.correctness, dtype=float)
        n_questions, n_members = self.tensor.shape[:2]
        if self.correctness.shape != (n_questions, n_members):
            raise InputError(
                f"correctness must have shape ({n_questions}, {n_members}) to match the tensor, "
                f"got {self.correctness.shape}"
            )
        self.scorer = VoteScorer(self.tensor, self.grounding)


@dataclass
class Weights:
    """A full weight setting of the voter."""

    metric: np.ndarray
    retriever: np.ndarray
    grounding: float | None
    pooling: str


@dataclass
class SearchResult:
    weights: Weights
    train_score: float
    dev_score: float | None
    start: str
    evaluations: int
    history: list[dict[str, Any]]


def uniform_member_weight(max_weight: float) -> float:
    return min(0.5, max_weight)


def uniform_metric_weight(n_metrics: int, max_weight: float) -> float:
    return min(1.0 / n_metrics, max_weight)


def mean_chosen(
    scorer: VoteScorer, correctness: np.ndarray, weights: Weights, threshold: float, member_threshold: float
) -> float:
    """Mean correctness of the answers chosen under `weights`."""
    if scorer.n_questions == 0:
        return 0.0
    scores = scorer.scores(
        weights.metric,
        weights.retriever,
        pooling=weights.pooling,
        threshold=threshold,
        member_threshold=member_threshold,
        grounding_weight=weights.grounding,
    )
    return mean_correctness(correctness, choose(scores))


class StepObjective:
    """−(mean correctness) as a function of the flat weight vector; remembers the best point it saw."""

    def __init__(
        self,
        data: VoteData,
        pooling: str,
        threshold: float,
        member_threshold: float,
        max_weight: float,
        use_grounding: bool,
    ):
        self.data = data
        self.pooling = pooling
        self.threshold = threshold
        self.member_threshold = member_threshold
        self.max_weight = max_weight
        self.use_grounding = use_grounding
        self.n_metrics = data.tensor.shape[3]
        self.n_members = data.tensor.shape[1]
        self.size = self.n_metrics + self.n_members + int(use_grounding)
        self.rows = np.arange(data.tensor.shape[0])
        self.evaluations = 0
        self.reset()

    def reset(self) -> None:
        self.best_value = -np.inf
        self.best_x: np.ndarray | None = None

    def weights(self, x: np.ndarray) -> Weights:
        x = np.clip(np.asarray(x, dtype=float), 0.0, self.max_weight)
        k, m = self.n_metrics, self.n_members
        grounding = float(x[k + m]) if self.use_grounding else None
        return Weights(x[:k].copy(), x[k : k + m].copy(), grounding, self.pooling)

    def value(self, x: np.ndarray) -> float:
        w = self.weights(x)
        scores = self.data.scorer.scores(
            w.metric,
            w.retriever,
            pooling=self.pooling,
            threshold=self.threshold,
            member_threshold=self.member_threshold,
            grounding_weight=w.grounding,
        )
        return float(self.data.correctness[self.rows, choose(scores)].mean())

    def __call__(self, x: np.ndarray) -> float:
        self.evaluations += 1
        value = self.value(x)
        if value > self.best_value:
            self.best_value = value
            self.best_x = np.clip(np.array(x, dtype=float), 0.0, self.max_weight)
        return -value


def _starts(
    data: VoteData, n: int, n_metrics: int, max_weight: float, use_grounding: bool, restarts: int, seed: int
) -> list[tuple[str, np.ndarray, bool]]:
    """(name, x0, refine with Nelder-Mead?) in the documented order."""
    n_members = data.tensor.shape[1]
    metric = np.full(n_metrics, uniform_metric_weight(n_metrics, max_weight))

    def point(members: np.ndarray, grounding: float = 0.0) -> np.ndarray:
        return np.concatenate([metric, members, [grounding] if use_grounding else []])

    accuracy = data.correctness.mean(axis=0) if data.correctness.size else np.zeros(n_members)
    starts = [("uniform", point(np.full(n_members, uniform_member_weight(max_weight))), True)]
    if accuracy.max() > 0:
        proportional = max_weight * accuracy / accuracy.max()
        starts.append(("accuracy", point(proportional), True))
        if use_grounding:
            starts.append(("grounded-accuracy", point(proportional, max_weight), True))
    best_single = int(np.argmax(accuracy))
    for m in range(n_members):
        alone = np.zeros(n_members)
        alone[m] = max_weight
        starts.append((f"single:{m}", point(alone), m == best_single))
    rng = np.random.default_rng(seed)
    for i in range(restarts):
        starts.append((f"random:{i}", rng.uniform(0.0, max_weight, n), True))
    return starts


def initial_simplex(x0: np.ndarray, max_weight: float, step: float | None = None) -> np.ndarray:
    """Nelder-Mead's first simplex: x0 and one vertex per coordinate moved by `step` (default max_weight/4)."""
    step = max_weight / 4.0 if step is None else step
    simplex = np.tile(x0, (len(x0) + 1, 1))
    for i in range(len(x0)):
        simplex[i + 1, i] = x0[i] + step if x0[i] + step <= max_weight else x0[i] - step
    return np.clip(simplex, 0.0, max_weight)


def search_weights(
    train: VoteData,
    *,
    poolings: Sequence[str],
    threshold: float,
    member_threshold: float,
    max_weight: float,
    restarts: int,
    seed: int,
    max_evals: int,
    use_grounding: bool = False,
    dev: VoteData | None = None,
    callback: Callback | None = None,
) -> SearchResult:
    """Search the weights (and, with several `poolings`, the pooling) that maximise training correctness."""
    _check_search(train, dev, poolings, member_threshold, max_weight, use_grounding)
    n_metrics = train.tensor.shape[3]
    best: SearchResult | None = None  # set by the first start of the first pooling
    history: list[dict[str, Any]] = []
    evaluations = 0
    for pooling in poolings:
        objective = StepObjective(train, pooling, threshold, member_threshold, max_weight, use_grounding)
        for name, x0, refine in _starts(train, objective.size, n_metrics, max_weight, use_grounding, restarts, seed):
            objective.reset()
            objective(x0)
            if refine:
                _nelder_mead(objective, x0, max_weight, max_evals)
            assert objective.best_x is not None  # objective(x0) above saw a point
            weights = objective.weights(objective.best_x)
            train_score = objective.best_value
            dev_score = None
            if dev is not None:
                dev_score = mean_chosen(dev.scorer, dev.correctness, weights, threshold, member_threshold)
            improved = best is None or train_score > best.train_score
            if improved:
                best = SearchResult(weights, train_score, dev_score, f"{pooling}/{name}", 0, history)
            assert best is not None  # the first start improves on nothing
            event = {
                "pooling": pooling,
                "start": name,
                "refined": refine,
                "train_score": train_score,
                "dev_score": dev_score,
                "best_train_score": best.train_score,
                "best_dev_score": best.dev_score,
                "evaluations": objective.evaluations,
            }
            history.append(event)
            if refine or improved:
                _log_start(event, best.start)
            if callback is not None:
                callback(event)
        evaluations += objective.evaluations
    assert best is not None  # _check_search: a pooling at least; _starts: the uniform start at least
    best.evaluations = evaluations
    return best


def _check_search(
    train: VoteData,
    dev: VoteData | None,
    poolings: Sequence[str],
    member_threshold: float,
    max_weight: float,
    use_grounding: bool,
) -> None:
    if not poolings:
        raise ConfigError("no pooling to search")
    if max_weight <= member_threshold:
        raise ConfigError(f"max_weight ({max_weight}) must exceed member_threshold ({member_threshold})")
    if train.tensor.shape[0] == 0:
        raise InputError("cannot fit a voter on zero questions")
    if use_grounding and (train.grounding is None or (dev is not None and dev.grounding is None)):
        raise InputError("grounding=True needs each member's passages for the training (and dev) questions")
    if dev is not None and dev.tensor.shape[1:] != train.tensor.shape[1:]:
        raise InputError(f"dev tensor shape {dev.tensor.shape[1:]} differs from train {train.tensor.shape[1:]}")


def _nelder_mead(objective: Any, x0: np.ndarray, max_weight: float, max_evals: int) -> None:
    """scipy's bounded, adaptive Nelder-Mead from x0 (the objective keeps the best point it saw)."""
    from scipy.optimize import minimize

    minimize(
        objective,
        x0,
        method="Nelder-Mead",
        bounds=[(0.0, max_weight)] * objective.size,
        options={
            "maxfev": max_evals,
            "initial_simplex": initial_simplex(x0, max_weight),
            "xatol": 1e-3,
            "fatol": 1e-9,
            "adaptive": True,
        },
    )


def _log_start(event: dict[str, Any], best_start: str) -> None:
    dev = "" if event["dev_score"] is None else f", dev {event['dev_score']:.4f}"
    log.debug(
        "voter fit %s/%s: train %.4f%s (best %.4f from %s)",
        event["pooling"],
        event["start"],
        event["train_score"],
        dev,
        event["best_train_score"],
        best_start,
    )
