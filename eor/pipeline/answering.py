"""The ways an ensemble answers a batch, one small interface (`answer(items, names, timeout, strict)` → one
`Result` per question), chosen by `answering_for` from what the voter can do, never from its name:

- `EveryMember`: every member on the whole batch; retrieval per member (batched per source), one call to the
  reading stage, one vote. What `eor run` records, and any voter can take.
- `Lazily`: question by question, members cheapest first, stopping once the members still pending cannot
  change the vote's answer (a voter whose pooling admits a bound, voters.lazy; the answer is the full vote's).
- `InSteps`: question by question in the voter's own order, stopping when its rule says the leading answer
  is likely good enough (a voter that `decide`s step by step: voters.cascade).

Each strategy sees what it needs (the members' runner, eor.pipeline.running, and the vote stage), never the
ensemble. Each reports what each stage took (`Result.stages`, `Result.timings`) and leaves a failed member out
of the vote with its reason (eor.pipeline.stages.failures); a question no member answered raises.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Protocol

from eor.core.data import Question
from eor.core.results import MemberOutput, Result
from eor.pipeline.running import Clock, MemberRunner
from eor.pipeline.stages.failures import Failures, no_member_left
from eor.pipeline.stages.generation import GenerationStats, metering
from eor.pipeline.stages.voting import Decision, VoteStage, ballots
from voters.choice_evidence import EARLY, LAST


class Answering(Protocol):
    def answer(self, items: list[Question], names: list[str], timeout: float | None, strict: bool) -> list[Result]:
        """One Result per question of `items`, over the members `names` (in the pool's order)."""
        ...


def answering_for(runner: MemberRunner, voting: VoteStage, *, lazy: bool) -> Answering:
    """How to answer with `runner`'s members and `voting`'s voter. `lazy`: with the fewest members the voter
    allows (its steps, else a bound); else every member (the subset asked for is `voting.check_members`')."""
    if lazy and voting.in_steps:
        return InSteps(runner, voting)
    if lazy and voting.lazy:
        return Lazily(runner, voting)
    return EveryMember(runner, voting)


class EveryMember:
    def __init__(self, runner: MemberRunner, voting: VoteStage) -> None:
        self.runner = runner
        self.voting = voting

    def answer(self, items: list[Question], names: list[str], timeout: float | None, strict: bool) -> list[Result]:
        runner = self.runner
        texts = [item.question for item in items]
        failures = Failures.for_batch(len(items))
        clock = Clock()
        with metering() as usage:
            with clock("retrieval"):
                documents, spent = runner.retrieve(names, items, timeout, strict, failures)
            with clock("generation"):
                outputs = runner.read(documents, texts, spent, failures, strict)
            for i, item in enumerate(items):
                if not outputs[i]:
                    raise no_member_left(item, failures[i])
            with clock("voting"):
                decisions = self.voting.vote([ballots(output) for output in outputs], texts)
        runner.learn_costs(outputs)
        stages = report_stages(clock, usage, len(items), members=len(names))
        return [
            build_result(item, outputs[i], decision, failures[i], [], stages)
            for i, (item, decision) in enumerate(zip(items, decisions, strict=True))
        ]


class Lazily:
    def __init__(self, runner: MemberRunner, voting: VoteStage) -> None:
        self.runner = runner
        self.voting = voting

    def answer(self, items: list[Question], names: list[str], timeout: float | None, strict: bool) -> list[Result]:
        return [self._one(item, names, timeout, strict) for item in items]

    def _one(self, item: Question, names: list[str], timeout: float | None, strict: bool) -> Result:
        runner, voting = self.runner, self.voting
        needed = set(voting.needed())
        queue = sorted((name for name in names if name in needed), key=runner.cost)
        failed: dict[str, str] = {}
        outputs: dict[str, MemberOutput] = {}
        leader = None
        clock = Clock()
        with metering() as usage:
            for position, name in enumerate(queue):
                runner.run_one(name, item, timeout, strict, failed, outputs, clock)
                if name in outputs:
                    with clock("voting"):
                        leader = voting.settled(ballots(outputs), queue[position + 1 :])
                    if leader is not None:
                        break
            if not outputs:
                raise no_member_left(item, failed)
            with clock("voting"):
                decision = voting.vote([ballots(outputs)], [item.question])[0]
        runner.learn_costs([outputs])
        outputs = {name: outputs[name] for name in names if name in outputs}  # the pool's order, as in a full run
        member = leader if leader is not None else decision.member  # the leader has the full vote's answer
        skipped = [name for name in names if name not in outputs and name not in failed]
        stages = report_stages(clock, usage, 1, members=len(outputs) + len(failed), skipped=skipped)
        return build_result(item, outputs, dataclasses.replace(decision, member=member), failed, skipped, stages)


class InSteps:
    def __init__(self, runner: MemberRunner, voting: VoteStage) -> None:
        self.runner = runner
        self.voting = voting
        self.voter = voting.voter

    def answer(self, items: list[Question], names: list[str], timeout: float | None, strict: bool) -> list[Result]:
        return [self._one(item, timeout, strict) for item in items]

    def _one(self, item: Question, timeout: float | None, strict: bool) -> Result:
        """The voter's members one step at a time until its stopping rule says the leading answer is likely
        good enough; the members after that step never retrieve nor prompt."""
        runner = self.runner
        failed: dict[str, str] = {}
        outputs: dict[str, MemberOutput] = {}
        decision = None
        clock = Clock()
        with metering() as usage:
            for step, name in enumerate(self.voter.order_):
                runner.run_one(name, item, timeout, strict, failed, outputs, clock)
                if outputs:
                    with clock("voting"):
                        cast = ballots(outputs)
                        answers = {n: b.answer for n, b in cast.items()}
                        found = {n: b.passages for n, b in cast.items()}
                        known = {n: b.confidence for n, b in cast.items()}
                        decision = self.voter.decide(step, answers, found, item.question, known)
                    if decision.stop:
                        break
        if decision is None:
            raise no_member_left(item, failed)
        runner.learn_costs([outputs])
        report = _steps_report(list(self.voter.order_), decision, outputs, failed)
        outputs = {name: outputs[name] for name in self.voting.members if name in outputs}
        stages = report_stages(clock, usage, 1, members=len(report["ran"]), skipped=report["skipped"])
        group = LAST if decision.last else EARLY
        fitted = self.voting.probability(decision.scores, ballots(outputs), decision.member, item.question, group)
        probability, fit, unanswerable = fitted or (None, None, None)
        if fitted is None and decision.event == "right":  # no P(right) model: the step's, calibrated on it
            probability = decision.probability
        vote = Decision(decision.member, dict(decision.scores), probability, fit, unanswerable)
        result = build_result(item, outputs, vote, failed, report["skipped"], stages)
        result.cascade = report
        return result


def _steps_report(
    order: list[str], decision: Any, outputs: dict[str, MemberOutput], failed: dict[str, str]
) -> dict[str, Any]:
    """`Result.cascade`: the members the steps ran (failed ones included) and skipped, and why they stopped."""
    ran = [name for name in order if name in outputs or name in failed]
    return {
        "ran": ran,
        "skipped": [name for name in order if name not in ran],
        "stopped_after": order[decision.step],
        "probability": round(decision.probability, 4),
        "threshold": None if math.isinf(decision.threshold) else round(decision.threshold, 4),
        "reason": decision.reason(),
    }


def build_result(
    item: Question,
    outputs: dict[str, MemberOutput],
    decision: Decision,
    failed: dict[str, str],
    skipped: list[str],
    stages: dict[str, Any],
) -> Result:
    """The question's Result: the vote's scores on the outputs, the chosen member's answer and its P(right),
    timings."""
    for name, output in outputs.items():
        output.score = decision.scores.get(name)
    timings = {stage: stages[stage]["seconds"] for stage in ("retrieval", "generation", "voting")}
    timings["total"] = round(sum(timings.values()), 4)
    return Result(
        id=item.id,
        question=item.question,
        answer=outputs[decision.member].answer,
        member=decision.member,
        members=outputs,
        timings=timings,
        answers=item.answers,
        extra=item.extra,
        degraded=failed,
        skipped=skipped,
        stages=stages,
        probability=decision.probability,
        probability_fit=decision.fit,
        unanswerable=decision.unanswerable,
    )


def report_stages(
    clock: Clock, usage: GenerationStats, questions: int, members: int, skipped: Sequence[str] = ()
) -> dict[str, Any]:
    """What `Result.stages` reports, per question of the batch: wall seconds per stage (retrieval includes the
    generations of PK and @CP), the generation stage's work (prompts, cache hits, tokens and seconds of the
    reader, wherever it was asked), and how many members ran or were skipped."""
    share = usage.share(questions)
    return {
        "retrieval": {"seconds": round(clock.seconds["retrieval"] / questions, 4)},
        "generation": {"seconds": round(clock.seconds["generation"] / questions, 4), "reader": share},
        "voting": {
            "seconds": round(clock.seconds["voting"] / questions, 4),
            "members_run": members,
            "members_skipped": len(skipped),
        },
    }
