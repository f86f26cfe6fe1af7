"""The ensemble: members built from the paper's notation over named sources, one reader, one voter, and a
thin coordinator of its stages (eor.pipeline.stages): retrieval (batched per source), reading (each member's answer
prompt through the one generation stage, with the shared reader and the generation cache) and the vote.
How a batch is answered (every member, lazily, or in the voter's steps) is eor.pipeline.answering's, chosen from what
the voter can do; what a config must hold is checked first (eor.pipeline.validation).

Failure isolation: a member whose retrieval or generation raises, or whose retrieval runs past
`member_timeout`, is left out of that question's vote and named in `Result.degraded` (with the reason,
eor.pipeline.stages.failures); the vote then runs over the remaining members with their own weights. A question fails
only when no member is left. `strict=True` raises at the first failure instead (for runs whose records must
hold every member).

Lazy voting (`Ensemble.answer`, `eor ask`, `eor serve`): members run one at a time, cheapest first (by the
seconds this ensemble measured; before that, the cost model's expectation, eor.runs.costs.expected_seconds), and
stop as soon as no pending member can change the chosen answer whatever it answers (voters.lazy); members
whose weight drops them never run. The answer is the full vote's. `answer_batch` (and so `eor run`, whose
records feed training) runs every member unless asked otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eor.core.config import EnsembleConfig, load_config, shipped_or_path
from eor.core.data import Question, make_question
from eor.core.errors import ConfigError, InputError
from eor.core.prompts import templates_for
from eor.core.results import MemberOutput, Record, Result
from eor.pipeline import validation
from eor.pipeline.answering import answering_for
from eor.pipeline.explanation import explain_vote
from eor.pipeline.jobs import batches
from eor.pipeline.members import member_templates, source_pool
from eor.pipeline.pool import outside_guarantee, pool_identity, warn_if_foreign
from eor.pipeline.running import MemberRunner, RunningCosts
from eor.pipeline.stages.failures import LeftOut, warn_degraded
from eor.pipeline.stages.generation import GenerationStage, GenerationStats
from eor.pipeline.stages.judged import judged_by, vote_stage
from eor.pipeline.stages.reading import ReadingStage
from eor.pipeline.stages.retrieval import MemberTimeoutError, RetrievalStage
from eor.pipeline.validation import check_config_risk, check_timeout
from eor.readers import build_reader
from eor.runs.costs import expected_seconds
from eor.runs.generation_cache import CacheSetting, open_cache
from voters.loading import choose_voter
from voters.protocol import check_voter
from voters.right import RightModel

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = ["Ensemble", "MemberOutput", "MemberTimeoutError", "Result", "config_voter"]

log = logging.getLogger(__name__)


class Ensemble:
    """Members built from the paper's notation over named sources, one reader, one voter."""

    def __init__(
        self,
        config: EnsembleConfig,
        *,
        reader: Any = None,
        voter: Any = None,
        cache: CacheSetting = True,
        retrieval_config: RunnableConfig | None = None,
        validated: bool = False,
    ) -> None:
        """cache: where generations are cached (eor.runs.generation_cache): True, the default file (or none when
        EOR_GENERATION_CACHE=off); a file path; a GenerationCache; False or None: no cache. A reader without
        an `identity` is never cached. retrieval_config: a LangChain `RunnableConfig` (e.g. `{"callbacks":
        [handler]}`) that every member's retrieval runs under (eor.pipeline.stages.retrieval). validated: the
        caller's door validated `config` already (eor.pipeline.validation); else it is validated here."""

        if not validated:  # the door: before loading any model, a mistake fails at once
            validation.validate(config)
        self.config = config
        self.templates = templates_for(config)
        self.prompts = member_templates(config)  # each member's answer prompts (its variant's, if it names one)
        self.cache = open_cache(cache)  # before loading any model: an unusable cache file fails at once
        # the weights files, each read once, before the reader loads: the voter's (with `judge.weights`, the judge
        # voter, or the cascade trained to end with it, carrying it: eor.pipeline.stages.judged)
        self.voter = check_voter(voter if voter is not None else config_voter(config))
        # the judge with the last word, if any, checked against the config's judge: before the reader loads
        judged = judged_by(config, self.voter)
        right = RightModel.from_voter(self.voter)  # the voter's P(right), built once
        self.reader = reader if reader is not None else build_reader(config.reader)
        # Every generation (answers, PK documents, @CP summaries) goes through this one stage.
        self.generation = GenerationStage(self.reader, self.cache)
        self.pool = source_pool(config, self.generation, templates=self.templates)
        self.retrievers = {name: self.pool.build(name) for name in config.members}
        self.retrieval = RetrievalStage(self.retrievers, retrieval_config)
        self.reading = ReadingStage(self.generation, self.prompts, config.max_document_words)
        judge = self.voter.judge_  # the judge a cascade ends with
        outside = _check_pool([self.voter, *([judge] if judge is not None else [])], config, self.reader)
        # built once: it reads the voter's P(right) model, and says where its guarantee does not hold; with a
        # judge voter, the stage whose last word is the judge's
        self.voting = vote_stage(
            config, self.voter, judged, right, (outside[0], outside[-1]), self.generation, self.templates
        )
        # what the answering strategies run members with (eor.pipeline.running): each member's expected seconds
        # as this ensemble measures them, else from the voter's training records or the member's notation
        self.runner = MemberRunner(
            self.retrieval, self.reading, RunningCosts(lambda name: expected_seconds(name, self.voter))
        )
        check_config_risk(self, config.voter.risk)

    @classmethod
    def from_config(
        cls,
        path: str | Path | EnsembleConfig,
        weights: str | Path | None = None,
        *,
        validated: bool = False,
        **kwargs: Any,
    ) -> Ensemble:
        """The ensemble of a config (a file, or one loaded); `weights`: the voter's weights file, in place of
        the config's `voter.weights` (see `config_voter`); `validated` as for `Ensemble`."""
        config = path if isinstance(path, EnsembleConfig) else load_config(path)
        if not validated:  # the door, before the weights file is read
            validation.validate(config)
        if weights is not None:
            kwargs.setdefault("voter", config_voter(config, weights))
        return cls(config, validated=True, **kwargs)

    @property
    def members(self) -> list[str]:
        """The member names, in the config's (and the voter's) order."""
        return list(self.config.members)

    def select(self, members: Sequence[str] | None) -> list[str]:
        """The members to run, in the ensemble's order: all of them for None, else the named subset."""
        return self.members if members is None else _subset(self.members, members)

    def check_risk(self, risk: float | None, *, every_member: bool = False) -> float | None:
        """`risk` checked against the thresholds of what answers (the voter's P(right), VoteStage.check_risk;
        with a judge voter, its fits' too): InputError when they cannot decline at it."""
        return self.voting.check_risk(risk, every_member=every_member)

    def answer(
        self,
        question: str | Question,
        *,
        members: Sequence[str] | None = None,
        member_timeout: float | None = None,
        strict: bool = False,
        lazy: bool = True,
        risk: float | None = None,
    ) -> Result:
        """Answer one question (see `answer_batch`); lazily by default."""
        return self.answer_batch(
            [question], members=members, member_timeout=member_timeout, strict=strict, lazy=lazy, risk=risk
        )[0]

    def answer_records(
        self, questions: Sequence[Question], batch_size: int, left_out: LeftOut | None = None
    ) -> Iterator[tuple[list[Record], GenerationStats]]:
        """`eor run`'s answers (in this process or on a Ray worker): the records of `questions`, `batch_size` at
        a time (eor.pipeline.jobs.batches, the one batching loop), each batch with what the generation stage did
        for it. A question no member answered is left out (`left_out`, eor.pipeline.stages.failures.LeftOut: its
        reason kept there), the others recorded; its stop is raised after the batch it came in is yielded."""
        left_out = LeftOut() if left_out is None else left_out
        for batch in batches(questions, batch_size):
            before = dataclasses.replace(self.generation.stats)
            results = left_out.answered(batch, self.answer_batch)
            yield [result.to_record() for result in results], self.generation.stats.since(before)
            if left_out.stop is not None:
                raise left_out.stop

    def answer_batch(
        self,
        questions: Sequence[str | Question],
        *,
        members: Sequence[str] | None = None,
        member_timeout: float | None = None,
        strict: bool = False,
        lazy: bool = False,
        risk: float | None = None,
    ) -> list[Result]:
        """Answer a batch: retrieval per member (batched per source), one generation call, one vote.

        members: run and vote over only these members (a subset of `self.members`; their weights are kept).
        member_timeout: seconds per question that a member's retrieval may take; a member that runs late
            is left out of the vote (`Result.degraded`), as is one whose retrieval or generation raises.
        strict: raise on a member's failure instead of leaving it out.
        lazy: answer question by question, running members cheapest first and stopping when the rest cannot
            change the answer (the full vote's answer; members not run are in `Result.skipped`). Voters that
            cannot be bounded (see voters.lazy), or that give P(right), and the judge voter run every member.
        risk: decline where P(right) is below the weights file's threshold for this error rate (VoteStage.conclude;
            the config's `voter.risk` is what `eor ask` and `eor serve` pass when none is asked for).
        """
        items = [q if isinstance(q, Question) else make_question(q) for q in questions]
        if not items:
            return []
        names = self.select(members)
        timeout = check_timeout(member_timeout)
        risk = self.check_risk(risk, every_member=not (lazy and self.voting.in_steps))
        self.voting.check_members(names, members, lazy)
        how = answering_for(self.runner, self.voting, lazy=lazy)
        results = how.answer(items, names, timeout, strict)
        warn_degraded(results)
        return [self.voting.conclude(result, risk) for result in results]

    def cost(self, name: str) -> float:
        """A member's expected seconds per question: measured by this ensemble when it has run, else its cost
        on the voter's training records, else a prior from its notation (eor.runs.costs.expected_seconds)."""
        return self.runner.cost(name)

    def explain(self, result: Result) -> dict[str, Any]:
        """Why the vote chose its answer (eor.pipeline.explanation.explain_vote); with a judge voter, its account
        too (`judge`: the candidates it chose among, eor.pipeline.stages.judged)."""
        account = explain_vote(self.voting.voter, self.members, result)  # the vote the members' answers ran through
        return account if result.judged is None else {**account, "judge": result.judged}


def _subset(pool: list[str], members: Sequence[str]) -> list[str]:
    """The named members of `pool`, in the pool's order; InputError for anything else."""
    available = ", ".join(pool)
    if isinstance(members, str) or any(not isinstance(name, str) for name in members):
        raise InputError(f"members must be a list of member names; available: {available}")
    requested = list(members)
    if not requested:
        raise InputError(f"members: name at least one member; available: {available}")
    unknown = [name for name in dict.fromkeys(requested) if name not in pool]
    if unknown:
        raise InputError(f"unknown member(s) {', '.join(map(repr, unknown))}; available: {available}")
    repeated = [name for name in dict.fromkeys(requested) if requested.count(name) > 1]
    if repeated:
        raise InputError(f"members: {', '.join(map(repr, repeated))} named more than once")
    return [name for name in pool if name in requested]


def _check_pool(voters: list[Any], config: EnsembleConfig, reader: Any) -> list[str | None]:
    """Warn when a voter was trained on records of another reader or corpus (eor.pipeline.pool); give back, for
    each, why its P(right) thresholds do not hold for this pool (None: they do, or nothing says otherwise)."""
    recorded = [isinstance(voter.metadata_.get("pool"), dict) for voter in voters]
    if not any(recorded):
        return [None] * len(voters)
    identity = pool_identity(config, reader)
    for voter, known in zip(voters, recorded, strict=True):
        if known:
            warn_if_foreign(voter, identity, f"the {voter.kind} weights")
    return [outside_guarantee(voter, identity) for voter in voters]


def config_voter(config: EnsembleConfig, weights: str | Path | None = None) -> Any:
    """The voter of a config (voters.loading.choose_voter): that of `weights`, else of the config's `voter.weights`,
    else uniform weights over its members with its `voter:` section's metrics, pooling and threshold; where its
    `judge.weights` names a judge voter, that judge after every member, or with `judge.after: cascade` the cascade
    trained with it as its last step, carrying it. `Ensemble`, `eor ask` and `eor serve` answer with it."""
    judge = config.judge
    path = None if judge is None or judge.weights is None else config.resolve_path(judge.weights)
    if path is not None and not path.is_file():
        raise ConfigError(f"judge.weights: no file {path}")
    return choose_voter(
        shipped_or_path(weights) if weights is not None else config.default_weights(),
        config.members,
        judge=path,
        after="members" if judge is None else judge.after,
        **config.voter.uniform(),
    )
