"""A smooth surrogate of the voter's training objective, fitted first and then polished on the true one.

The paper's objective, the mean correctness of the chosen answers, is a step function of the weights:
Nelder-Mead stalls on its plateaus with few questions and overfits with many restarts. The surrogate
replaces the argmax by a softmax over the decision scores at temperature τ and maximises the expected
correctness, with an L2 penalty λ pulling the weights toward the uniform voter:

    L(x) = (1/N) Σ_i Σ_m softmax_m(s_im / τ) · c_im  −  λ · ‖x − x_uniform‖²

over x = [ω^s, ω^r, ω^g] in [0, max_weight]. While fitting the surrogate every member takes part in the
pools (no member threshold: a weight near 0 already makes a member's score small), so L is differentiable;
with mean pooling the gradient is exact (pooling is linear in ω^s), with other poolings ω^s is held at
its start. L-BFGS-B maximises L from the uniform point; Nelder-Mead then polishes the result on the true
objective (with the member threshold t) from a small simplex, keeping the best point it evaluates, so the
final training score is never below that of the surrogate's optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eor.core.errors import InputError
from voters.nelder_mead import (
    SearchResult,
    StepObjective,
    VoteData,
    Weights,
    initial_simplex,
    mean_chosen,
    uniform_member_weight,
    uniform_metric_weight,
)
from voters.scoring import VoteScorer

DEFAULT_TEMPERATURE = 0.05
DEFAULT_PENALTY = 0.01
POLISH_STEP = 1.0 / 20.0  # of max_weight


@dataclass(frozen=True)
class SmoothSettings:
    temperature: float = DEFAULT_TEMPERATURE
    penalty: float = DEFAULT_PENALTY


def expected_correctness(scores: np.ndarray, correctness: np.ndarray, temperature: float) -> tuple[float, np.ndarray]:
    """(mean over questions of Σ_m softmax(s/τ)_m c_m, d mean / d s) for scores (Q, M)."""
    z = scores / temperature
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    expected = (p * correctness).sum(axis=1)
    gradient = p * (correctness - expected[:, None]) / temperature / len(scores)
    return float(expected.mean()), gradient


class SmoothObjective:
    """−L(x) and its gradient (for scipy's minimize with jac=True)."""

    def __init__(
        self,
        data: VoteData,
        pooling: str,
        threshold: float,
        use_grounding: bool,
        settings: SmoothSettings,
        anchor: np.ndarray,
    ):
        self.data = data
        self.scorer: VoteScorer = data.scorer
        self.pooling = pooling
        self.threshold = threshold
        self.use_grounding = use_grounding
        self.settings = settings
        self.anchor = anchor
        self.k = self.scorer.n_metrics
        self.m = self.scorer.n_members
        everyone = np.ones(self.m, dtype=bool)
        if pooling == "mean":  # per-metric pooled means (Q, M, K): pooled = P @ ω^s
            eye = np.eye(self.k)
            self.per_metric: np.ndarray | None = np.stack(
                [self.scorer.pooled(eye[k], everyone, "mean", threshold) for k in range(self.k)], -1
            )
        else:
            self.per_metric = None
        self.everyone = everyone

    def split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        grounding = float(x[self.k + self.m]) if self.use_grounding else 0.0
        return x[: self.k], x[self.k : self.k + self.m], grounding

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        metric, member, grounding = self.split(x)
        if self.per_metric is not None:
            pooled = self.per_metric @ metric
        else:
            pooled = self.scorer.pooled(metric, self.everyone, self.pooling, self.threshold)
        if self.use_grounding:
            assert self.scorer.grounding is not None  # smooth_search checks it: grounding=True needs the features
            pooled = pooled + grounding * self.scorer.grounding
        value, d_scores = expected_correctness(member * pooled, self.data.correctness, self.settings.temperature)
        gradient = np.zeros_like(x)
        if self.per_metric is not None:
            gradient[: self.k] = np.einsum("qm,m,qmk->k", d_scores, member, self.per_metric)
        gradient[self.k : self.k + self.m] = (d_scores * pooled).sum(axis=0)
        if self.use_grounding:
            gradient[self.k + self.m] = float((d_scores * member * self.scorer.grounding).sum())
        difference = x - self.anchor
        value -= self.settings.penalty * float(difference @ difference)
        gradient -= 2.0 * self.settings.penalty * difference
        return -value, -gradient


def smooth_search(
    train: VoteData,
    *,
    pooling: str,
    threshold: float,
    member_threshold: float,
    max_weight: float,
    max_evals: int,
    use_grounding: bool,
    settings: SmoothSettings,
    dev: VoteData | None = None,
) -> SearchResult:
    """Fit the surrogate from the uniform point, polish on the true objective; see the module docstring."""
    from scipy.optimize import minimize

    if use_grounding and (train.grounding is None or (dev is not None and dev.grounding is None)):
        raise InputError("grounding=True needs each member's passages for the training (and dev) questions")
    if train.tensor.shape[0] == 0:
        raise InputError("cannot fit a voter on zero questions")
    n_metrics, n_members = train.tensor.shape[3], train.tensor.shape[1]
    uniform = np.concatenate(
        [
            np.full(n_metrics, uniform_metric_weight(n_metrics, max_weight)),
            np.full(n_members, uniform_member_weight(max_weight)),
            [uniform_metric_weight(n_metrics, max_weight)] if use_grounding else [],
        ]
    )
    surrogate = SmoothObjective(train, pooling, threshold, use_grounding, settings, uniform)
    bounds = [(0.0, max_weight)] * len(uniform)
    fitted = minimize(surrogate, uniform, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 500})
    start = np.clip(fitted.x, 0.0, max_weight)
    objective = StepObjective(train, pooling, threshold, member_threshold, max_weight, use_grounding)
    objective(start)
    minimize(
        objective,
        start,
        method="Nelder-Mead",
        bounds=bounds,
        options={
            "maxfev": max_evals,
            "initial_simplex": initial_simplex(start, max_weight, max_weight * POLISH_STEP),
            "xatol": 1e-3,
            "fatol": 1e-9,
            "adaptive": True,
        },
    )
    assert objective.best_x is not None  # objective(start) above saw a point
    weights: Weights = objective.weights(objective.best_x)
    dev_score = mean_chosen(dev.scorer, dev.correctness, weights, threshold, member_threshold) if dev else None
    event = {
        "pooling": pooling,
        "start": "smooth",
        "surrogate": -float(fitted.fun),
        "train_score": objective.best_value,
        "dev_score": dev_score,
        "evaluations": objective.evaluations,
    }
    return SearchResult(weights, objective.best_value, dev_score, f"{pooling}/smooth", objective.evaluations, [event])
