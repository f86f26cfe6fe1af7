"""What eor asks of a voter (`FittedVoter`), and `SimpleVoter`, a base that does the bookkeeping.

eor's voters (the paper's `Voter`, the learned `AnswerSelector`, the `Cascade`, the reader as judge's
`JudgeVoter`, which chooses among the judge's candidates rather than the members' answers: `chooses`) and any
voter another package adds (docs/extending.md) are used the same way: cross-validation and `eor train` call
`fit(X, y)` on a batch of recorded answers (voters.batch.VoteBatch) and `voters.codecs.save_voter`; `eor bench`
calls `predict(X)`, `decision_function(X)` and `describe`; the ensemble calls `decision_scores` and `explain_row`
on the answers of the members that answered; and `voters.load_voter` reads a weights file with the codec of the
kind it names (voters.codecs). eor's kinds hold no file format; another package's kind writes and reads its own
weights file (`save`, `from_document`: `SimpleVoter` writes both).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np

from eor.core.errors import ConfigError
from voters.batch import Golds, Passages, VoteBatch
from voters.estimator import VoterEstimator
from voters.scoring import choose
from voters.weights_file import header, member_order, write_document

__all__ = ["DECLARED", "FittedVoter", "SimpleVoter", "check_voter", "check_voter_class", "confidence_kwargs"]


@runtime_checkable
class FittedVoter(Protocol):
    """A voter; every method but `fit` needs it fitted. `members_`: the pool's member names in the voter's
    order (None: unnamed, then `n_members_` counts them); `metric_names_`/`metric_params`: the similarity
    metrics it computes (eor train's uniform baseline uses the same); `train_score_`, `metadata_`: what its
    weights file records."""

    kind: ClassVar[str]  # the weights file's "voter" field
    # What the pipeline asks of it, declared (voters.estimator.VoterEstimator gives every default), never looked
    # for: whether it answers step by step in its own order (`order_`, `decide`, `vote_scores`: voters.cascade),
    # whether lazy voting can bound its pending members (voters.lazy), whether its scores read the reader's
    # confidence, and the positions of the members that can matter (None: all)
    in_steps: ClassVar[bool]
    chooses: ClassVar[str]  # among what (voters.batch.OPTIONS): the members' answers, or the judge's candidates
    admits_bound: bool
    uses_confidence_: bool
    active_members_: list[int] | None
    needs_passages: bool  # whether decision_scores reads the members' passages
    members_: list[str] | None
    n_members_: int
    metric_names_: list[str]
    metric_params: dict[str, dict[str, Any]] | None
    train_score_: float | None
    dev_score_: float | None
    metadata_: Mapping[str, Any]  # its weights file's `meta` (empty when none)
    source_: str | None  # the weights file it was loaded from (None: in memory)
    sha256_: str | None  # the digest of the bytes it was loaded from
    right_: Any  # its P(right) (voters.right.RightModel), built once by voters.loading.load_voter (None: none)
    judge_: Any  # the judge voter a cascade trained to end with the judge answers with (None: none)

    def fit(self, X: VoteBatch, y: Golds | None = None) -> Any:
        """Learn from batch X against the gold answers `y` (None: X's own); returns the voter."""

    def decision_scores(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        members: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Scores (Q, M) of each answering member (positions `members` among `members_`; None: all);
        the highest is chosen (ties: the first), −inf never."""

    def decision_function(self, X: VoteBatch) -> np.ndarray:
        """The scores of every option on batch X that `predict` chooses by: (Q, M) for the members' answers."""

    def predict(self, X: VoteBatch) -> np.ndarray:
        """The chosen option's position per question of batch X: a member's, or one of the judge's candidates
        for a kind that `chooses` them."""

    def score(self, X: VoteBatch, y: Golds | None = None) -> float:
        """Mean correctness of the chosen answers on batch X against `y` (None: X's own gold answers)."""

    def explain_row(
        self, answers: Sequence[str], passages: Sequence[Sequence[str]], question: str, members: Sequence[int]
    ) -> dict[str, Any]:
        """Why one question's vote came out so: {"voter": kind, ..., "members": [one dict per answer]}."""

    def describe(self) -> dict[str, Any]:
        """The fitted parameters in a JSON-ready dict headed by {"voter": kind}."""


def confidence_kwargs(voter: Any, confidence: Any) -> dict[str, Any]:
    """`{"confidence": confidence}` for a voter fitted with the reader's confidence among its features
    (`uses_confidence_`: the selector, a cascade of selectors), else `{}`: what its scoring methods take."""
    return {"confidence": confidence} if voter.uses_confidence_ else {}


#: what `check_voter_class` asks of a class besides its methods: what the pipeline reads of every voter
DECLARED = (
    "in_steps",
    "admits_bound",
    "uses_confidence_",
    "active_members_",
    "metadata_",
    "source_",
    "sha256_",
    "train_score_",
    "dev_score_",
    "right_",
    "chooses",
    "judge_",
)


#: declared names added after voter classes of other packages were written, each with the default a class that does
#: not declare it is given (with a DeprecationWarning, by `check_voter_class`): it chooses among the members'
#: answers, and carries no judge
ADDED = {"chooses": "members", "judge_": None}


def check_voter(voter: Any) -> FittedVoter:
    """`voter`, checked at the door (an ensemble's, before its reader loads): ConfigError unless its class is a
    voter class (`check_voter_class`); the pipeline then reads what it declares, never looks for it."""
    check_voter_class(type(voter))
    return voter


def check_voter_class(cls: Any, *, persists: bool = False) -> type[FittedVoter]:
    """`cls`, checked: ConfigError unless it is a voter class, a non-empty string `kind`, FittedVoter's methods
    and what the pipeline reads (`DECLARED`); with `persists`, also `save` and `from_document` (another package's
    kind writes and reads its own weights file; eor's have their codecs, voters.codecs)."""
    kind = getattr(cls, "kind", None)
    if not isinstance(cls, type) or not isinstance(kind, str) or not kind:
        raise ConfigError(f"a voter is a class with a non-empty string `kind`, got {cls!r}")
    methods = (
        "fit",
        "decision_scores",
        "decision_function",
        "predict",
        "score",
        "explain_row",
        "describe",
        *(("save", "from_document") if persists else ()),
    )
    missing = [name for name in methods if not callable(getattr(cls, name, None))]
    added = [name for name in ADDED if not hasattr(cls, name)]
    missing += [name for name in DECLARED if name not in added and not hasattr(cls, name)]
    if missing:
        raise ConfigError(
            f"voter {kind!r} ({cls.__name__}) lacks {', '.join(missing)} (see voters.protocol; "
            "voters.protocol.SimpleVoter declares every one)"
        )
    if added:  # a class written before these were declared: the defaults, said once per class
        warnings.warn(
            f"voter {kind!r} ({cls.__name__}) declares no {', '.join(added)}: "
            f"{', '.join(f'{name} = {ADDED[name]!r}' for name in added)} assumed; declare them (or subclass "
            "voters.protocol.SimpleVoter) before a later version requires them",
            DeprecationWarning,
            stacklevel=2,
        )
        for name in added:
            setattr(cls, name, ADDED[name])
    return cls


class SimpleVoter(VoterEstimator):
    """A base for a new voter, a scikit-learn estimator (voters.estimator): write `kind`, `decision_scores`,
    and, if it learns anything, `fit(X, y=None)` (what it learns from batch X, voters.batch, kept as fitted
    attributes, names ending in `_`), `state()` (its learned values as JSON, per-member values keyed by member
    name so that any pool order loads) and `set_state(state)` (which sets them back). This base learns
    nothing, predicts by the highest score, scores by mean correctness, explains by the scores, and saves and
    loads the weights file (same members required, any order). Its hyper-parameters: the pool's `members`
    in order, the similarity `metrics` (with `metric_params`) it computes, if any, and the `correctness`
    metric it is scored (and may learn) by."""

    kind: ClassVar[str] = ""
    needs_passages: ClassVar[bool] = False

    def __init__(
        self,
        members: Sequence[str] = (),
        metrics: Sequence[str] = (),
        metric_params: dict[str, dict[str, Any]] | None = None,
        correctness: str = "em",
    ) -> None:
        self.members = members
        self.metrics = metrics
        self.metric_params = metric_params
        self.correctness = correctness

    @property
    def members_(self) -> list[str]:
        return [str(name) for name in self.members]

    @property
    def n_members_(self) -> int:
        return len(self.members)

    @property
    def metric_names_(self) -> list[str]:
        return list(self.metrics)

    def fit(self, X: VoteBatch, y: Golds | None = None) -> Self:
        """Learn nothing (a voter that learns overrides `fit`); the voter is then fitted, without a training
        score (`eor train` scores it on the training records)."""
        self.train_score_: float | None = None
        return self

    def decision_scores(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        members: Sequence[int] | None = None,
    ) -> np.ndarray:
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        """The learned values, JSON-ready (default: none)."""
        return {}

    def set_state(self, state: Mapping[str, Any]) -> Self:
        """Set the learned values of `state()`'s output as fitted attributes (default: none); returns self."""
        return self

    @classmethod
    def from_state(cls, state: Mapping[str, Any], members: Sequence[str], **settings: Any) -> Self:
        """The voter for `members` (the pool's order) from `state()`'s output; `settings`: metrics,
        metric_params and correctness."""
        return cls(members, **settings).set_state(state)

    def decision_function(self, X: VoteBatch) -> np.ndarray:
        """`decision_scores` of every member's answer on batch X."""
        self._check_fitted()
        return np.asarray(self.decision_scores(X.answers, X.passages, X.questions), dtype=float)

    def predict(self, X: VoteBatch) -> np.ndarray:
        return choose(self.decision_function(X))

    def explain_row(
        self, answers: Sequence[str], passages: Sequence[Sequence[str]], question: str, members: Sequence[int]
    ) -> dict[str, Any]:
        scores = self.decision_scores([list(answers)], [list(passages)], [question], members)[0]
        return {"voter": self.kind, "members": [{"score": float(score)} for score in scores]}

    def describe(self) -> dict[str, Any]:
        return {"voter": self.kind, "metrics": list(self.metric_names_), **self.state()}

    def save(self, path: str | Path, **meta: Any) -> Path:
        self._check_fitted()
        document = {
            **header(self.kind, self.members_, self.metric_names_),
            "metric_params": self.metric_params,
            "correctness": self.correctness,
            "state": self.state(),
            "train_score": self.train_score_,
            "meta": {**self.metadata_, **meta},
        }
        return write_document(path, document)

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Self:
        file_members = [str(name) for name in document["members"]]
        order = member_order(file_members, members, len(file_members), source)
        pool = [file_members[i] for i in order]
        settings = {
            "metrics": list(document.get("metrics") or ()),
            "metric_params": document.get("metric_params"),
            "correctness": document.get("correctness", "em"),
        }
        voter = cls.from_state(dict(document.get("state") or {}), pool, **settings)
        voter.train_score_ = document.get("train_score")
        voter.metadata_ = dict(document.get("meta") or {})
        return voter
