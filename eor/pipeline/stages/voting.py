"""The vote stage: the voter's decision over the members that answered, the probability that it is right
(where the voter's weights file holds one, voters.right), and (for lazy voting) whether the members still
pending could change it.

Failure policy: a question is voted over the members it has (a subset keeps those members' weights); it fails
only when no member is left. Questions with the same voting members go through the voter together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eor.core.errors import ConfigError, InputError
from eor.core.results import MemberOutput, Result
from eor.pipeline.abstention import abstention
from voters import choose
from voters.choice_evidence import ALL, evidence
from voters.lazy import lazy_decision, needed_members, supports_lazy_voting
from voters.protocol import confidence_kwargs
from voters.relevance import Relevance
from voters.right import RightModel


@dataclass(frozen=True)
class Ballot:
    """One member's entry in a question's vote: its answer, the texts of its passages, and the reader's
    confidence in the answer (an eor.core.confidence summary; None when unknown)."""

    answer: str
    passages: list[str]
    confidence: dict[str, Any] | None = None
    retrieved: list[str] | None = None  # the passages found in a corpus (None: not known)


def ballots(outputs: Mapping[str, MemberOutput]) -> dict[str, Ballot]:
    """The ballots of a question's member outputs (what answered; a run's record or a fresh `Result`)."""
    return {
        name: Ballot(output.answer, output.passage_texts, output.confidence, output.retrieved_texts)
        for name, output in outputs.items()
    }


@dataclass(frozen=True)
class Decision:
    """The chosen member, every voting member's decision score (None when its weight drops it), the
    probability that the chosen answer is right (None when the voter has no P(right), voters.right) and the
    P(right) fit that gave it (voters.choice_evidence.FITS; None: a cascade step's own calibration)."""

    member: str
    scores: dict[str, float | None]
    probability: float | None = None
    fit: str | None = None
    unanswerable: float | None = None  # P(unanswerable) of the choice (voters.right.UnanswerableFit)


class VoteStage:
    """`vote(ballots, questions)`: a Decision per question; `probability(...)`: P(right) of a choice;
    `conclude(result, risk)`: the result declined below the threshold for `risk`; `settled(...)`: can pending
    members still change the chosen answer (voters.lazy)? A pool answering with a judge voter has a stage of its
    own kind (eor.pipeline.stages.judged), which the ensemble uses the same way."""

    def __init__(
        self, voter: Any, members: Sequence[str], right: RightModel | None, outside: str | None = None
    ) -> None:
        """`right`: the voter's P(right) (voters.right `RightModel.from_voter`); `outside`: why its thresholds do
        not hold for this pool (eor.pipeline.pool.outside_guarantee), said with every abstention decision."""
        self.voter = voter
        self.members = list(members)
        self.outside = outside
        self.right = right
        # a cascade's P(right) is calibrated for the answer of the step it stops at (voters.right), not for a
        # vote over every member: such a vote has none
        self.in_steps = bool(voter.in_steps)  # voters.protocol: it answers step by step

    def probability(
        self,
        scores: Mapping[str, float | None],
        ballots: Mapping[str, Ballot],
        member: str,
        question: str,
        group: str = ALL,
        relevance: Relevance | None = None,
    ) -> tuple[float, str, float | None] | None:
        """(P(right) of `member`'s answer to `question`, chosen by decision `scores` (by member; None: dropped)
        over `ballots`, in `group` (voters.choice_evidence: ALL, or a cascade's EARLY/LAST), the fit that scored
        it, and P(unanswerable) where the voter has one); None when the voter has no P(right). InputError when
        the answers lack what every fit of it needs. `relevance`: the retrieved passages' relevance to the question
        (voters.relevance), when already computed for a batch."""
        if self.right is None:
            return None
        names = list(scores)
        values = np.array([[-np.inf if scores[n] is None else scores[n] for n in names]], dtype=float)
        known = all(ballots[n].retrieved is not None for n in names)
        retrieved = [[list(ballots[n].retrieved or []) for n in names]] if known else None
        found = evidence(
            values,
            [[ballots[n].answer for n in names]],
            [[ballots[n].passages for n in names]],
            [[ballots[n].confidence for n in names]],
            group,
            [names.index(member)],
            retrieved,
            [relevance or Relevance.of([question], retrieved)[0]]
            if retrieved is not None and self.right.reads_retrieval
            else None,
        )
        fit = self.right.fit_names(found)
        return float(self.right.probability(found, fit)[0]), str(fit[0]), self.right.unanswerable_of(found)

    def vote(self, ballots: Sequence[Mapping[str, Ballot]], questions: Sequence[str]) -> list[Decision]:
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, entry in enumerate(ballots):
            if not entry:
                raise ConfigError("a question reached the vote with no member")
            groups.setdefault(tuple(entry), []).append(i)
        decisions: list[Decision | None] = [None] * len(ballots)
        for voting, index in groups.items():
            answers = [[ballots[i][name].answer for name in voting] for i in index]
            passages = [[ballots[i][name].passages for name in voting] for i in index]
            texts = [questions[i] for i in index]
            subset = None if list(voting) == self.members else [self.members.index(name) for name in voting]
            known = confidence_kwargs(self.voter, [[ballots[i][name].confidence for name in voting] for i in index])
            scores = np.asarray(self.voter.decision_scores(answers, passages, texts, subset, **known), dtype=float)
            relevance = self._relevance(texts, [ballots[i] for i in index], voting)
            for j, (row, i, best) in enumerate(zip(scores, index, choose(scores), strict=True)):
                kept = {name: float(row[m]) if math.isfinite(row[m]) else None for m, name in enumerate(voting)}
                member = voting[int(best)]
                found = (
                    None
                    if self.in_steps
                    else self.probability(
                        kept, ballots[i], member, questions[i], ALL, relevance[j] if relevance else None
                    )
                )
                decisions[i] = Decision(member, kept, *(found or (None, None, None)))
        return decisions  # type: ignore[return-value]

    def _relevance(
        self, texts: list[str], entries: list[Mapping[str, Ballot]], voting: tuple[str, ...]
    ) -> list[Relevance] | None:
        """The relevance of each question's retrieved passages, in one encoder call for the batch, where the voter's
        P(right) reads it (None otherwise, or when a ballot's retrieved passages are unknown)."""
        if self.in_steps or self.right is None or not self.right.reads_retrieval:
            return None
        if any(entry[name].retrieved is None for entry in entries for name in voting):
            return None
        return Relevance.of(texts, [[list(entry[name].retrieved or []) for name in voting] for entry in entries])

    def check_members(self, names: Sequence[str], members: Sequence[str] | None, lazy: bool) -> None:
        """InputError where the voter cannot vote over the subset `members` asked for (`names`, in the pool's
        order; None: every member): a cascade answering in its steps chooses the members itself."""
        if lazy and self.in_steps and members is not None:
            raise InputError(
                "this pool answers with a cascade, which chooses the members each question needs: ask without "
                "`members`, or run every member (`eor ask/serve --all-members`) to vote over a subset"
            )

    # -- abstention (eor.pipeline.abstention) -------------------------------------------------------------------------

    def check_risk(self, risk: float | None, every_member: bool = False) -> float | None:
        """`risk` (None: answer every question); InputError when it is outside (0, 1), below the voter's lowest
        error rate, the voter holds no thresholds, or it is a cascade asked to vote over `every_member`."""
        if risk is not None:
            abstention(None if self.right is None else self.right.fit(), 1.0, risk, self._source())
            if every_member and self.in_steps:
                raise InputError(
                    "a risk needs the cascade to choose the members (its P(right) is calibrated for the answers "
                    "it stops at): ask without --all-members / members"
                )
        return risk

    def conclude(self, result: Result, risk: float | None) -> Result:
        """The question's last word, once the answering strategy voted: `result` declined at `risk` where its
        P(right) is below the threshold the weights file holds for the largest error rate of its grid not above
        `risk` (`answer` None, `abstention` says why); at None, as it is."""
        if risk is None:
            return result
        probability = math.nan if result.probability is None else result.probability
        fit = None if self.right is None else self.right.fit(result.probability_fit)
        verdict = abstention(fit, probability, risk, self._source(), result.unanswerable, self.outside)
        result.abstention = verdict.to_dict()
        if verdict.abstained:
            result.answer = None
        return result

    def _source(self) -> str:
        source = self.voter.source_
        return f"the weights file {source}" if source else "this voter (no weights file)"

    # -- lazy voting -------------------------------------------------------------------------------------------

    @property
    def lazy(self) -> bool:
        """Whether pending members can be bounded (voters.lazy.supports_lazy_voting), and the voter gives no
        P(right): the probability needs the margin over every member's answer, so such a voter runs them all."""

        return supports_lazy_voting(self.voter) and self.right is None

    def needed(self) -> list[str]:
        """The members whose answers can matter (those not dropped by their weight), in the pool's order."""

        return [self.members[m] for m in needed_members(self.voter)]

    def settled(self, ballots: Mapping[str, Ballot], pending: Sequence[str]) -> str | None:
        """The member leading with the full vote's answer when no `pending` member can change that answer,
        whatever it answers; else None."""

        position = {name: m for m, name in enumerate(self.members)}
        state = lazy_decision(
            self.voter,
            {position[name]: ballot.answer for name, ballot in ballots.items()},
            {position[name]: ballot.passages for name, ballot in ballots.items()},
            [position[name] for name in pending],
        )
        return self.members[state.leader] if state.stop and state.leader is not None else None
