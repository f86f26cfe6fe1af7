"""How good a probability of being right is, from (P(right), right) pairs alone: calibration and selective
answering.

- **ECE** (expected calibration error), `BINS` equal-mass bins: questions sorted by P, cut into 10 bins of
  (nearly) equal size (numpy.array_split); ECE = Σ_b (n_b / n) · |mean P_b − share right_b|. The bins are also
  the reliability diagram's points.
- **Brier score** mean (P − right)², and the **Brier skill score** 1 − Brier / Brier of the constant P = the
  share right (of the same questions: the best constant). Above 0: better than any constant.
- **Risk–coverage**: questions answered from the most probable down; at coverage i/n the risk is the share
  wrong among the i answered, questions of equal P counted at their expectation over the orders they could
  be answered in. **AURC** is the mean risk over i = 1..n (Geifman et al. 2019); a constant P (every
  question tied) has AURC = the overall error rate.
- **Selective accuracy** at coverage c: the share right among the ⌈c·n⌉ most probable answers (1 − the
  risk at that coverage, ties counted as there).
- **At a threshold**: answered where P ≥ t; the coverage, the error rate among answered questions with its
  exact (Clopper-Pearson) 95% interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from eor.core.errors import InputError
from eor.pipeline.abstention import binomial_bound

BINS = 10
COVERAGES = (0.5, 0.8, 1.0)


def _pairs(probability: Sequence[float] | np.ndarray, right: Sequence[bool] | np.ndarray) -> tuple[np.ndarray, ...]:
    p = np.asarray(probability, dtype=float)
    y = np.asarray(right, dtype=float)
    if p.ndim != 1 or p.shape != y.shape or not len(p):
        raise InputError(f"one probability per answer: {p.shape} probabilities, {y.shape} answers")
    if not np.all((p >= 0) & (p <= 1)):
        raise InputError("probabilities must lie in [0, 1]")
    return p, y


def reliability(probability: Any, right: Any, bins: int = BINS) -> list[dict[str, float]]:
    """The equal-mass bins: per bin its questions, mean P and share right."""
    p, y = _pairs(probability, right)
    order = np.argsort(p, kind="stable")
    return [
        {"questions": len(part), "probability": float(p[part].mean()), "right": float(y[part].mean())}
        for part in np.array_split(order, min(bins, len(p)))
    ]


def ece(probability: Any, right: Any, bins: int = BINS) -> float:
    p, _ = _pairs(probability, right)
    return float(sum(b["questions"] * abs(b["probability"] - b["right"]) for b in reliability(p, right, bins)) / len(p))


def brier(probability: Any, right: Any) -> float:
    p, y = _pairs(probability, right)
    return float(np.mean((p - y) ** 2))


def brier_skill(probability: Any, right: Any) -> float | None:
    """1 − Brier / Brier of the constant share right; None when every answer is right or every one wrong."""
    p, y = _pairs(probability, right)
    reference = float(np.mean((y.mean() - y) ** 2))
    return None if reference == 0 else 1.0 - brier(p, y) / reference


def risk_coverage(probability: Any, right: Any) -> tuple[np.ndarray, np.ndarray]:
    """(coverage i/n, risk among the i most probable) for i = 1..n; within a run of equal P the errors are
    counted at their expectation over the run's orderings (its error rate per question answered)."""
    p, y = _pairs(probability, right)
    order = np.argsort(-p, kind="stable")
    ranked, wrong = p[order], 1 - y[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])  # first position of each run of equal P
    ends = np.r_[starts[1:], len(p)]
    before = np.r_[0.0, np.cumsum(wrong)][starts]  # errors ranked above each run
    rate = (np.r_[0.0, np.cumsum(wrong)][ends] - before) / (ends - starts)
    run = np.repeat(np.arange(len(starts)), ends - starts)
    answered = np.arange(1, len(p) + 1)
    errors = before[run] + (answered - starts[run]) * rate[run]
    return answered / len(p), errors / answered


def aurc(probability: Any, right: Any) -> float:
    return float(risk_coverage(probability, right)[1].mean())


def selective_accuracy(probability: Any, right: Any, coverage: float) -> float:
    if not 0 < coverage <= 1:
        raise InputError(f"coverage must lie in (0, 1], got {coverage}")
    p, y = _pairs(probability, right)
    keep = math.ceil(coverage * len(p) - 1e-9)
    return float(1.0 - risk_coverage(p, y)[1][keep - 1])


def clopper_pearson(errors: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) binomial interval of errors / n: its two one-sided bounds
    (eor.pipeline.abstention.binomial_bound) at (1 − level) / 2 each."""
    tail = (1 - level) / 2
    return binomial_bound(errors, n, tail, upper=False), binomial_bound(errors, n, tail, upper=True)


def at_threshold(probability: Any, right: Any, threshold: Any) -> dict[str, Any]:
    """Coverage and error among answered where P ≥ threshold (None: nothing answered), or per question where
    P is at least its own threshold (an array; NaN: not answered)."""
    p, y = _pairs(probability, right)
    if threshold is None:
        answered = np.zeros(len(p), dtype=bool)
    else:
        answered = p >= np.nan_to_num(np.asarray(threshold, dtype=float), nan=np.inf)
    n, errors = int(answered.sum()), int((1 - y[answered]).sum())
    return {
        "threshold": threshold,
        "answered": n,
        "coverage": n / len(p),
        "error": errors / n if n else None,
        "error_ci": list(clopper_pearson(errors, n)) if n else None,
    }


def summary(probability: Any, right: Any) -> dict[str, Any]:
    """Every figure of the module for one voter's P(right), beside those of the constant P = share right."""
    p, y = _pairs(probability, right)
    constant = np.full(len(p), y.mean())
    return {
        "questions": len(p),
        "accuracy": float(y.mean()),
        "ece": ece(p, y),
        "brier": brier(p, y),
        "brier_skill": brier_skill(p, y),
        "aurc": aurc(p, y),
        "aurc_constant": aurc(constant, y),
        "selective_accuracy": {str(c): selective_accuracy(p, y, c) for c in COVERAGES},
        "reliability": reliability(p, y),
    }


def calibration_noise(probability: Any, seed: int = 0, draws: int = 2000, bins: int = BINS) -> dict[str, float]:
    """The ECE a perfectly calibrated P shows on these questions by sampling noise alone: right ~ Bernoulli(P)
    drawn `draws` times; its mean and 95th percentile."""
    p = np.asarray(probability, dtype=float)
    rng = np.random.default_rng(seed)
    values = np.array([ece(p, rng.random(len(p)) < p, bins) for _ in range(draws)])
    return {"mean": float(values.mean()), "p95": float(np.percentile(values, 95))}
