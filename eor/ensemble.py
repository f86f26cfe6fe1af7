"""The ensemble: a thin coordinator of three stages (eor.stages). Every member retrieves (the retrieval stage,
batched per source), one generation stage answers every prompt through the shared reader and the generation
cache, and the vote stage picks the best-supported answer.

Failure isolation: a member whose retrieval or generation raises, or whose retrieval runs past
`member_timeout`, is left out of that question's vote and named in `Result.degraded` (with the reason);
the vote then runs over the remaining members with their own weights. A question fails only when no
member is left. `strict=True` raises at the first failure instead (for runs whose records must hold
every member).

Lazy voting (`Ensemble.answer`, `eor ask`, `eor serve`): members run one at a time, cheapest first (by the
seconds this ensemble measured, a prior from the notation before that), and stop as soon as no pending member
can change the chosen answer whatever it answers (voters.lazy); members whose weight drops them never run. The
answer is the full vote's. `answer_batch` (and so `eor run`, whose records feed training) runs every member
unless asked otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eor.config import EnsembleConfig, load_config
from eor.data import Question, make_question
from eor.errors import ConfigError, ContextOverflowError, EorError, InputError, ReaderError, RetrieverError
from eor.generation_cache import CacheSetting, open_cache
from eor.members import member_templates, source_pool
from eor.pool import pool_identity, warn_if_foreign
from eor.prompts import clean_answer, templates_for
from eor.readers import build_reader
from eor.results import MemberOutput, Record, Result
from eor.stages.generation import Completion, GenerationStage, GenerationStats, metering
from eor.stages.retrieval import MemberTimeoutError, RetrievalStage
from eor.stages.voting import Decision, VoteStage, ballots
from retrievers import notation
from retrievers.registry import source_names
from voters import Voter, load_voter
from voters.pooling import POOLINGS
from voters.protocol import confidence_kwargs
from voters.right import EARLY, LAST
from voters.similarity import available_metrics

__all__ = ["Ensemble", "MemberOutput", "MemberTimeoutError", "Result", "check_member_names", "check_voter_config"]

log = logging.getLogger(__name__)

#: longest failure reason kept in `Result.degraded` (foreign exceptions can carry long messages).
MAX_REASON_CHARS = 300
#: weight of the latest measurement in a member's running cost (exponential moving average).
COST_SMOOTHING = 0.3
MAX_CUTS = 8  # halvings of a document that is over the reader's context before its member fails


class Ensemble:
    """Members built from the paper's notation over named sources, one reader, one voter."""

    def __init__(
        self,
        config: EnsembleConfig,
        *,
        reader: Any = None,
        voter: Any = None,
        cache: CacheSetting = True,
        retrieval_config: dict[str, Any] | None = None,
    ) -> None:
        """cache: where generations are cached (eor.generation_cache): True, the default file (or none when
        EOR_GENERATION_CACHE=off); a file path; a GenerationCache; False or None: no cache. A reader without
        an `identity` is never cached. retrieval_config: a LangChain `RunnableConfig` (e.g. `{"callbacks":
        [handler]}`) that every member's retrieval runs under (eor.stages.retrieval)."""

        self.config = config
        self.templates = templates_for(config)
        check_member_names(config)  # before loading any model: a typo fails at once
        self.prompts = member_templates(config)  # each member's answer prompts (its variant's, if it names one)
        check_voter_config(config)
        self.cache = open_cache(cache)  # before loading any model: an unusable cache file fails at once
        self.reader = reader if reader is not None else build_reader(config.reader)
        # Every generation (answers, PK documents, @CP summaries) goes through this one stage.
        self.generation = GenerationStage(self.reader, self.cache)
        self.pool = source_pool(config, self.generation, templates=self.templates)
        self.retrievers = {name: self.pool.build(name) for name in config.members}
        self.retrieval = RetrievalStage(self.retrievers, retrieval_config)
        self.voter = voter if voter is not None else _default_voter(config)
        _check_pool(self.voter, config, self.reader)
        _check_config_risk(self.voting, config.voter.risk)
        self.costs: dict[str, float] = {}  # measured seconds per member and question (moving average)

    @classmethod
    def from_config(
        cls, path: str | Path | EnsembleConfig, weights: str | Path | None = None, **kwargs: Any
    ) -> Ensemble:
        config = path if isinstance(path, EnsembleConfig) else load_config(path)
        if weights is not None:
            kwargs.setdefault("voter", load_voter(weights, members=config.members))
        return cls(config, **kwargs)

    @property
    def members(self) -> list[str]:
        """The member names, in the config's (and the voter's) order."""
        return list(self.config.members)

    def select(self, members: Sequence[str] | None) -> list[str]:
        """The members to run, in the ensemble's order: all of them for None, else the named subset."""
        return self.members if members is None else _subset(self.members, members)

    @property
    def voting(self) -> VoteStage:
        return VoteStage(self.voter, self.members)

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
        self, questions: Sequence[Question], batch_size: int
    ) -> Iterator[tuple[list[Record], GenerationStats]]:
        """`eor run`'s batching loop (in this process or on a Ray worker): the records of `questions`,
        `batch_size` at a time, each batch with what the generation stage did for it."""
        for start in range(0, len(questions), batch_size):
            before = dataclasses.replace(self.generation.stats)
            results = self.answer_batch(questions[start : start + batch_size])
            yield [result.to_record() for result in results], self.generation.stats.since(before)

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
            cannot be bounded (see voters.lazy), or that give P(right), run every member.
        risk: decline where P(right) is below the weights file's threshold for this error rate (VoteStage.judge;
            the config's `voter.risk` is what `eor ask` and `eor serve` pass when none is asked for).
        """
        items = [q if isinstance(q, Question) else make_question(q) for q in questions]
        if not items:
            return []
        names = self.select(members)
        timeout = _check_timeout(member_timeout)
        risk = self.voting.check_risk(risk, every_member=not (lazy and self.cascade is not None))
        if lazy and self.cascade is not None:
            if members is not None:
                raise InputError(
                    "this pool answers with a cascade, which chooses the members each question needs: ask without "
                    "`members`, or run every member (`eor ask/serve --all-members`) to vote over a subset"
                )
            results = [self._answer_by_cascade(item, timeout, strict) for item in items]
        elif lazy and self.voting.lazy:
            results = [self._answer_lazily(item, names, timeout, strict) for item in items]
        else:
            with metering() as usage:
                results = self._answer_all(items, names, timeout, strict, usage)
        _warn_degraded(results)
        return [self.voting.judge(result, risk) for result in results]

    def _answer_all(
        self, items: list[Question], names: list[str], timeout: float | None, strict: bool, usage: Any
    ) -> list[Result]:
        texts = [item.question for item in items]
        failed: list[dict[str, str]] = [{} for _ in items]
        clock = Clock()
        with clock("retrieval"):
            passages, spent = self._retrieve(names, texts, timeout, strict, failed)
        with clock("generation"):
            outputs = self._read(names, texts, passages, spent, strict, failed)
        for i, item in enumerate(items):
            if not outputs[i]:
                raise _no_member_left(item, failed[i])
        with clock("voting"):
            decisions = self.voting.vote([ballots(output) for output in outputs], texts)
        _learn_costs(self.costs, outputs)
        stages = _stages(clock, usage, len(items), members=len(names))
        return [
            _result(item, outputs[i], decision, failed[i], [], stages)
            for i, (item, decision) in enumerate(zip(items, decisions, strict=True))
        ]

    def _answer_lazily(self, item: Question, names: list[str], timeout: float | None, strict: bool) -> Result:
        """One question, members one at a time (cheapest first) until the pending ones cannot change the answer."""
        needed = set(self.voting.needed())
        queue = sorted((name for name in names if name in needed), key=self.cost)
        failed: dict[str, str] = {}
        outputs: dict[str, MemberOutput] = {}
        leader = None
        clock = Clock()
        with metering() as usage:
            for position, name in enumerate(queue):
                self._run_member(name, item, timeout, strict, failed, outputs, clock)
                if name in outputs:
                    with clock("voting"):
                        leader = self.voting.settled(ballots(outputs), queue[position + 1 :])
                    if leader is not None:
                        break
            if not outputs:
                raise _no_member_left(item, failed)
            with clock("voting"):
                decision = self.voting.vote([ballots(outputs)], [item.question])[0]
        _learn_costs(self.costs, [outputs])
        outputs = {name: outputs[name] for name in names if name in outputs}  # the pool's order, as in a full run
        member = leader if leader is not None else decision.member  # the leader has the full vote's answer
        skipped = [name for name in names if name not in outputs and name not in failed]
        stages = _stages(clock, usage, 1, members=len(outputs) + len(failed), skipped=skipped)
        return _result(item, outputs, dataclasses.replace(decision, member=member), failed, skipped, stages)

    @property
    def cascade(self) -> Any:
        """The voter when it is a cascade (voters.cascade: members run in its order until it stops), else None."""
        return self.voter if getattr(self.voter, "kind", None) == "cascade" else None

    def _answer_by_cascade(self, item: Question, timeout: float | None, strict: bool) -> Result:
        """One question, the cascade's members one step at a time until its stopping rule says the leading
        answer is likely good enough; the members after that step never retrieve nor prompt."""
        failed: dict[str, str] = {}
        outputs: dict[str, MemberOutput] = {}
        decision = None
        clock = Clock()
        with metering() as usage:
            for step, name in enumerate(self.cascade.order):
                self._run_member(name, item, timeout, strict, failed, outputs, clock)
                if outputs:
                    with clock("voting"):
                        cast = ballots(outputs)
                        answers = {n: b.answer for n, b in cast.items()}
                        found = {n: b.passages for n, b in cast.items()}
                        known = {n: b.confidence for n, b in cast.items()}
                        decision = self.cascade.decide(step, answers, found, item.question, known)
                    if decision.stop:
                        break
        if decision is None:
            raise _no_member_left(item, failed)
        _learn_costs(self.costs, [outputs])
        report = _cascade_report(self.cascade.order, decision, outputs, failed)
        outputs = {name: outputs[name] for name in self.members if name in outputs}
        stages = _stages(clock, usage, 1, members=len(report["ran"]), skipped=report["skipped"])
        group = LAST if decision.last else EARLY
        probability = self.voting.probability(decision.scores, ballots(outputs), decision.member, group)
        vote = Decision(decision.member, dict(decision.scores), probability)
        result = _result(item, outputs, vote, failed, report["skipped"], stages)
        result.cascade = report
        return result

    def _run_member(
        self,
        name: str,
        item: Question,
        timeout: float | None,
        strict: bool,
        failed: dict[str, str],
        outputs: dict[str, MemberOutput],
        clock: Clock,
    ) -> None:
        """One member on one question: its output into `outputs`, or its failure into `failed`."""
        with clock("retrieval"):
            passages, spent = self._retrieve([name], [item.question], timeout, strict, [failed])
        with clock("generation"):
            outputs.update(self._read([name], [item.question], passages, spent, strict, [failed])[0])

    def cost(self, name: str) -> float:
        """A member's expected seconds per question: measured by this ensemble when it has run, else a prior
        from its notation (ordering only: passages cost prompt tokens, PK and @CP generate documents)."""
        return self.costs.get(name, _prior_cost(name))

    def explain(self, result: Result) -> dict[str, Any]:
        """Why the vote chose its answer (see `explain_vote`)."""
        return explain_vote(self.voter, self.members, result)

    # -- the stages, each isolating member failures -----------------------------------------------------

    def _retrieve(
        self, names: list[str], texts: list[str], timeout: float | None, strict: bool, failed: list[dict[str, str]]
    ) -> tuple[dict[str, list[list[Any] | None]], dict[str, RetrievalCost]]:
        """Per member, its documents per question (None where it failed, recorded in `failed`), and what its
        retrieval cost per question of the batch (seconds; the reader's work for PK's and @CP's documents)."""
        passages: dict[str, list[list[Any] | None]] = {}
        spent: dict[str, RetrievalCost] = {}
        for name in names:
            tick = time.perf_counter()
            with metering() as usage:
                results = self.retrieval.retrieve(name, texts, timeout, strict)
            spent[name] = RetrievalCost((time.perf_counter() - tick) / len(texts), usage, len(texts))
            passages[name] = []
            for i, result in enumerate(results):
                if isinstance(result, Exception):
                    _fail(failed, [i], name, result, "retrieval")
                    passages[name].append(None)
                else:
                    passages[name].append(result)
        return passages, spent

    def _read(
        self,
        names: list[str],
        texts: list[str],
        passages: dict[str, list[list[Any] | None]],
        retrieval: dict[str, RetrievalCost],
        strict: bool,
        failed: list[dict[str, str]],
    ) -> list[dict[str, MemberOutput]]:
        """Every member's answer per question from one call to the generation stage."""
        pairs = [(name, i) for name in names for i in range(len(texts)) if passages[name][i] is not None]
        prompts = [self._prompt(name, texts[i], passages[name][i]) for name, i in pairs]
        ask = self.generation.complete if strict else self.generation.complete_each
        completions: list[Completion | Exception] = list(ask(prompts, confidence=True))
        cuts = _fit_to_context(self, pairs, texts, passages, prompts, completions)
        outputs: list[dict[str, MemberOutput]] = [{} for _ in texts]
        for index, ((name, i), prompt, completion) in enumerate(zip(pairs, prompts, completions, strict=True)):
            if isinstance(completion, Exception):
                _fail(failed, [i], name, completion, "generation")
                continue
            answer = clean_answer(completion.text)
            if not answer:  # an empty answer would agree with every other empty one in the vote
                empty = ReaderError("the reader's output was empty")
                if strict:
                    raise empty
                _fail(failed, [i], name, empty, "generation")
                continue
            outputs[i][name] = MemberOutput(
                answer=answer,
                passages=[_passage_dict(doc) for doc in passages[name][i]],
                prompt=prompt,
                seconds=round(retrieval[name].seconds + completion.seconds, 4),
                document_cut=cuts.get(index),
                tokens=retrieval[name].tokens(completion),
                confidence=completion.confidence.summary() if completion.confidence is not None else None,
            )
        return outputs

    def _prompt(self, name: str, question: str, documents: list[Any], max_words: int | None = None) -> str:
        """Member `name`'s answer prompt (eor.prompts: cut to `max_document_words` words, or `max_words`)."""
        return self.prompts[name].answer_prompt(question, _pairs(documents), max_words)


@dataclass(frozen=True)
class RetrievalCost:
    """A member's retrieval over a batch of `questions`: seconds per question, and the reader's work during
    it (PK's documents, @CP's summaries)."""

    seconds: float
    usage: GenerationStats
    questions: int

    def tokens(self, answer: Completion) -> dict[str, int] | None:
        """The member's token counts per question, its answer's and its retrieval's share: prompt tokens
        evaluated, kept from the prompt before (`reused`), generated (a cache hit: as when it was made); None
        when the reader did not count them, or a document the member generated was read from the cache."""
        if self.usage.cache_hits or answer.prompt_tokens is None or answer.generated_tokens is None:
            return None
        share = self.usage.share(self.questions)
        return {
            "prompt": answer.prompt_tokens + round(share["prompt_tokens"]),
            "reused": (answer.reused_tokens or 0) + round(share["reused_tokens"]),
            "generated": answer.generated_tokens + round(share["generated_tokens"]),
        }


def explain_vote(voter: Any, pool: list[str], result: Result) -> dict[str, Any]:
    """Why the vote chose its answer: the voter's own account per voting member (for the paper's voter:
    weight ω^r, whether it drops the member, similarities per metric and combined (eq. 6), pooled
    similarity and decision score (eq. 7); for the answer selector: each feature's contribution), and
    the members left out of the vote with the reason. `pool`: the voter's members, in its order."""
    names = list(result.members)
    if not names:
        raise InputError("this result holds no member outputs to explain")
    foreign = [name for name in names if name not in pool]
    if foreign:
        raise InputError(f"this result holds member(s) {', '.join(foreign)} that this ensemble lacks")
    if not hasattr(voter, "explain_row"):
        raise ConfigError("explain() needs an eor voter (Voter, AnswerSelector or voters.load_voter)")

    account = voter.explain_row(
        [result.members[name].answer for name in names],
        [result.members[name].passage_texts for name in names],
        result.question,
        [pool.index(name) for name in names],
        **confidence_kwargs(voter, [result.members[name].confidence for name in names]),
    )
    members: dict[str, Any] = {}
    for name, row in zip(names, account.pop("members"), strict=True):
        if "similarity" in row:
            row["similarity"] = {names[n]: values for n, values in row["similarity"].items()}
        members[name] = {
            "answer": result.members[name].answer,
            **row,
            "score": result.members[name].score,
            "chosen": name == result.member,
        }
    return {
        "question": result.question,
        "answer": result.answer,
        "member": result.member,
        **account,
        "members": members,
        "degraded": dict(result.degraded),
    }


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


def _fit_to_context(
    ensemble: Ensemble,
    pairs: list[tuple[str, int]],
    texts: list[str],
    passages: dict[str, list[list[Any] | None]],
    prompts: list[str],
    completions: list[Completion | Exception],
) -> dict[int, dict[str, int]]:
    """Prompts too long for the reader's context are asked again with their document cut to half its
    words, then half again (at most MAX_CUTS times), in place in `prompts` and `completions`. A warning
    names each cut; the result maps a prompt's index to the words kept of its document's words."""
    cuts: dict[int, dict[str, int]] = {}
    for index, ((name, i), completion) in enumerate(zip(pairs, completions, strict=True)):
        if not isinstance(completion, ContextOverflowError):
            continue
        words = ensemble.prompts[name].document_words(_pairs(passages[name][i]))
        kept = min(words, ensemble.config.max_document_words)
        for _ in range(MAX_CUTS):
            if kept <= 1 or not isinstance(completion, ContextOverflowError):
                break
            kept //= 2
            prompts[index] = ensemble._prompt(name, texts[i], passages[name][i], max_words=kept)
            completion = ensemble.generation.complete_each([prompts[index]], confidence=True)[0]
        completions[index] = completion
        if not isinstance(completion, Exception):
            cuts[index] = {"kept_words": kept, "words": words}
            log.warning(
                "%s: the prompt of question %r was over the reader's context: its document was cut to %d of %d words",
                name,
                texts[i][:80],
                kept,
                words,
            )
    return cuts


def _cascade_report(
    order: list[str], decision: Any, outputs: dict[str, MemberOutput], failed: dict[str, str]
) -> dict[str, Any]:
    """`Result.cascade`: the members the cascade ran (failed ones included) and skipped, and why it stopped."""
    ran = [name for name in order if name in outputs or name in failed]
    return {
        "ran": ran,
        "skipped": [name for name in order if name not in ran],
        "stopped_after": order[decision.step],
        "probability": round(decision.probability, 4),
        "threshold": None if math.isinf(decision.threshold) else round(decision.threshold, 4),
        "reason": decision.reason(),
    }


def _result(
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
    )


class Clock:
    """Seconds per stage: `with clock("retrieval"): ...` adds the block's wall time to that stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {"retrieval": 0.0, "generation": 0.0, "voting": 0.0}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - started


def _stages(clock: Clock, usage: GenerationStats, questions: int, members: int, skipped: Sequence[str] = ()) -> dict:
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


def _learn_costs(costs: dict[str, float], outputs: list[dict[str, MemberOutput]]) -> None:
    """Fold each member's measured seconds into its running cost (exponential moving average)."""
    for output in outputs:
        for name, member in output.items():
            before = costs.get(name)
            costs[name] = (
                member.seconds if before is None else (1 - COST_SMOOTHING) * before + COST_SMOOTHING * member.seconds
            )


def _prior_cost(name: str) -> float:
    """A member's cost before it was measured, for ordering only: about a second per passage it reads, ten
    per generated background document or summary (PK, @CP), one for the question itself."""

    try:
        tree = notation.parse(name)
    except Exception:  # an unusual name: ordered last among the unmeasured
        return 100.0
    cost = 1.0
    for node in notation.walk(tree):
        match node:
            case notation.Compress() | notation.Source(name="PK"):
                cost += 10.0
            case notation.TopK(k=k):
                cost += k
            case notation.Pick():
                cost += 1.0
    return cost


def _check_config_risk(voting: VoteStage, risk: float | None) -> None:
    """The config's `voter.risk` needs the voter's thresholds: a ConfigError at start, not at the first answer."""
    try:
        voting.check_risk(risk)
    except InputError as exc:
        raise ConfigError(f"voter.risk: {exc}") from None


def _check_timeout(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InputError(f"member_timeout must be a positive number of seconds or None, got {value!r}")
    return float(value)


def _reason(exc: BaseException, stage: str) -> str:
    if isinstance(exc, MemberTimeoutError):
        return str(exc)
    message = (str(exc).splitlines() or [""])[0]
    reason = f"{stage} failed: {type(exc).__name__}" + (f": {message}" if message else "")
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"


def _fail(failed: list[dict[str, str]], questions: Sequence[int], name: str, exc: BaseException, stage: str) -> None:
    reason = _reason(exc, stage)
    for i in questions:
        failed[i][name] = reason


def _by_reason(reasons: dict[str, str]) -> dict[str, list[str]]:
    """The members of each distinct reason, in order: a reader that is down is one reason, named once."""
    grouped: dict[str, list[str]] = {}
    for name, reason in reasons.items():
        grouped.setdefault(reason, []).append(name)
    return grouped


def _warn_degraded(results: Sequence[Result]) -> None:
    """One warning per distinct reason a batch left members out of the vote, with the members and questions."""
    questions: dict[str, set[int]] = {}
    members: dict[str, dict[str, None]] = {}
    for i, result in enumerate(results):
        for reason, names in _by_reason(result.degraded).items():
            questions.setdefault(reason, set()).add(i)
            members.setdefault(reason, {}).update(dict.fromkeys(names))
    for reason, names in members.items():
        who = f"member {next(iter(names))}" if len(names) == 1 else f"members {', '.join(names)}"
        log.warning("%s left out of the vote of %d question(s): %s", who, len(questions[reason]), reason)


def _no_member_left(item: Question, reasons: dict[str, str]) -> EorError:
    detail = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in _by_reason(reasons).items())
    generation = all(reason.startswith("generation") for reason in reasons.values())
    cls = ReaderError if reasons and generation else RetrieverError
    return cls(f"every member failed on question {item.id}: {detail}")


def check_member_names(config: EnsembleConfig) -> None:
    """Every member names only known sources (RetrieverError otherwise); cheap, loads no model."""

    known = source_names(config.sources)
    for member in config.members:
        unknown = sorted(notation.sources(notation.parse(member)) - known)
        if unknown:
            raise RetrieverError(
                f"member {member!r}: unknown source(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}"
            )


def check_voter_config(config: EnsembleConfig) -> None:
    """The config's `voter:` names only registered metrics and poolings (ConfigError listing the valid ones);
    cheap, loads no model."""

    voter = config.voter
    known = available_metrics()
    unknown = [name for name in voter.metrics if name not in known]
    if unknown:
        raise ConfigError(f"voter.metrics: unknown metric(s) {', '.join(unknown)}; available: {', '.join(known)}")
    if voter.pooling not in POOLINGS:
        raise ConfigError(f"voter.pooling: unknown pooling {voter.pooling!r}; available: {', '.join(POOLINGS)}")
    voter.resolved_metric_params()  # metric_params may name only metrics in voter.metrics


def _passage_dict(document: Any) -> dict[str, Any]:
    """A passage as records and the API hold it; `url` only for passages that have one (web pages)."""
    meta = document.metadata
    passage = {"id": meta.get("id"), "title": meta.get("title", ""), "text": document.page_content}
    passage["score"] = meta.get("score")
    if meta.get("url"):
        passage["url"] = str(meta["url"])
    return passage


def _pairs(documents: list[Any]) -> list[tuple[str, str]]:
    """LangChain documents as the (title, text) passages of a prompt."""
    return [(doc.metadata.get("title", ""), doc.page_content) for doc in documents]


def _default_voter(config: EnsembleConfig) -> Any:
    """The voter of the config's `voter.weights` file, else uniform weights over its metrics."""
    path = config.default_weights()
    if path is None:
        return _uniform_voter(config)

    return load_voter(path, members=config.members)


def _check_pool(voter: Any, config: EnsembleConfig, reader: Any) -> None:
    """Warn when the voter was trained on records of another reader or corpus (eor.pool)."""
    if isinstance((getattr(voter, "metadata_", None) or {}).get("pool"), dict):
        warn_if_foreign(voter, pool_identity(config, reader), f"the {getattr(voter, 'kind', 'voter')} weights")


def _uniform_voter(config: EnsembleConfig) -> Any:
    v = config.voter
    params = v.resolved_metric_params()
    return Voter.uniform(
        len(config.members),
        metrics=tuple(v.metrics),
        pooling=v.pooling,
        threshold=v.threshold,
        members=list(config.members),
        metric_params=params or None,
    )
