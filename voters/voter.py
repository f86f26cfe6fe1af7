"""`Voter`: the EoR voter (paper section 4, eqs. 6-7) as a scikit-learn estimator.

It fits on, predicts and is scored on a batch of recorded answers (voters.batch.VoteBatch: the answers per
question, one per member in a fixed member order, and for grounding each member's passages) against the
gold answers. `__init__` stores hyper-parameters only; `fit` learns `metric_weights_` (ω^s),
`retriever_weights_` (ω^r) and, with `grounding=True`, `grounding_weight_` (ω^g):

    s_m = ω^r_m · ( pool({Σ_k ω^s_k sim_k(y_m, y_n)}_{n≠m, ω^r_n > t}) + ω^g · g_m ),   m* = argmax_m s_m

Members with ω^r_m ≤ t (`member_threshold`) are dropped: they are never chosen and their answers do not
enter the others' pools (so an ensemble need not run them). Ties go to the lowest member index. The
similarity tensor (Q, M, M, K) of a batch is computed once per whole batch, so cross-validation folds and
every start of the weight search only read it.

The voter is a scikit-learn estimator (voters.estimator); its weight search lives in `voter_fit`. It tells of
itself (`describe`) and of one vote (`explain_row`: voters.accounts); its weights file is written and read by its
codec (voters.codecs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from eor.core.errors import InputError
from voters.accounts import paper_account, paper_description
from voters.batch import Answers, Golds, VoteBatch
from voters.estimator import VoterEstimator
from voters.grounding import Passages, grounding_features
from voters.nelder_mead import Callback, VoteData, Weights
from voters.pooling import pooling_bound
from voters.scoring import choose, decision_scores
from voters.similarity import check_answers, similarity_tensor
from voters.smooth import DEFAULT_PENALTY, DEFAULT_TEMPERATURE
from voters.voter_fit import FitSettings, search, uniform_weights
from voters.voter_params import CONSTRAINTS, check_voter_params


class Voter(VoterEstimator):
    """Weighted similarity voting over member answers, with weights learned by Nelder-Mead, and its account.

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
        self.metadata_ = dict(self.metadata_)  # its own copy (the class's default is an empty read-only one)

    def fit(
        self,
        X: VoteBatch,
        y: Golds | None = None,
        *,
        dev: VoteBatch | None = None,
        callback: Callback | None = None,
    ) -> Self:
        """Learn the weights on the training questions of X (voters.batch) against the gold answers `y` (None:
        X's own); with `grounding=True`, X holds each member's passages.

        `dev`, a batch with its gold answers, is scored for the report (never used to choose the weights);
        `callback` receives one dict per start (pooling, start, train/dev scores, best so far).
        """
        self._check_params()
        train = self._vote_data(X.with_golds(y))
        if self.members is not None and len(self.members) != X.n_members:
            raise InputError(f"{len(self.members)} member names but answers from {X.n_members} members")
        dev_data = None if dev is None else self._vote_data(dev)
        result = search(FitSettings.of(self.get_params()), train, dev_data, callback)
        self.set_weights(result.weights)
        self.train_score_: float | None = result.train_score
        self.dev_score_ = result.dev_score
        self.best_start_ = result.start
        self.n_evaluations_ = result.evaluations
        self.fit_history_ = result.history
        return self

    def _vote_data(self, X: VoteBatch) -> VoteData:
        """What the objective reads of a batch with gold answers: its similarity tensor, each answer's
        correctness and, with grounding, whether each answer occurs in its member's passages."""
        grounding = X.grounding() if self.grounding else None
        return VoteData(self._similarity(X), X.correctness(self.correctness), grounding)

    # -- similarities ----------------------------------------------------------------------------------

    def similarity_tensor(self, answers: Answers) -> np.ndarray:
        """sim_k(y_m, y_n) for these answers and this voter's metrics, shape (Q, M, M, K)."""
        self._check_params()
        return similarity_tensor(answers, list(self.metrics), cache=self.cache_dir, metric_params=self.metric_params)

    def _similarity(self, X: VoteBatch) -> np.ndarray:
        """X's similarity tensor under this voter's metrics (computed once per whole batch)."""
        return X.similarity(self.metrics, self.metric_params, self.cache_dir)

    # -- prediction ------------------------------------------------------------------------------------

    @property
    def active_members_(self) -> list[int]:
        """Indices of the members that take part in the vote (ω^r > member_threshold)."""
        self._check_fitted()
        return [int(m) for m in np.flatnonzero(self.retriever_weights_ > self.member_threshold)]

    def _scores(self, tensor: np.ndarray, grounding: np.ndarray | None, index: list[int] | None = None) -> np.ndarray:
        """Eqs. 6-7 with the fitted weights on a similarity tensor (Q, M, M, K) of the members at positions
        `index` (None: all), in the order of `metrics`; −inf for dropped members."""
        shape = np.shape(tensor)
        width = self.n_members_ if index is None else len(index)
        if len(shape) != 4 or shape[1] != width or shape[3] != len(self.metric_weights_):
            raise InputError(
                f"this voter scores {width} members under {len(self.metric_weights_)} metrics, got a similarity "
                f"tensor of shape {shape}"
            )
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
        if self.needs_passages and passages is None:
            raise InputError("this voter uses grounding: pass each member's passages (passages=...)")
        grounding = grounding_features(answers, passages) if self.needs_passages and passages is not None else None
        return self._scores(self.similarity_tensor(answers), grounding, index)

    def _positions(self, members: Sequence[int]) -> list[int]:
        index = [int(m) for m in members]
        if not index or any(m < 0 or m >= self.n_members_ for m in index) or len(set(index)) != len(index):
            raise InputError(f"member positions must be distinct and in 0..{self.n_members_ - 1}, got {index}")
        return index

    def decision_function(self, X: VoteBatch) -> np.ndarray:
        """Decision scores (Q, M) of every member on batch X (eqs. 6-7); −inf for dropped members."""
        self._check_fitted()
        if X.n_members != self.n_members_:
            raise InputError(f"expected answers from {self.n_members_} members per question, got {X.n_members}")
        return self._scores(self._similarity(X), X.grounding() if self.needs_passages else None)

    def predict(self, X: VoteBatch) -> np.ndarray:
        """The chosen member's position per question, shape (Q,) (ties to the lowest)."""
        return choose(self.decision_function(X))

    def describe(self) -> dict[str, Any]:
        """The fitted voter for reports: its kind, metrics, pooling and every learned weight."""
        self._check_fitted()
        return paper_description(self)

    def explain_row(
        self, answers: Sequence[str], passages: Sequence[Passages], question: str, members: Sequence[int]
    ) -> dict[str, Any]:
        """Why the vote went as it did for one question (voters.accounts.paper_account); `question` is unused
        (the interface of every voter)."""
        self._check_fitted()
        return paper_account(self, answers, passages, members)
