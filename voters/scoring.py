"""The voter's decision scores (EoR paper, eqs. 6-7) on a precomputed similarity tensor, and the argmax.

    S_sim(y_m, y_n) = Σ_k ω^s_k · sim_k(y_m, y_n)                       (eq. 6)
    s_m = ω^r_m · ( pool({S_sim(y_m, y_n)}_{n ≠ m, n active}) + ω^g · g_m )   (eq. 7, plus grounding)

A member is active when ω^r_m > t (the member threshold); a dropped member's score is −inf, so it is
never chosen while any member is active (with none active every score is −inf and member 0 is chosen).
g_m is the optional grounding feature (1 when the answer occurs in the member's own passages); with no
grounding weight the term is absent and this is exactly eq. 7. `VoteScorer` prepares the tensor once so
that one evaluation for new weights is a few array operations (the training objective calls it thousands
of times); mean pooling, being linear in the similarities, reuses per-metric means of the active set.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from eor.core.errors import InputError
from voters.pooling import POOLINGS, get_pooling, mean_pool

#: per-metric mean poolings kept for this many recent active-member sets.
MEAN_CACHE_SIZE = 32
#: relative tolerance under which two decision scores count as tied (then the lowest index wins).
TIE_TOLERANCE = 1e-9


def choose(scores: np.ndarray) -> np.ndarray:
    """argmax_m per row, ties (within TIE_TOLERANCE, so float noise cannot break them) to the lowest index."""
    values = np.asarray(scores, dtype=float)
    if values.shape[-1] == 0:
        raise InputError("cannot choose among zero members")
    best = values.max(axis=-1, keepdims=True)
    tolerance = TIE_TOLERANCE * np.maximum(1.0, np.abs(best))
    return np.argmax(values >= best - tolerance, axis=-1)


def mean_correctness(correctness: np.ndarray, chosen: np.ndarray) -> float:
    """Mean correctness of the chosen answers: `correctness` (Q, M), `chosen` one member per question
    (0 for no question)."""
    return float(np.asarray(correctness)[np.arange(len(chosen)), chosen].mean()) if len(chosen) else 0.0


def as_tensor(tensor: np.ndarray) -> np.ndarray:
    values = np.asarray(tensor, dtype=float)
    if values.ndim != 4 or values.shape[1] != values.shape[2]:
        raise InputError(
            f"similarity tensor must have shape (questions, members, members, metrics), got {values.shape}"
        )
    if not np.all(np.isfinite(values)):
        raise InputError("similarity tensor holds NaN or infinite values")
    return values


class VoteScorer:
    """Decision scores for one similarity tensor (Q, M, M, K) under any weights."""

    def __init__(self, tensor: np.ndarray, grounding: np.ndarray | None = None):
        values = as_tensor(tensor)
        self.n_questions, self.n_members, _, self.n_metrics = values.shape
        self._pairs = np.ascontiguousarray(values).reshape(-1, self.n_metrics)
        # (K, Q·M, M) with the diagonal zeroed: per-metric sums over the active n ≠ m are one matrix product.
        by_metric = np.moveaxis(values, 3, 0).copy()
        diagonal = np.arange(self.n_members)
        by_metric[:, :, diagonal, diagonal] = 0.0
        self._by_metric = by_metric.reshape(self.n_metrics, self.n_questions * self.n_members, self.n_members)
        self._means: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.grounding = None
        if grounding is not None:
            features = np.asarray(grounding, dtype=float)
            if features.shape != (self.n_questions, self.n_members):
                raise InputError(
                    f"grounding features must have shape ({self.n_questions}, {self.n_members}), got {features.shape}"
                )
            self.grounding = features

    def combined(self, metric_weights: np.ndarray) -> np.ndarray:
        """S_sim for every question and member pair (eq. 6), shape (Q, M, M)."""
        weights = self._metric_weights(metric_weights)
        return (self._pairs @ weights).reshape(self.n_questions, self.n_members, self.n_members)

    def pooled(self, metric_weights: np.ndarray, active: np.ndarray, pooling: str, threshold: float) -> np.ndarray:
        """pool({S_sim(y_m, y_n)}_{n≠m, n active}) per question and member, shape (Q, M)."""
        function = get_pooling(pooling)
        mask = np.asarray(active, dtype=bool)
        if mask.shape != (self.n_members,):
            raise InputError(f"member mask must have shape ({self.n_members},), got {mask.shape}")
        if function is mean_pool:
            return self._mean(self._metric_weights(metric_weights), mask)
        wide = np.broadcast_to(mask, (self.n_questions, self.n_members))
        return POOLINGS[pooling](self.combined(metric_weights), wide, float(threshold))

    def _mean(self, weights: np.ndarray, active: np.ndarray) -> np.ndarray:
        # Mean pooling is linear: pool(Σ_k ω_k sim_k) = Σ_k ω_k mean_n sim_k. The per-metric means depend on
        # the active set only, which changes rarely during a search, so they are kept for recent sets.
        key = active.tobytes()
        means = self._means.get(key)
        if means is None:
            count = active.sum() - active
            sums = (self._by_metric @ active.astype(float)).T.reshape(self.n_questions, self.n_members, -1)
            usable = active & (count > 0)
            means = np.where(usable[np.newaxis, :, np.newaxis], sums / np.maximum(count, 1)[:, np.newaxis], 0.0)
            means = np.ascontiguousarray(means.reshape(-1, self.n_metrics))
            self._means[key] = means
            if len(self._means) > MEAN_CACHE_SIZE:
                self._means.popitem(last=False)
        else:
            self._means.move_to_end(key)
        return (means @ weights).reshape(self.n_questions, self.n_members)

    def scores(
        self,
        metric_weights: np.ndarray,
        retriever_weights: np.ndarray,
        *,
        pooling: str = "mean",
        threshold: float = 0.5,
        member_threshold: float = 0.1,
        grounding_weight: float | None = None,
    ) -> np.ndarray:
        """Decision scores s_m (eq. 7), shape (Q, M); −inf for dropped members."""
        member_weights = np.asarray(retriever_weights, dtype=float)
        if member_weights.shape != (self.n_members,):
            raise InputError(f"need {self.n_members} retriever weights, got shape {member_weights.shape}")
        active = member_weights > member_threshold
        pooled = self.pooled(metric_weights, active, pooling, threshold)
        if grounding_weight is not None:
            if self.grounding is None:
                raise InputError("this voter uses grounding: give each member's passages to compute it")
            pooled = pooled + grounding_weight * self.grounding
        return np.where(active, member_weights * pooled, -np.inf)

    def _metric_weights(self, metric_weights: np.ndarray) -> np.ndarray:
        weights = np.asarray(metric_weights, dtype=float)
        if weights.shape != (self.n_metrics,):
            raise InputError(f"need {self.n_metrics} metric weights, got shape {weights.shape}")
        return weights


def decision_scores(
    tensor: np.ndarray,
    metric_weights: np.ndarray,
    retriever_weights: np.ndarray,
    *,
    pooling: str = "mean",
    threshold: float = 0.5,
    member_threshold: float = 0.1,
    grounding: np.ndarray | None = None,
    grounding_weight: float | None = None,
) -> np.ndarray:
    """Decision scores s_m (eq. 6-7) for a similarity tensor (Q, M, M, K); shape (Q, M)."""
    return VoteScorer(tensor, grounding).scores(
        metric_weights,
        retriever_weights,
        pooling=pooling,
        threshold=threshold,
        member_threshold=member_threshold,
        grounding_weight=grounding_weight,
    )
