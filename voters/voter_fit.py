"""The ways a `Voter` gets its weights: uniform, Top R alone, or fitted by Nelder-Mead (the step objective of
voters.training, or the smooth surrogate of voters.smooth). A mixin of `voters.voter.Voter`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from eor.errors import ConfigError, InputError
from voters.grounding import Passages
from voters.pooling import POOLINGS
from voters.smooth import SmoothSettings, smooth_search
from voters.training import (
    Callback,
    SearchResult,
    VoteData,
    Weights,
    search_weights,
    uniform_member_weight,
    uniform_metric_weight,
)

log = logging.getLogger("voters.voter")

SEARCH = "search"
Answers = Sequence[Sequence[str]]
Golds = Sequence[Sequence[str]]
DevSplit = tuple[Any, ...] | VoteData


class FittingMixin:
    """Constructors and fitting of `Voter` (its hyper-parameters and `_check_params` live there)."""

    # -- constructors ----------------------------------------------------------------------------------

    @classmethod
    def uniform(
        cls,
        n_members: int,
        metrics: Sequence[str] = ("em", "f1", "cosine"),
        pooling: str = "mean",
        *,
        grounding_weight: float | None = None,
        **params: Any,
    ) -> Self:
        """A voter with explicit uniform weights, ready to predict without fitting.

        Every member gets ω^r = min(0.5, max_weight) (all active) and every metric ω^s = 1/K, so S_sim is
        the plain average of the metrics and stays in [0, 1] (the majority/plurality threshold keeps its
        meaning). With `grounding=True`, ω^g is `grounding_weight` (default 1/K as well).
        """
        voter = cls(metrics=tuple(metrics), pooling=pooling, **params)
        voter._check_params()
        if pooling == SEARCH:
            raise ConfigError(f"a uniform voter needs a concrete pooling: {', '.join(POOLINGS)}")
        if not isinstance(n_members, int) or n_members < 1:
            raise ConfigError(f"n_members must be a positive integer, got {n_members!r}")
        if voter.members is not None and len(voter.members) != n_members:
            raise ConfigError(f"{len(voter.members)} member names given for {n_members} members")
        n_metrics = len(voter.metrics)
        weight = uniform_metric_weight(n_metrics, voter.max_weight)
        grounding = None
        if voter.grounding:
            grounding = float(grounding_weight) if grounding_weight is not None else 1.0 / n_metrics
        voter._set_weights(
            Weights(
                np.full(n_metrics, weight),
                np.full(n_members, uniform_member_weight(voter.max_weight)),
                grounding,
                pooling,
            )
        )
        voter.train_score_ = None
        voter.dev_score_ = None
        return voter

    @classmethod
    def single_member(
        cls, n_members: int, member: int, metrics: Sequence[str] = ("em", "f1", "cosine"), **params: Any
    ) -> Self:
        """Top R as a voter: member `member` alone is active (ω^r = max_weight, every other ω^r = 0), so it
        is always chosen; the metric weights are uniform (they never matter with one active member)."""
        voter = cls.uniform(n_members, metrics=metrics, **params)
        if not isinstance(member, int) or not 0 <= member < n_members:
            raise ConfigError(f"member must be an index in 0..{n_members - 1}, got {member!r}")
        weights = np.zeros(n_members)
        weights[member] = voter.max_weight
        voter.retriever_weights_ = weights
        return voter

    def _set_weights(self, weights: Weights) -> None:
        self.metric_weights_ = np.asarray(weights.metric, dtype=float)
        self.retriever_weights_ = np.asarray(weights.retriever, dtype=float)
        self.grounding_weight_ = weights.grounding
        self.pooling_ = weights.pooling
        self.n_members_ = len(self.retriever_weights_)
        self.members_ = list(self.members) if self.members is not None else None
        self.metric_names_ = list(self.metrics)
        if not hasattr(self, "metadata_"):
            self.metadata_: dict[str, Any] = {}

    # -- fitting ---------------------------------------------------------------------------------------

    def fit(
        self,
        answers: Answers,
        golds: Golds,
        passages: Sequence[Sequence[Passages]] | None = None,
        *,
        dev: tuple[Any, ...] | None = None,
        callback: Callback | None = None,
    ) -> Self:
        """Learn the weights on training questions.

        `dev=(answers, golds[, passages])` is scored for the report (never used to choose the weights);
        `callback` receives one dict per start (pooling, start, train/dev scores, best so far).
        """
        self._check_params()
        if len(answers) != len(golds):
            raise InputError(f"got answers for {len(answers)} questions but gold answers for {len(golds)}")
        train = self._data(answers, golds, passages, self.grounding)
        dev_data = None
        if dev is not None:
            if not isinstance(dev, tuple | list) or len(dev) not in (2, 3):
                raise InputError("dev must be (answers, golds) or (answers, golds, passages)")
            dev_answers, dev_golds, *rest = dev
            dev_data = self._data(dev_answers, dev_golds, rest[0] if rest else None, self.grounding)
        return self.fit_tensor(train.tensor, train.correctness, train.grounding, dev=dev_data, callback=callback)

    def fit_tensor(
        self,
        tensor: np.ndarray,
        correctness: np.ndarray,
        grounding: np.ndarray | None = None,
        *,
        dev: DevSplit | None = None,
        callback: Callback | None = None,
    ) -> Self:
        """Learn the weights from a similarity tensor (Q,M,M,K) and a correctness matrix (Q,M).

        `dev` is a VoteData or a tuple (tensor, correctness[, grounding]).
        """
        self._check_params()
        train = VoteData(tensor, correctness, grounding)
        if train.tensor.shape[3] != len(self.metrics):
            raise InputError(f"tensor has {train.tensor.shape[3]} metrics, the voter uses {len(self.metrics)}")
        if self.members is not None and len(self.members) != train.tensor.shape[1]:
            raise InputError(f"{len(self.members)} member names but answers from {train.tensor.shape[1]} members")
        dev_data = dev if dev is None or isinstance(dev, VoteData) else VoteData(*dev)
        poolings = list(POOLINGS) if self.pooling == SEARCH else [self.pooling]
        n_weights = train.tensor.shape[3] + train.tensor.shape[1] + int(bool(self.grounding))
        if self.objective == "smooth":
            result = self._smooth_fit(train, poolings, dev_data, 40 * n_weights)
        else:
            result = search_weights(
                train,
                poolings=poolings,
                threshold=float(self.threshold),
                member_threshold=float(self.member_threshold),
                max_weight=float(self.max_weight),
                restarts=self.restarts,
                seed=self.seed,
                max_evals=self.max_evals if self.max_evals is not None else 40 * n_weights,
                use_grounding=bool(self.grounding),
                dev=dev_data,
                callback=callback,
            )
        self._set_weights(result.weights)
        self.train_score_ = result.train_score
        self.dev_score_ = result.dev_score
        self.best_start_ = result.start
        self.n_evaluations_ = result.evaluations
        self.fit_history_ = result.history
        log.debug(
            "voter fitted: train %s %.4f%s, pooling %s, %d active of %d members",
            self.correctness,
            result.train_score,
            "" if result.dev_score is None else f", dev {result.dev_score:.4f}",
            self.pooling_,
            len(self.active_members_),
            self.n_members_,
        )
        return self

    def _smooth_fit(
        self, train: VoteData, poolings: list[str], dev: VoteData | None, default_evals: int
    ) -> SearchResult:
        best = None
        for pooling in poolings:
            result = smooth_search(
                train,
                pooling=pooling,
                threshold=float(self.threshold),
                member_threshold=float(self.member_threshold),
                max_weight=float(self.max_weight),
                max_evals=self.max_evals if self.max_evals is not None else default_evals,
                use_grounding=bool(self.grounding),
                settings=SmoothSettings(float(self.temperature), float(self.penalty)),
                dev=dev,
            )
            if best is None or result.train_score > best.train_score:
                best = result
        return best
