"""Uncertainty for benchmark figures: bootstrap confidence intervals and paired significance tests.

All systems of a report are scored on the same questions, so every interval is computed from one shared
set of bootstrap resamples of the questions (drawn once from `seed`): intervals of different systems, and
of their difference, come from the same resampled question sets.

- Confidence interval: percentile bootstrap, `resamples` (default 1000) resamples of the questions with
  replacement, the 2.5 and 97.5 percentiles of the resampled means.
- Paired test of system A against system B (EoR against Top R) on per-question scores:
  * exact McNemar when both score vectors are 0/1: b = #(A right, B wrong), c = #(A wrong, B right),
    two-sided p = binomtest(b, b + c, 1/2); with no discordant question (b + c = 0) the systems agree on
    every question and p = 1;
  * paired bootstrap always: the 95% interval of mean(A − B) over the shared resamples and the two-sided
    p-value 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)) (capped at 1), the share of resampled differences on the far side
    of zero. It is the test used for graded scores (token F1), where McNemar does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from eor.core.errors import InputError

DEFAULT_RESAMPLES = 1000
CONFIDENCE = 0.95
ALPHA = 0.05


@dataclass(frozen=True)
class Bootstrap:
    """Shared bootstrap resamples of `questions` questions: `counts[b, n]` = times question n is drawn."""

    counts: np.ndarray  # (resamples, questions) float

    @classmethod
    def draw(cls, questions: int, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Bootstrap:
        if resamples < 1:
            raise InputError(f"bootstrap resamples must be at least 1, got {resamples}")
        if seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {seed}")
        rng = np.random.default_rng(seed)
        counts = np.zeros((resamples, questions))
        if questions:
            drawn = rng.integers(0, questions, size=(resamples, questions))
            np.add.at(counts, (np.arange(resamples)[:, None], drawn), 1.0)
        return cls(counts)

    @property
    def resamples(self) -> int:
        return int(self.counts.shape[0])

    @property
    def questions(self) -> int:
        return int(self.counts.shape[1])

    def means(self, values: np.ndarray) -> np.ndarray:
        """Resampled means of per-question `values`: (questions,) -> (resamples,), (S, questions) -> (S, resamples)."""
        array = np.asarray(values, dtype=float)
        if array.shape[-1] != self.questions:
            raise InputError(f"got scores for {array.shape[-1]} questions, the resamples cover {self.questions}")
        if self.questions == 0:
            return np.full(array.shape[:-1] + (self.resamples,), np.nan)
        return array @ self.counts.T / self.questions

    def interval(self, values: np.ndarray) -> list[float]:
        """The percentile 95% interval [low, high] of the mean of per-question `values` (NaN with no question)."""
        means = self.means(values)
        if self.questions == 0:
            return [float("nan"), float("nan")]
        tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
        low, high = np.percentile(means, [tail, 100.0 - tail])
        return [float(low), float(high)]


def is_binary(values: np.ndarray) -> bool:
    array = np.asarray(values, dtype=float)
    return bool(np.all((array == 0.0) | (array == 1.0)))


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Exact two-sided McNemar test of paired 0/1 outcomes `a` and `b` (one entry per question)."""
    from scipy.stats import binomtest

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(f"paired outcomes must be two vectors of one length, got shapes {a.shape} and {b.shape}")
    if not (is_binary(a) and is_binary(b)):
        raise InputError("McNemar's test needs 0/1 outcomes; use the paired bootstrap for graded scores")
    a_only = int(np.sum((a == 1) & (b == 0)))
    b_only = int(np.sum((a == 0) & (b == 1)))
    discordant = a_only + b_only
    p_value = 1.0 if discordant == 0 else float(binomtest(a_only, discordant, 0.5).pvalue)
    return {"a_only": a_only, "b_only": b_only, "discordant": discordant, "p_value": p_value}


def paired_bootstrap(a: np.ndarray, b: np.ndarray, resamples: Bootstrap) -> dict[str, Any]:
    """Mean difference mean(a − b), its percentile 95% interval and the two-sided bootstrap p-value."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if resamples.questions == 0:
        return {"difference": float("nan"), "ci": [float("nan"), float("nan")], "p_value": float("nan")}
    means = resamples.means(diff)
    p_value = min(1.0, 2.0 * min(float(np.mean(means <= 0.0)), float(np.mean(means >= 0.0))))
    return {"difference": float(diff.mean()), "ci": resamples.interval(diff), "p_value": p_value}


def paired_test(a: np.ndarray, b: np.ndarray, resamples: Bootstrap) -> dict[str, Any]:
    """Both paired tests of `a` against `b`; `test` names the one `p_value` and `significant` come from.

    McNemar (exact) when both are 0/1, otherwise the paired bootstrap.
    """
    bootstrap = paired_bootstrap(a, b, resamples)
    result: dict[str, Any] = {"difference": bootstrap["difference"], "ci": bootstrap["ci"], "bootstrap": bootstrap}
    if is_binary(a) and is_binary(b):
        mcnemar = mcnemar_exact(a, b)
        result.update(test="mcnemar_exact", p_value=mcnemar["p_value"], mcnemar=mcnemar)
    else:
        result.update(test="paired_bootstrap", p_value=bootstrap["p_value"], mcnemar=None)
    p_value = result["p_value"]
    result["significant"] = None if p_value != p_value else bool(p_value < ALPHA)  # NaN: no questions
    result["alpha"] = ALPHA
    return result


def paired_difference(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """The mean paired difference a − b over questions and its standard error (sample standard deviation / √n;
    infinite for one question): the gain of a pool design's step (eor.learning.design)."""
    difference = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(difference)
    se = float(difference.std(ddof=1) / np.sqrt(n)) if n > 1 else float("inf")
    return float(difference.mean()), se
