"""`Voter`: the EoR voter (paper section 4, eqs. 6-7) as an sklearn-style estimator.

`answers` is a list (one per question) of lists (one per member, in a fixed member order) of strings;
`golds` a list of lists of acceptable answers; `passages` (for grounding) a list per question of one entry
per member, a string or a list of strings. `__init__` stores hyper-parameters only; `fit` learns
`metric_weights_` (ω^s), `retriever_weights_` (ω^r) and, with `grounding=True`, `grounding_weight_` (ω^g):

    s_m = ω^r_m · ( pool({Σ_k ω^s_k sim_k(y_m, y_n)}_{n≠m, ω^r_n > t}) + ω^g · g_m ),   m* = argmax_m s_m

Members with ω^r_m ≤ t (`member_threshold`) are dropped: they are never chosen and their answers do not
enter the others' pools (so an ensemble need not run them). Ties go to the lowest member index. Every
`*_tensor` method takes a precomputed similarity tensor (Q, M, M, K) in the order of `metrics`.

The voter is a scikit-learn estimator (voters.estimator). Its weight search lives in `voter_fit`, and what
it tells of itself (its description, the account of one vote, its weights file) in `voter_account`, both
as functions of the voter.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from eor.correctness import correctness_matrix
from eor.errors import InputError, NotFittedError
from voters import voter_account
from voters.estimator import VoterEstimator
from voters.grounding import Passages
from voters.nelder_mead import Callback, VoteData, Weights
from voters.pooling import pooling_bound
from voters.scoring import choose, decision_scores, mean_correctness
from voters.similarity import check_answers, similarity_tensor
from voters.smooth import DEFAULT_PENALTY, DEFAULT_TEMPERATURE
from voters.voter_fit import (
    Answers,
    FitSettings,
    Golds,
    search,
    uniform_weights,
    vote_data,
)
from voters.voter_params import CONSTRAINTS, check_voter_params
from voters.weights_file import write_document

log = logging.getLogger(__name__)


class Voter(VoterEstimator):
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
        objective: "step" fits the paper's objective (mean correctness of the chosen answers) directly;
            "smooth" fits the softmax surrogate of `voters.smooth` first, then polishes on the step objective.
        temperature, penalty: τ and λ of the smooth objective.
    """

    kind = "paper"
    needs_questions = False

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = CONSTRAINTS

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

    def _check_params(self) -> None:
        """`_parameter_constraints`, then what depends on the registries or on several parameters."""
        super()._check_params()
        check_voter_params(self)

    # -- constructors and fitting ----------------------------------------------------------------------

    @classmethod
    def uniform(
        cls,
        n_members: int,
        metrics: Sequence[str] = ("em", "f1", "cosine"),
        pooling: str = "mean",
        *,
        grounding_weight: float | None = None,
        only: int | None = None,
        **params: Any,
    ) -> Self:
        """A voter with explicit uniform weights (voters.voter_fit.uniform_weights), ready to predict without
        fitting; with `grounding=True`, ω^g is `grounding_weight` (default 1/K, as every metric). `only`: Top
        R as a voter, member `only` alone active (ω^r = max_weight, every other 0), so always chosen."""
        voter = cls(metrics=tuple(metrics), pooling=pooling, **params)
        voter._check_params()
        voter.set_weights(uniform_weights(n_members, voter.get_params(), grounding_weight, only))
        voter.train_score_ = None
        voter.dev_score_ = None
        return voter

    def set_weights(self, weights: Weights) -> None:
        """Take `weights` as learned (what `fit`, `uniform` and a weights file do): the voter is fitted."""
        self.metric_weights_ = np.asarray(weights.metric, dtype=float)
        self.retriever_weights_ = np.asarray(weights.retriever, dtype=float)
        self.grounding_weight_ = weights.grounding
        self.pooling_ = weights.pooling
        self.n_members_ = len(self.retriever_weights_)
        self.members_ = list(self.members) if self.members is not None else None
        self.metric_names_ = list(self.metrics)
        if not hasattr(self, "metadata_"):
            self.metadata_: dict[str, Any] = {}

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
        dev: tuple[Any, ...] | VoteData | None = None,
        callback: Callback | None = None,
    ) -> Self:
        """Learn the weights from a similarity tensor (Q,M,M,K) and a correctness matrix (Q,M); `dev` is a
        VoteData or a tuple (tensor, correctness[, grounding])."""
        self._check_params()
        train = VoteData(tensor, correctness, grounding)
        if train.tensor.shape[3] != len(self.metrics):
            raise InputError(f"tensor has {train.tensor.shape[3]} metrics, the voter uses {len(self.metrics)}")
        if self.members is not None and len(self.members) != train.tensor.shape[1]:
            raise InputError(f"{len(self.members)} member names but answers from {train.tensor.shape[1]} members")
        dev_data = dev if dev is None or isinstance(dev, VoteData) else VoteData(*dev)
        result = search(FitSettings.of(self.get_params()), train, dev_data, callback)
        self.set_weights(result.weights)
        self.train_score_: float | None = result.train_score
        self.dev_score_ = result.dev_score
        self.best_start_ = result.start
        self.n_evaluations_ = result.evaluations
        self.fit_history_ = result.history
        return self

    # -- data preparation ------------------------------------------------------------------------------

    def similarity_tensor(self, answers: Answers) -> np.ndarray:
        """sim_k(y_m, y_n) for these answers and this voter's metrics, shape (Q, M, M, K)."""
        self._check_params()
        return similarity_tensor(answers, list(self.metrics), cache=self.cache_dir, metric_params=self.metric_params)

    def _data(
        self,
        answers: Answers,
        golds: Golds | None,
        passages: Sequence[Sequence[Passages]] | None,
        need_grounding: bool,
    ) -> VoteData:
        check_answers(answers)
        return vote_data(self.similarity_tensor(answers), answers, golds, self.correctness, passages, need_grounding)

    # -- prediction ------------------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not hasattr(self, "retriever_weights_"):
            raise NotFittedError(
                "this Voter is not fitted: call fit(answers, golds) first, or build one with "
                "Voter.uniform(n_members) or voters.load_voter(weights_path)"
            )

    @property
    def active_members_(self) -> list[int]:
        """Indices of the members that take part in the vote (ω^r > member_threshold)."""
        self._check_fitted()
        return [int(m) for m in np.flatnonzero(self.retriever_weights_ > self.member_threshold)]

    def decision_scores_tensor(self, tensor: np.ndarray, grounding: np.ndarray | None = None) -> np.ndarray:
        """Decision scores s_m (Q, M) from a similarity tensor; −inf for dropped members."""
        self._check_fitted()
        shape = np.shape(tensor)
        if len(shape) != 4 or shape[1] != self.n_members_:
            raise InputError(f"this voter was built for {self.n_members_} members, got a tensor of shape {shape}")
        if shape[3] != len(self.metric_weights_):
            raise InputError(f"tensor has {shape[3]} metrics, the voter uses {len(self.metric_weights_)}")
        return self.scores_for(tensor, grounding)

    def scores_for(
        self, tensor: np.ndarray, grounding: np.ndarray | None, index: list[int] | None = None
    ) -> np.ndarray:
        """Eqs. 6-7 with the fitted weights, of the members at positions `index` (None: all)."""
        return decision_scores(
            tensor,
            self.metric_weights_,
            self.retriever_weights_ if index is None else self.retriever_weights_[index],
            pooling=self.pooling_,
            threshold=float(self.threshold),
            member_threshold=float(self.member_threshold),
            grounding=grounding,
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
        return mean_correctness(correct, chosen)

    @property
    def admits_bound(self) -> bool:
        """Whether exact lazy voting (voters.lazy) can bound its vote: its pooling has an upper bound."""
        return pooling_bound(getattr(self, "pooling_", self.pooling)) is not None

    @property
    def needs_passages(self) -> bool:
        """Whether decision scores need each member's passages (the grounding feature)."""
        self._check_fitted()
        return self.grounding_weight_ is not None

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
        index = None if members is None else self._positions(members)
        check_answers(answers, self.n_members_ if index is None else len(index))
        data = self._data(answers, None, passages, self.needs_passages)
        return self.scores_for(data.tensor, data.grounding, index)

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
        return mean_correctness(correct, chosen)

    # -- what it tells of itself (voters.voter_account) ------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The fitted voter for reports: its kind, metrics, pooling and every learned weight."""
        self._check_fitted()
        return voter_account.describe(self)

    def explain_row(
        self, answers: Sequence[str], passages: Sequence[Passages], question: str, members: Sequence[int]
    ) -> dict[str, Any]:
        """Why the vote went as it did for one question (voters.voter_account.explain_row); `question` is
        unused (the interface of every voter)."""
        self._check_fitted()
        return voter_account.explain_row(self, answers, passages, self._positions(members))

    def save(self, path: str | Path, **meta: Any) -> Path:
        """Write the weights file (JSON). `meta`: reader, dataset, objective, ... (JSON values)."""
        self._check_fitted()
        return write_document(path, voter_account.document(self, **meta))

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Self:
        """A fitted voter from a weights-file document (see `voters.load_voter`)."""
        return voter_account.from_document(cls, document, source, members)
