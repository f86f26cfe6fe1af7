"""`Voter`: the EoR voter (paper section 4, eqs. 6-7) as an sklearn-style estimator.

`answers` is a list (one per question) of lists (one per member, in a fixed member order) of strings;
`golds` a list of lists of acceptable answers; `passages` (for grounding) a list per question of one entry
per member, a string or a list of strings. `__init__` stores hyper-parameters only; `fit` learns
`metric_weights_` (ω^s), `retriever_weights_` (ω^r) and, with `grounding=True`, `grounding_weight_` (ω^g):

    s_m = ω^r_m · ( pool({Σ_k ω^s_k sim_k(y_m, y_n)}_{n≠m, ω^r_n > t}) + ω^g · g_m ),   m* = argmax_m s_m

Members with ω^r_m ≤ t (`member_threshold`) are dropped: they are never chosen and their answers do not
enter the others' pools (so an ensemble need not run them). Ties go to the lowest member index. Every
`*_tensor` method takes a precomputed similarity tensor (Q, M, M, K) in the order of `metrics`.
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
from voters.smooth import DEFAULT_PENALTY, DEFAULT_TEMPERATURE, SmoothSettings, smooth_search
from voters.training import (
    Callback,
    SearchResult,
    VoteData,
    Weights,
    search_weights,
    uniform_member_weight,
    uniform_metric_weight,
)
from voters.weights_file import (
    FORMAT,
    FORMAT_VERSION,
    eor_version,
    member_order,
    read_document,
    write_document,
)

log = logging.getLogger(__name__)

SEARCH = "search"
OBJECTIVES = ("step", "smooth")
Answers = Sequence[Sequence[str]]
Golds = Sequence[Sequence[str]]
DevSplit = tuple[Any, ...] | VoteData


class Voter:
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
    ) -> Voter:
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
    ) -> Voter:
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

    # -- fitting ---------------------------------------------------------------------------------------

    def fit(
        self,
        answers: Answers,
        golds: Golds,
        passages: Sequence[Sequence[Passages]] | None = None,
        *,
        dev: tuple[Any, ...] | None = None,
        callback: Callback | None = None,
    ) -> Voter:
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
    ) -> Voter:
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
        log.info(
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

    def explain_row(
        self, answers: Sequence[str], passages: Sequence[Passages], question: str, members: Sequence[int]
    ) -> dict[str, Any]:
        """Why the vote went as it did for one question: per answering member (positions `members`) its
        weight ω^r, whether the weight drops it, its similarity to every other member per metric and
        combined (eq. 6), its pooled similarity and decision score (eq. 7), and whether it is grounded."""
        index = self._positions(members)
        tensor = self.similarity_tensor([list(answers)])
        grounding = grounding_features([list(answers)], [list(passages)]) if self.needs_passages else None
        scorer = VoteScorer(tensor, grounding)
        weights = self.retriever_weights_[index]
        active = weights > self.member_threshold
        combined = scorer.combined(self.metric_weights_)[0]
        pooled = scorer.pooled(self.metric_weights_, active, self.pooling_, float(self.threshold))[0]
        scores = self.decision_scores([list(answers)], [list(passages)], [question], index)[0]
        rows = []
        for m in range(len(answers)):
            row = {
                "weight": float(weights[m]),
                "dropped": not bool(active[m]),
                "similarity": {
                    n: {
                        **{metric: float(tensor[0, m, n, k]) for k, metric in enumerate(self.metrics)},
                        "combined": float(combined[m, n]),
                    }
                    for n in range(len(answers))
                    if n != m
                },
                "pooled": float(pooled[m]) if active[m] else None,
                "score": float(scores[m]) if np.isfinite(scores[m]) else None,
            }
            if grounding is not None:
                row["grounded"] = bool(grounding[0, m])
            rows.append(row)
        return {
            "voter": self.kind,
            "pooling": self.pooling_,
            "metric_weights": {metric: float(w) for metric, w in zip(self.metrics, self.metric_weights_, strict=True)},
            "grounding_weight": self.grounding_weight_,
            "member_threshold": float(self.member_threshold),
            "members": rows,
        }

    def describe(self) -> dict[str, Any]:
        """The fitted voter for reports: its kind, metrics, pooling and every learned weight."""
        self._check_fitted()
        names = self.members_ or [f"member{m}" for m in range(self.n_members_)]
        return {
            "voter": self.kind,
            "metrics": list(self.metric_names_),
            "pooling": self.pooling_,
            "retriever_weights": {name: float(w) for name, w in zip(names, self.retriever_weights_, strict=True)},
            "metric_weights": {
                name: float(w) for name, w in zip(self.metric_names_, self.metric_weights_, strict=True)
            },
            "grounding_weight": self.grounding_weight_,
            "member_threshold": float(self.member_threshold),
            "active": [names[i] for i in self.active_members_],
        }

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

    # -- persistence -----------------------------------------------------------------------------------

    def save(self, path: str | Path, **meta: Any) -> Path:
        """Write the weights file (JSON). `meta`: reader, dataset, objective, ... (JSON values)."""
        self._check_fitted()
        meta.setdefault("objective", self.correctness)
        params = self.get_params()
        params["metrics"] = list(self.metrics)
        params["members"] = list(self.members) if self.members is not None else None
        params["cache_dir"] = str(self.cache_dir) if self.cache_dir is not None else None
        document = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "voter": self.kind,
            "eor_version": eor_version(),
            "members": self.members_,
            "metrics": self.metric_names_,
            "pooling": self.pooling_,
            "metric_weights": [float(w) for w in self.metric_weights_],
            "retriever_weights": [float(w) for w in self.retriever_weights_],
            "grounding_weight": self.grounding_weight_,
            "active_members": self.active_members_,
            "train_score": getattr(self, "train_score_", None),
            "dev_score": getattr(self, "dev_score_", None),
            "params": params,
            "meta": {**self.metadata_, **meta},
        }
        return write_document(path, document)

    @classmethod
    def load(cls, path: str | Path, members: Sequence[str] | None = None) -> Voter:
        """A fitted voter from a weights file.

        `members`, the pool's member names in its order, must be the file's members (in any order).
        """
        return cls.from_document(read_document(path), str(path), members)

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Voter:
        """A fitted voter from a weights-file document (see `voters.load_voter`)."""
        path = source
        if document.get("voter", cls.kind) != cls.kind:
            raise ConfigError(
                f"weights file {source!r} holds a {document.get('voter')!r} voter: load it with voters.load_voter"
            )
        try:
            params = dict(document["params"])
            metric_weights = [float(w) for w in document["metric_weights"]]
            retriever_weights = [float(w) for w in document["retriever_weights"]]
            pooling = str(document["pooling"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"weights file {str(path)!r} is incomplete or malformed: {exc!r}") from None
        file_members = document.get("members")
        order = member_order(file_members, members, len(retriever_weights), str(path))
        params["metrics"] = tuple(params.get("metrics", ()))
        if members is not None:
            params["members"] = list(members)
        voter = cls()
        voter.set_params(**params)
        voter._check_params()
        if len(metric_weights) != len(voter.metrics) or pooling not in POOLINGS:
            raise ConfigError(f"weights file {str(path)!r} is inconsistent: metric weights or pooling do not match")
        grounding = document.get("grounding_weight")
        voter._set_weights(
            Weights(
                np.array(metric_weights),
                np.array(retriever_weights)[order],
                None if grounding is None else float(grounding),
                pooling,
            )
        )
        voter.train_score_ = document.get("train_score")
        voter.dev_score_ = document.get("dev_score")
        voter.metadata_ = dict(document.get("meta") or {})
        return voter
