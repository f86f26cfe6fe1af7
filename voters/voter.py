"""`Voter`: the EoR voter (paper section 4, eqs. 6-7) as an sklearn-style estimator.

`answers` is a list (one per question) of lists (one per member, in a fixed member order) of strings;
`golds` a list of lists of acceptable answers; `passages` (for grounding) a list per question of one entry
per member, a string or a list of strings. `__init__` stores hyper-parameters only; `fit` learns
`metric_weights_` (ω^s), `retriever_weights_` (ω^r) and, with `grounding=True`, `grounding_weight_` (ω^g):

    s_m = ω^r_m · ( pool({Σ_k ω^s_k sim_k(y_m, y_n)}_{n≠m, ω^r_n > t}) + ω^g · g_m ),   m* = argmax_m s_m

Members with ω^r_m ≤ t (`member_threshold`) are dropped: they are never chosen and their answers do not
enter the others' pools (so an ensemble need not run them). Ties go to the lowest member index. Every
`*_tensor` method takes a precomputed similarity tensor (Q, M, M, K) in the order of `metrics`.

The class is in three files: here its hyper-parameters, data and prediction; `voter_fit` its constructors
and fitting; `voter_account` what it tells of itself: its description, the account of one vote, and its
weights file.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eor.correctness import CORRECTNESS, correctness_matrix
from eor.errors import ConfigError, InputError, NotFittedError
from voters.grounding import Passages, grounding_features
from voters.pooling import POOLINGS
from voters.scoring import VoteScorer, choose, decision_scores
from voters.similarity import available_metrics, check_answers, similarity_tensor
from voters.smooth import DEFAULT_PENALTY, DEFAULT_TEMPERATURE
from voters.training import VoteData
from voters.voter_account import AccountMixin
from voters.voter_fit import SEARCH, Answers, FittingMixin, Golds

log = logging.getLogger(__name__)

OBJECTIVES = ("step", "smooth")


class Voter(FittingMixin, AccountMixin):
    """Weighted similarity voting over member answers, with weights learned by Nelder-Mead.

    Hyper-parameters:
        metrics: registered similarity metric names (`em`, `f1`, `cosine`, `bertscore`, `nli`, ...).
        pooling: `mean`, `max`, `majority`, `plurality`, or "search" to choose one while fitting.
        threshold: s of majority/plurality pooling (a combined similarity above s counts as agreement).
        member_threshold: t; members with ω^r ≤ t are dropped.
        max_weight: upper bound of every weight (lower bound 0).
        restarts: number of seeded random Nelder-Mead starts (besides the deterministic ones).
        seed: seed of the random starts.
        correctness: the training objective g (`em`, `f1`, `contains`).
        grounding: learn a weight for "the answer occurs in the member's own passages".
        max_evals: objective evaluations per Nelder-Mead run (None: 40 per weight).
        metric_params: keyword arguments per metric, e.g. {"cosine": {"model": "minilm-l6"}}.
        cache_dir: folder of the disk cache of pair scores (None: no disk cache).
        members: member names in order (recorded in weights files and checked on load).
        objective: "step" fits the paper's objective (mean correctness of the chosen answers) directly with
            the restarts of `voters.training`; "smooth" fits the softmax surrogate of `voters.smooth` first
            (temperature τ, penalty λ toward uniform weights) and polishes it on the step objective.
        temperature, penalty: τ and λ of the smooth objective.
    """

    kind = "paper"

    def __init__(
        self,
        metrics: Sequence[str] = ("em", "f1", "cosine"),
        pooling: str = "mean",
        threshold: float = 0.5,
        member_threshold: float = 0.1,
        max_weight: float = 0.6,
        restarts: int = 4,
        seed: int = 0,
        correctness: str = "em",
        grounding: bool = False,
        max_evals: int | None = None,
        metric_params: Mapping[str, Mapping[str, Any]] | None = None,
        cache_dir: str | Path | None = None,
        members: Sequence[str] | None = None,
        objective: str = "step",
        temperature: float = DEFAULT_TEMPERATURE,
        penalty: float = DEFAULT_PENALTY,
    ):
        self.metrics = metrics
        self.pooling = pooling
        self.threshold = threshold
        self.member_threshold = member_threshold
        self.max_weight = max_weight
        self.restarts = restarts
        self.seed = seed
        self.correctness = correctness
        self.grounding = grounding
        self.max_evals = max_evals
        self.metric_params = metric_params
        self.cache_dir = cache_dir
        self.members = members
        self.objective = objective
        self.temperature = temperature
        self.penalty = penalty

    # -- sklearn protocol ------------------------------------------------------------------------------

    @classmethod
    def _param_names(cls) -> list[str]:
        return [name for name in inspect.signature(cls.__init__).parameters if name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The hyper-parameters, as given to `__init__`."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Voter:
        """Set hyper-parameters (unknown names raise ConfigError); learned weights are kept until refit."""
        valid = self._param_names()
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise ConfigError(f"Voter has no parameter(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {
            name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items() if name != "self"
        }
        changed = [f"{name}={value!r}" for name, value in self.get_params().items() if value != defaults[name]]
        return f"{type(self).__name__}({', '.join(changed)})"

    def _check_params(self) -> None:
        metrics = self.metrics
        if isinstance(metrics, str) or not metrics or any(not isinstance(name, str) for name in metrics):
            raise ConfigError(
                f"metrics must be a non-empty list of metric names; available: {', '.join(available_metrics())}"
            )
        unknown = [name for name in metrics if name not in available_metrics()]
        if unknown:
            raise ConfigError(
                f"unknown similarity metric(s) {', '.join(unknown)}; available: {', '.join(available_metrics())}"
            )
        if len(set(metrics)) != len(metrics):
            raise ConfigError(f"metrics must not repeat a name: {list(metrics)}")
        if self.pooling != SEARCH and self.pooling not in POOLINGS:
            raise ConfigError(f"unknown pooling {self.pooling!r}; available: {', '.join(POOLINGS)}, {SEARCH}")
        if self.correctness not in CORRECTNESS:
            raise ConfigError(f"unknown correctness metric {self.correctness!r}; available: {', '.join(CORRECTNESS)}")
        for name in ("threshold", "member_threshold", "max_weight"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not np.isfinite(value):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if self.member_threshold < 0 or self.max_weight <= self.member_threshold:
            raise ConfigError(
                f"need 0 ≤ member_threshold < max_weight, got member_threshold={self.member_threshold}, "
                f"max_weight={self.max_weight}"
            )
        if not isinstance(self.restarts, int) or self.restarts < 0:
            raise ConfigError(f"restarts must be an integer ≥ 0, got {self.restarts!r}")
        if self.max_evals is not None and (not isinstance(self.max_evals, int) or self.max_evals < 1):
            raise ConfigError(f"max_evals must be a positive integer or None, got {self.max_evals!r}")
        stray = sorted(set(self.metric_params or {}) - set(metrics))
        if stray:
            raise ConfigError(f"metric_params for metric(s) not in metrics: {', '.join(stray)}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"unknown objective {self.objective!r}; available: {', '.join(OBJECTIVES)}")
        for name in ("temperature", "penalty"):
            value = getattr(self, name)
            if (
                not isinstance(value, int | float)
                or not np.isfinite(value)
                or value < 0
                or (name == "temperature" and value == 0)
            ):
                raise ConfigError(
                    f"{name} must be a {'positive' if name == 'temperature' else 'non-negative'} number, got {value!r}"
                )
        if self.members is not None:
            names = list(self.members)
            if any(not isinstance(name, str) for name in names) or len(set(names)) != len(names):
                raise ConfigError("members must be distinct member names (strings)")

    # -- data preparation ------------------------------------------------------------------------------

    def similarity_tensor(self, answers: Answers) -> np.ndarray:
        """sim_k(y_m, y_n) for these answers and this voter's metrics, shape (Q, M, M, K)."""
        self._check_params()
        key = (
            tuple(tuple(row) for row in answers),
            tuple(self.metrics),
            repr(self.metric_params),
            str(self.cache_dir),
        )
        memo = getattr(self, "_memo", None)
        if memo is not None and memo[0] == key:  # decision_scores then predict on the same batch
            return memo[1]
        tensor = similarity_tensor(answers, list(self.metrics), cache=self.cache_dir, metric_params=self.metric_params)
        self._memo = (key, tensor)
        return tensor

    def _data(
        self,
        answers: Answers,
        golds: Golds | None,
        passages: Sequence[Sequence[Passages]] | None,
        need_grounding: bool,
    ) -> VoteData:
        check_answers(answers)
        tensor = self.similarity_tensor(answers)
        correct = (
            correctness_matrix(answers, golds, self.correctness) if golds is not None else np.zeros(tensor.shape[:2])
        )
        grounding = None
        if need_grounding:
            if passages is None:
                raise InputError("this voter uses grounding: pass each member's passages (passages=...)")
            grounding = grounding_features(answers, passages)
        return VoteData(tensor, correct, grounding)

    # -- prediction ------------------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not hasattr(self, "retriever_weights_"):
            raise NotFittedError(
                "this Voter is not fitted: call fit(answers, golds) first, or build one with "
                "Voter.uniform(n_members) or Voter.load(weights_path)"
            )

    @property
    def active_members_(self) -> list[int]:
        """Indices of the members that take part in the vote (ω^r > member_threshold)."""
        self._check_fitted()
        return [int(m) for m in np.flatnonzero(self.retriever_weights_ > self.member_threshold)]

    def decision_scores_tensor(self, tensor: np.ndarray, grounding: np.ndarray | None = None) -> np.ndarray:
        """Decision scores s_m (Q, M) from a similarity tensor; −inf for dropped members."""
        self._check_fitted()
        scorer = VoteScorer(tensor, grounding)
        if scorer.n_members != self.n_members_:
            raise InputError(f"this voter was built for {self.n_members_} members, got answers from {scorer.n_members}")
        if scorer.n_metrics != len(self.metric_weights_):
            raise InputError(f"tensor has {scorer.n_metrics} metrics, the voter uses {len(self.metric_weights_)}")
        return scorer.scores(
            self.metric_weights_,
            self.retriever_weights_,
            pooling=self.pooling_,
            threshold=float(self.threshold),
            member_threshold=float(self.member_threshold),
            grounding_weight=self.grounding_weight_,
        )

    def predict_tensor(self, tensor: np.ndarray, grounding: np.ndarray | None = None) -> np.ndarray:
        """The chosen member index per question (ties to the lowest index)."""
        return choose(self.decision_scores_tensor(tensor, grounding))

    def score_tensor(self, tensor: np.ndarray, correctness: np.ndarray, grounding: np.ndarray | None = None) -> float:
        """Mean correctness (Q, M matrix given) of the chosen answers."""
        chosen = self.predict_tensor(tensor, grounding)
        correct = np.asarray(correctness, dtype=float)
        if correct.shape != (len(chosen), self.n_members_):
            raise InputError(f"correctness must have shape ({len(chosen)}, {self.n_members_}), got {correct.shape}")
        return float(correct[np.arange(len(chosen)), chosen].mean()) if len(chosen) else 0.0

    @property
    def needs_passages(self) -> bool:
        """Whether decision scores need each member's passages (the grounding feature)."""
        self._check_fitted()
        return self.grounding_weight_ is not None

    needs_questions = False

    def decision_scores(
        self,
        answers: Answers,
        passages: Sequence[Sequence[Passages]] | None = None,
        questions: Sequence[str] | None = None,
        members: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Decision scores s_m per question and member, shape (Q, M) (eqs. 6-7); −inf for dropped members.

        `members`: the positions, among this voter's members, of the members that answered (a subset, e.g.
        after failures); they keep their own weights and are pooled among themselves. `questions` is unused
        (the interface of every voter).
        """
        self._check_fitted()
        if members is None:
            check_answers(answers, self.n_members_)
            data = self._data(answers, None, passages, self.needs_passages)
            return self.decision_scores_tensor(data.tensor, data.grounding)
        index = self._positions(members)
        check_answers(answers, len(index))
        data = self._data(answers, None, passages, self.needs_passages)
        return decision_scores(
            data.tensor,
            self.metric_weights_,
            self.retriever_weights_[index],
            pooling=self.pooling_,
            threshold=float(self.threshold),
            member_threshold=float(self.member_threshold),
            grounding=data.grounding,
            grounding_weight=self.grounding_weight_,
        )

    def _positions(self, members: Sequence[int]) -> list[int]:
        index = [int(m) for m in members]
        if not index or any(m < 0 or m >= self.n_members_ for m in index) or len(set(index)) != len(index):
            raise InputError(f"member positions must be distinct and in 0..{self.n_members_ - 1}, got {index}")
        return index

    def predict(
        self,
        answers: Answers,
        passages: Sequence[Sequence[Passages]] | None = None,
        questions: Sequence[str] | None = None,
    ) -> np.ndarray:
        """The chosen member index per question, shape (Q,)."""
        return choose(self.decision_scores(answers, passages, questions))

    def score(self, answers: Answers, golds: Golds, passages: Sequence[Sequence[Passages]] | None = None) -> float:
        """Mean correctness (the `correctness` metric) of the chosen answers: higher is better."""
        chosen = self.predict(answers, passages)
        correct = correctness_matrix(answers, golds, self.correctness)
        return float(correct[np.arange(len(chosen)), chosen].mean()) if len(chosen) else 0.0
