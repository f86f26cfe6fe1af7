"""`Cascade`: answer with only the members a question needs (beyond the paper), an sklearn-style estimator
like `Voter` and `AnswerSelector`.

Members run in a learned order, one step per member. After step j (the first j members of the order have
answered) the step's answer selector (an `AnswerSelector` over those members) picks the leading candidate,
and the step's calibration turns the leader's log-odds z and its margin δ over the best candidate with
another answer into P = σ(a_j + b_j·z + c_j·min(δ, 10)), the probability that the leader is right (or, by
`stop_on`, that it is the full pool's answer). The cascade stops at the first step with P ≥ the threshold,
at the last step (every member) otherwise; members after the stop never run. How the order, the
calibrations, the stop target and the threshold are learned: voters.cascade_fit.

As a voter of recorded answers (`predict`, what `eor bench` and cross-validation call) it replays the
cascade: each question's answer is the one the cascade stops at. `decision_scores` scores the members that
answered with the selector of the first step that holds them all (what the ensemble's vote calls after a
live cascade stopped, or after `--all-members`). The weights file (`"voter": "cascade"`) holds each step's
selector document, calibration, the threshold, the operating points and the members' costs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from eor.answers import normalize_answer
from eor.correctness import CORRECTNESS, correctness_matrix
from eor.errors import ConfigError, InputError, NotFittedError
from voters import cascade_file
from voters.cascade_file import CascadeStep
from voters.cascade_fit import (
    STOP_TARGETS,
    OperatingPoint,
    SelectorSettings,
    StepScores,
    choose_point,
    fit_steps,
    leading,
    replay_steps,
    stop_scores,
)
from voters.estimator import VoterEstimator
from voters.features import candidate_blocks
from voters.protocol import confidence_kwargs
from voters.right import EARLY, LAST
from voters.selector import SELECTOR_CONSTRAINTS
from voters.similarity import check_answers, similarity_tensor
from voters.weights_file import write_document

KIND = "cascade"
DEFAULT_MAX_LOSS = 0.005  # a fraction: 0.5 EM points
Passages = Sequence[Sequence[Sequence[str]]]


@dataclass(frozen=True)
class StopDecision:
    """What a step decided: stop or go on, the leading member and answer, P(right) against the threshold."""

    step: int
    stop: bool
    member: str
    answer: str
    probability: float
    threshold: float
    ran: list[str]
    last: bool
    scores: dict[str, float]  # the step selector's log-odds of each member that answered
    event: str = "agreement"  # what P is the probability of (the cascade's stop_on)

    def reason(self) -> str:
        ran = ", ".join(self.ran)
        label = EVENT_LABELS.get(self.event, f"P({self.event})")
        if self.last:
            return f"ran every member of the cascade ({ran}): {label} {self.probability:.2f}"
        sign = "≥" if self.stop else "<"
        verb = "stopped after" if self.stop else "went on after"
        return f"{verb} {ran}: {label} {self.probability:.2f} {sign} {self.threshold:.2f}"


#: how a stop reason names P, by the cascade's stop_on.
EVENT_LABELS = {"agreement": "P(full pool agrees)", "right": "P(right)"}


#: scikit-learn's validation of the hyper-parameters: those of the step selectors, and the cascade's own
CASCADE_CONSTRAINTS: dict[str, list[Any]] = {
    **{name: rules for name, rules in SELECTOR_CONSTRAINTS.items() if name != "cache_dir"},
    "max_loss": [Interval(Real, 0, None, closed="left"), None],
    "budget": [Interval(Real, 0, None, closed="left"), None],
    "stop_on": [StrOptions({"auto", *STOP_TARGETS})],
    "folds": [Interval(Integral, 2, None, closed="left")],
    "seed": [Integral],
}


class Cascade(VoterEstimator):
    """Learned cascade of answer selectors, a scikit-learn estimator (voters.estimator).

    Hyper-parameters:
        metrics, C, correctness, metric_params: those of every step's answer selector (voters.selector).
        max_loss: the largest loss of accuracy (a fraction: 0.005 is 0.5 EM points) against the full pool's
            selector on held-out training questions; the cheapest threshold that keeps it is chosen.
        budget: instead of max_loss, the most accurate threshold whose mean cost per question is at most this.
        stop_on: what a step's P predicts: "right" (its leading answer is right), "agreement" (it is the full
            pool's), or "auto" (the one whose held-out operating point is cheaper).
        folds, seed: the cross-validation of the step scores.
        members: member names in order.
    """

    kind = KIND
    needs_passages = True
    needs_questions = True
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = CASCADE_CONSTRAINTS

    def __init__(
        self,
        metrics: Sequence[str] = ("em", "f1", "cosine"),
        C: float = 1.0,  # noqa: N803 - scikit-learn's name
        correctness: str = "em",
        metric_params: Mapping[str, Mapping[str, Any]] | None = None,
        max_loss: float | None = DEFAULT_MAX_LOSS,
        budget: float | None = None,
        stop_on: str = "auto",
        folds: int = 5,
        seed: int = 0,
        members: Sequence[str] | None = None,
    ):
        self.metrics = metrics
        self.C = C
        self.correctness = correctness
        self.metric_params = metric_params
        self.max_loss = max_loss
        self.budget = budget
        self.stop_on = stop_on
        self.folds = folds
        self.seed = seed
        self.members = members

    def _check_params(self) -> None:
        """`_parameter_constraints`, then the correctness metric's registry and max_loss or budget."""
        super()._check_params()
        if self.correctness not in CORRECTNESS:
            raise ConfigError(f"unknown correctness metric {self.correctness!r}; available: {', '.join(CORRECTNESS)}")
        if self.max_loss is None and self.budget is None:
            raise ConfigError("a cascade needs max_loss or budget")

    # -- fitting ------------------------------------------------------------------------------------------

    def fit(
        self,
        answers: Sequence[Sequence[str]],
        golds: Sequence[Sequence[str]],
        passages: Passages,
        questions: Sequence[str],
        costs: np.ndarray,
        cost_unit: str = "seconds",
        confidence: Sequence[Sequence[Any]] | None = None,
    ) -> Cascade:
        """Learn the cascade; costs (Q, M): each member's cost per question (e.g. recorded reader seconds);
        confidence[q][m]: each answer's confidence summary, features of every step's selector."""
        self._check_params()
        n_members = check_answers(answers)
        if len(golds) != len(answers):
            raise InputError(f"got answers for {len(answers)} questions but gold answers for {len(golds)}")
        names = list(self.members) if self.members is not None else [f"member{m}" for m in range(n_members)]
        if len(names) != n_members:
            raise InputError(f"{len(names)} member names but answers from {n_members} members")
        tensor = similarity_tensor(answers, list(self.metrics), metric_params=self.metric_params)
        blocks = candidate_blocks(tensor, answers, passages, questions, self.metrics, confidence)
        labels = correctness_matrix(answers, golds, self.correctness) >= 0.5
        return self.fit_blocks(blocks, labels, names, np.asarray(costs, dtype=float), cost_unit)

    def fit_blocks(
        self,
        blocks: Any,
        labels: np.ndarray,
        names: Sequence[str],
        costs: np.ndarray,
        cost_unit: str = "seconds",
        rows: np.ndarray | None = None,
    ) -> Cascade:
        """Fit on precomputed candidate blocks (voters.features.CandidateBlocks), correctness labels (Q, M)
        and costs (Q, M), over `rows` (default: every question)."""
        self._check_params()
        settings = SelectorSettings(tuple(self.metrics), float(self.C), self.correctness, self.metric_params)
        rows = np.arange(len(labels)) if rows is None else np.asarray(rows)
        scores = StepScores(blocks, labels, names, rows, settings, self.folds, self.seed)
        fitted = fit_steps(scores, costs, max_loss=self.max_loss, budget=self.budget, stop_on=self.stop_on)
        found = fitted.search
        self.stop_on_ = fitted.stop_on
        self.stop_targets_ = {name: point.to_dict() for name, point in fitted.targets.items()}
        self.members_ = list(names)
        self.n_members_ = len(self.members_)
        self.metric_names_ = list(self.metrics)
        self.order_ = [self.members_[m] for m in found.order]
        self.steps_ = [
            CascadeStep(self.order_[: j + 1], selector, calibration)
            for j, (selector, calibration) in enumerate(zip(fitted.selectors, found.calibrations, strict=True))
        ]
        self.threshold_ = fitted.chosen.threshold
        self.operating_points_ = list(fitted.held_out.points)
        self.chosen_point_ = fitted.chosen
        self.full_accuracy_ = fitted.held_out.full_accuracy
        self.full_cost_ = fitted.held_out.full_cost
        self.cost_unit_ = cost_unit
        self.member_costs_ = {
            name: float(value) for name, value in zip(names, np.asarray(costs)[rows].mean(axis=0), strict=True)
        }
        self.train_score_ = None  # eor.train_command replays the cascade on the training records
        self.metadata_: dict[str, Any] = getattr(self, "metadata_", {})
        return self

    # -- the live cascade -----------------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not hasattr(self, "steps_"):
            raise NotFittedError("this Cascade is not fitted: call fit(...) or load a weights file")

    @property
    def order(self) -> list[str]:
        self._check_fitted()
        return list(self.order_)

    @property
    def uses_confidence_(self) -> bool:
        """Whether its step selectors have the reader's confidence among their features."""
        return any(getattr(step.selector, "uses_confidence_", False) for step in self.steps_)

    def decide(
        self,
        step: int,
        answers: Mapping[str, str],
        passages: Mapping[str, Sequence[str]],
        question: str,
        confidence: Mapping[str, Any] | None = None,
    ) -> StopDecision:
        """After step `step` ran: stop, or run the next member? `answers`/`passages`/`confidence`: by member
        name, of the members that answered so far (a member that failed is absent; the step's selector votes
        over the rest). With `threshold` +inf (never stop early) the cascade runs every member."""
        self._check_fitted()
        if not 0 <= step < len(self.steps_):
            raise InputError(f"the cascade has steps 0 to {len(self.steps_) - 1}, not {step}")
        current = self.steps_[step]
        voting = [name for name in current.members if name in answers]
        if not voting:
            raise InputError(f"no member of step {step} ({', '.join(current.members)}) has answered")
        texts = [answers[name] for name in voting]
        known = None if confidence is None else [[confidence.get(name) for name in voting]]
        scores = current.selector.decision_scores(
            [texts],
            [[list(passages.get(name, ())) for name in voting]],
            [question],
            [current.members.index(name) for name in voting],
            **confidence_kwargs(current.selector, known),
        )
        normal = [normalize_answer(text) for text in texts]
        same = np.array([[[a == b for b in normal] for a in normal]])
        pick, top, margin = leading(scores, same)
        probability = float(current.calibration.probability(top, margin)[0])
        last = step == len(self.steps_) - 1
        member = voting[int(pick[0])]
        stop = last or probability >= self.threshold_
        logits = {name: float(value) for name, value in zip(voting, scores[0], strict=True)}
        return StopDecision(
            step, stop, member, answers[member], probability, self.threshold_, list(voting), last, logits, self.stop_on_
        )

    # -- voting on recorded answers --------------------------------------------------------------------------

    def replay(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages,
        questions: Sequence[str],
        threshold: float | None = None,
        confidence: Sequence[Sequence[Any]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The cascade over recorded answers of every member (in `members_` order): (chosen member position,
        the step it stopped at) per question, at the fitted threshold or `threshold`; `confidence[q][m]`: the
        answers' confidence summaries (for steps whose selector uses them)."""
        if not len(answers):
            return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        blocks = recorded_blocks(self, answers, passages, questions, confidence)
        return self.replay_blocks(blocks, np.arange(len(answers)), threshold)

    def vote_scores(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages,
        questions: Sequence[str],
        confidence: Sequence[Sequence[Any]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Over recorded answers (as `replay`), per question: the log-odds of the step it stops at over every
        member (−inf for the members it did not run), its group for P(right) (voters.right: EARLY, or LAST
        where it ran every step) and the chosen member's position."""
        return self.stop_scores(
            recorded_blocks(self, answers, passages, questions, confidence), np.arange(len(answers))
        )

    def stop_scores(self, blocks: Any, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`vote_scores` on precomputed candidate blocks (as `replay_blocks`), for the questions at `rows`."""
        scores, stops, picks = stop_scores(blocks, step_positions(self), self.threshold_, rows)
        return scores, np.where(stops == len(self.steps_) - 1, LAST, EARLY), picks

    def replay_blocks(
        self, blocks: Any, rows: np.ndarray, threshold: float | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """`replay` on precomputed candidate blocks of every member (voters.features, in `members_` order and
        the cascade's metrics), for the questions at `rows`."""
        return replay_steps(blocks, step_positions(self), self.threshold_ if threshold is None else threshold, rows)

    def spent(self, costs: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Per question, the cost of the members of the steps up to the one it stopped at; costs (R, M) per
        question and member, in `members_` order."""
        positions = [self.members_.index(name) for name in self.order_]
        cumulative = np.cumsum(np.asarray(costs, dtype=float)[:, positions], axis=1)
        return cumulative[np.arange(len(stops)), np.asarray(stops, dtype=int)]

    def predict(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        confidence: Sequence[Sequence[Any]] | None = None,
    ) -> np.ndarray:
        if passages is None or questions is None:
            raise InputError("the cascade needs each member's passages and the question texts")
        return self.replay(answers, passages, questions, confidence=confidence)[0]

    def covering_step(self, names: Sequence[str]) -> int:
        """The first step whose members include every one of `names`."""
        self._check_fitted()
        wanted = set(names)
        for j, step in enumerate(self.steps_):
            if wanted <= set(step.members):
                return j
        raise InputError(f"member(s) {', '.join(sorted(wanted - set(self.members_)))} are not in the cascade")

    def decision_scores(
        self,
        answers: Sequence[Sequence[str]],
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        members: Sequence[int] | None = None,
        confidence: Sequence[Sequence[Any]] | None = None,
    ) -> np.ndarray:
        """Log-odds (Q, M) of the answering members (positions `members` among `members_`; None: all) by the
        selector of the first step that holds them all."""
        self._check_fitted()
        positions = list(range(self.n_members_)) if members is None else [int(m) for m in members]
        names = [self.members_[m] for m in positions]
        step = self.steps_[self.covering_step(names)]
        index = [step.members.index(name) for name in names]
        return step.selector.decision_scores(
            answers, passages, questions, index, **confidence_kwargs(step.selector, confidence)
        )

    def explain_row(
        self,
        answers: Sequence[str],
        passages: Sequence[Sequence[str]],
        question: str,
        members: Sequence[int],
        confidence: Sequence[Any] | None = None,
    ) -> dict[str, Any]:
        """The covering step's selector account (each feature's contribution), with the step named."""
        names = [self.members_[int(m)] for m in members]
        j = self.covering_step(names)
        step = self.steps_[j]
        index = [step.members.index(n) for n in names]
        known = confidence_kwargs(step.selector, confidence)
        account = step.selector.explain_row(answers, passages, question, index, **known)
        return {**account, "voter": KIND, "step": j, "step_members": list(step.members)}

    def describe(self) -> dict[str, Any]:
        """The fitted cascade for reports (voters.cascade_file.describe)."""
        self._check_fitted()
        return cascade_file.describe(self)

    def at_loss(self, max_loss: float) -> OperatingPoint:
        """The operating point (held out on the training records) that `max_loss` (a fraction) would choose."""
        self._check_fitted()
        return choose_point(self.operating_points_, max_loss, None)

    # -- persistence (voters.cascade_file) ------------------------------------------------------------------

    def save(self, path: str | Path, **meta: Any) -> Path:
        self._check_fitted()
        return write_document(path, cascade_file.document(self, **meta))

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Cascade:
        """A fitted cascade from a weights-file document (see `voters.load_voter`)."""
        return cascade_file.from_document(cls, document, source, members)


def recorded_blocks(
    cascade: Cascade,
    answers: Sequence[Sequence[str]],
    passages: Passages,
    questions: Sequence[str],
    confidence: Sequence[Sequence[Any]] | None,
) -> Any:
    """The candidate blocks (voters.features) of recorded answers of every member of a fitted cascade, in its
    `members_` order."""
    cascade._check_fitted()
    n_members = check_answers(answers)
    if n_members != cascade.n_members_:
        raise InputError(f"the cascade has {cascade.n_members_} members, the answers come from {n_members}")
    tensor = similarity_tensor(answers, list(cascade.metric_names_), metric_params=cascade.metric_params)
    known = confidence if cascade.uses_confidence_ else None
    return candidate_blocks(tensor, answers, passages, questions, cascade.metric_names_, known)


def step_positions(cascade: Cascade) -> list[Any]:
    """A fitted cascade's steps with their members as positions among `members_` (voters.cascade_fit.Step)."""
    cascade._check_fitted()
    return [
        ([cascade.members_.index(name) for name in step.members], step.selector, step.calibration)
        for step in cascade.steps_
    ]
