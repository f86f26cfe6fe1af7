"""`Cascade`: answer with only the members a question needs (beyond the paper), a scikit-learn estimator like
`voters.voter.Voter` and `voters.selector.AnswerSelector`.

Members run in a learned order, one step per member. After step j (the first j members of the order have
answered) the step's answer selector (an `AnswerSelector` over those members) picks the leading candidate,
and the step's calibration turns the leader's log-odds z and its margin δ over the best candidate with
another answer into P = σ(a_j + b_j·z + c_j·min(δ, 10)), the probability that the leader is right (or, by
`stop_on`, that it is the full pool's answer). The cascade stops at the first step with P ≥ the threshold,
at the last step (every member) otherwise; members after the stop never run. How the order, the
calibrations, the stop target and the threshold are learned: voters.cascade_fit.

As a voter of recorded answers (`predict(X)` on a batch, voters.batch: what `eor bench` and
cross-validation call) it replays the cascade: each question's answer is the one the cascade stops at.
`decision_scores` scores the members that answered with the selector of the first step that holds them all
(what the ensemble's vote calls after a live cascade stopped, or after `--all-members`). It tells of itself
(`describe`) and of one vote (`explain_row`, the covering step's selector's account: voters.accounts); its weights
file (`"voter": "cascade"`: each step's members, selector document and calibration, the threshold, the operating
points and the members' costs) is written and read by its codec (voters.codecs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Self

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from eor.core.answers import normalize_answer
from eor.core.correctness import CORRECTNESS
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import below
from voters.accounts import cascade_account, cascade_description
from voters.batch import Golds, Passages, VoteBatch
from voters.cascade_fit import (
    REPEATS,
    STOP_TARGETS,
    Calibration,
    CascadeFit,
    SelectorSettings,
    StepScores,
    fit_steps,
    leading,
    replay_steps,
    stop_scores,
)
from voters.cascade_points import LastStep, OperatingPoint, choose_point
from voters.choice_evidence import EARLY, LAST
from voters.estimator import VoterEstimator
from voters.features import CandidateBlocks
from voters.protocol import confidence_kwargs
from voters.selector import SELECTOR_CONSTRAINTS, AnswerSelector
from voters.spend import StepCosts, spend

KIND = "cascade"
DEFAULT_MAX_LOSS = 0.005  # a fraction: 0.5 EM points


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
        if self.stop:
            return f"stopped after {ran}: {label} {self.probability:.2f} ≥ {self.threshold:.2f}"
        return f"went on after {ran}: {label} {below(self.probability, self.threshold)}"


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


@dataclass
class CascadeStep:
    """Step j: the members that have answered once it ran (a prefix of the order), its selector and its
    calibration."""

    members: list[str]
    selector: AnswerSelector
    calibration: Calibration


class Cascade(VoterEstimator):
    """Learned cascade of answer selectors, a scikit-learn estimator (voters.estimator), with its account.

    Hyper-parameters:
        metrics, C, correctness, metric_params: those of every step's answer selector (voters.selector).
        max_loss: the largest loss of accuracy (a fraction: 0.005 is 0.5 EM points) against the full pool's
            selector on held-out training questions; the cheapest threshold that keeps it is chosen.
        budget: instead of max_loss, the most accurate threshold whose mean cost per question is at most this.
        stop_on: what a step's P predicts: "right" (its leading answer is right), "agreement" (it is the full
            pool's), or "auto" (the one whose held-out operating point is cheaper).
        folds, seed: the cross-validation of the step scores.
        members: member names in order.
        confidence: the steps' selectors take the reader's confidence as features where the batch holds it.
    """

    kind = KIND
    in_steps = True  # voters.protocol: `order_`, `decide` and `vote_scores`, step by step
    needs_passages = True
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
        confidence: bool = True,
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
        self.confidence = confidence

    def _check_params(self) -> None:
        """`_parameter_constraints`, then the correctness metric's registry and max_loss or budget."""
        super()._check_params()
        if self.correctness not in CORRECTNESS:
            raise ConfigError(f"unknown correctness metric {self.correctness!r}; available: {', '.join(CORRECTNESS)}")
        if self.max_loss is None and self.budget is None:
            raise ConfigError("a cascade needs max_loss or budget")

    # -- fitting ------------------------------------------------------------------------------------------

    def fit(self, X: VoteBatch, y: Golds | None = None, last: LastStep | None = None) -> Self:
        """Learn the cascade on batch X (voters.batch: answers, passages, question texts, and each member's
        cost per question, e.g. recorded reader seconds; the reader's confidence, features of every step's
        selector when `confidence` and X holds it) against the gold answers `y` (None: X's own). With `last`
        (voters.cascade_points.LastStep, over X's questions), the questions that no step stops answer with it:
        the threshold is chosen for that cascade."""
        self._check_params()
        X = X.with_golds(y)
        costs = X.whole.step_costs  # each member charged as run right after the one before it (voters.spend)
        if costs is None:
            raise InputError("a cascade learns from each member's cost per question: the batch has none (costs=...)")
        names = list(self.members) if self.members is not None else [f"member{m}" for m in range(X.n_members)]
        if len(names) != X.n_members:
            raise InputError(f"{len(names)} member names but answers from {X.n_members} members")
        # every step's features over the whole batch X was taken from, at X's rows (voters.batch)
        blocks, rows = X.blocks(self.metrics, self.metric_params, confidence=self.confidence)
        whole = X.whole
        labels = whole.correctness(self.correctness) >= 0.5
        settings = SelectorSettings(tuple(self.metrics), float(self.C), self.correctness, self.metric_params)
        scores = StepScores(blocks, labels, names, rows, settings, self.folds, self.seed)
        fitted = fit_steps(
            scores, costs, max_loss=self.max_loss, budget=self.budget, stop_on=self.stop_on, repeats=REPEATS, last=last
        )
        self._take_fit(fitted, names, costs.in_order(fitted.search.order, len(names))[rows], X.cost_unit)
        return self

    def _take_fit(self, fitted: CascadeFit, names: list[str], costs: np.ndarray, unit: str) -> None:
        """Keep what `fit_steps` (voters.cascade_fit) learned for the members `names` as the cascade's fitted
        attributes: the stop target, the order, each step, the threshold and the operating points held out on
        the training questions; and each member's mean cost over the training questions' `costs` (in `unit`, each
        charged as run in the cascade's order)."""
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
        self.held_out_ = fitted.held_out  # each threshold's held-out answers (not saved: for training's reports)
        self.chosen_point_ = fitted.chosen
        self.full_accuracy_ = fitted.held_out.full_accuracy
        self.full_cost_ = fitted.held_out.full_cost
        self.cost_unit_ = unit
        self.member_costs_ = {name: float(value) for name, value in zip(names, costs.mean(axis=0), strict=True)}
        self.train_score_ = None  # eor.commands.train_command replays the cascade on the training records
        self.metadata_ = dict(self.metadata_)

    # -- the live cascade -----------------------------------------------------------------------------------

    @property
    def order(self) -> list[str]:
        self._check_fitted()
        return list(self.order_)

    @property
    def uses_confidence_(self) -> bool:
        """Whether its step selectors have the reader's confidence among their features."""
        return any(step.selector.uses_confidence_ for step in self.steps_)

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

    def replay(self, X: VoteBatch, threshold: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The cascade over recorded answers of every member (in `members_` order) of batch X: (chosen
        member's position, the step it stopped at) per question, at the fitted threshold or `threshold`."""
        if not len(X):
            return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        blocks, rows = self._blocks(X)
        return replay_steps(blocks, step_positions(self), self.threshold_ if threshold is None else threshold, rows)

    def vote_scores(self, X: VoteBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Over recorded answers (as `replay`), per question: the log-odds of the step it stops at over every
        member (−inf for the members it did not run), its group for P(right) (voters.right: EARLY, or LAST
        where it ran every step) and the chosen member's position."""
        if not len(X):
            return np.zeros((0, self.n_members_)), np.zeros(0, dtype=str), np.zeros(0, dtype=int)
        blocks, rows = self._blocks(X)
        scores, stops, picks = stop_scores(blocks, step_positions(self), self.threshold_, rows)
        return scores, np.where(stops == len(self.steps_) - 1, LAST, EARLY), picks

    def _blocks(self, X: VoteBatch) -> tuple[CandidateBlocks, np.ndarray]:
        """The candidate blocks of X's whole batch under the cascade's metrics, and X's rows (voters.batch)."""
        self._check_fitted()
        if X.n_members != self.n_members_:
            raise InputError(f"the cascade has {self.n_members_} members, the answers come from {X.n_members}")
        return X.blocks(self.metric_names_, self.metric_params, confidence=self.uses_confidence_)

    def decision_function(self, X: VoteBatch) -> np.ndarray:
        """The log-odds (Q, M) of the step each question stops at (−inf for the members it did not run)."""
        return self.vote_scores(X)[0]

    def predict(self, X: VoteBatch) -> np.ndarray:
        """The position of the member whose answer the cascade stops at, per question."""
        return self.replay(X)[0]

    def spent(self, costs: np.ndarray | StepCosts, stops: np.ndarray) -> np.ndarray:
        """Per question, the cost of the members of the steps up to the one it stopped at; costs (R, M) per question
        and member in `members_` order, or each run right after another (voters.spend: in the cascade's order)."""
        order = [self.members_.index(name) for name in self.order_]
        matrix = costs.in_order(order, len(self.members_)) if isinstance(costs, StepCosts) else costs
        return spend(matrix, order, stops)

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

    def at_loss(self, max_loss: float) -> OperatingPoint:
        """The operating point (held out on the training records) that `max_loss` (a fraction) would choose."""
        self._check_fitted()
        return choose_point(self.operating_points_, max_loss, None)

    def explain_row(
        self,
        answers: Sequence[str],
        passages: Sequence[Sequence[str]],
        question: str,
        members: Sequence[int],
        confidence: Sequence[Any] | None = None,
    ) -> dict[str, Any]:
        """The covering step's selector account (each feature's contribution), with the step named."""
        return cascade_account(self, answers, passages, question, members, confidence)

    def describe(self) -> dict[str, Any]:
        """The fitted cascade for reports: its order, stop rule, steps, costs and operating points."""
        self._check_fitted()
        return cascade_description(self)


def step_positions(cascade: Cascade) -> list[Any]:
    """A fitted cascade's steps with their members as positions among `members_` (voters.cascade_fit.Step)."""
    cascade._check_fitted()
    return [
        ([cascade.members_.index(name) for name in step.members], step.selector, step.calibration)
        for step in cascade.steps_
    ]
