"""What the ensemble returns and a run records: `Result` per answered question, with a `MemberOutput` per
member that voted, and `Record`, the typed line of `records.jsonl` that a `Result` becomes, the writer
writes, the readers parse (eor.runs.records), `--retry-failed` updates and training, the bench and the
explorer read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eor.core.answers import normalize_answer
from eor.core.citations import cite
from eor.core.errors import InputError

#: the id of a document the reader wrote (retrievers.parametric's `PK:<12 hex>`, retrievers.operators' `CP:<12 hex>`)
_GENERATED_ID = re.compile(r"^[^:\s]+:[0-9a-f]{12}$")


def is_generated(passage: Mapping[str, Any]) -> bool:
    """Whether the reader wrote the passage (PK's document, @CP's summary): its `generated` flag, or in records made
    before the flag was kept, an unscored passage with a generated document's id."""
    if passage.get("generated"):
        return True
    return passage.get("score") is None and bool(_GENERATED_ID.match(str(passage.get("id", ""))))


@dataclass
class MemberOutput:
    """One member's output for one question: its answer, passages and prompt, the seconds it cost, and
    where known its token counts and the reader's confidence; `score` is its vote score (not recorded)."""

    answer: str
    passages: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | None = None
    seconds: float | None = None
    score: float | None = None
    document_cut: dict[str, int] | None = None  # {"kept_words", "words"}: the prompt was over the context
    tokens: dict[str, int] | None = None  # {"prompt", "reused", "generated"}
    confidence: dict[str, Any] | None = (
        None  # eor.core.confidence summary: mean/min token logprob, first margin, tokens
    )
    extra: dict[str, Any] = field(default_factory=dict)  # fields of a record this eor does not know, kept

    @property
    def passage_texts(self) -> list[str]:
        """The text of each of its passages, in order (what the vote reads)."""
        return [passage["text"] for passage in self.passages]

    @property
    def retrieved_texts(self) -> list[str]:
        """The text of each passage a retriever found in a corpus (not a document the reader wrote), in order."""
        return [passage["text"] for passage in self.passages if not is_generated(passage)]

    def record(self) -> dict[str, Any]:
        """The member's entry in a record (eor.runs.records' format)."""
        record: dict[str, Any] = {"answer": self.answer, "passages": self.passages}
        for key in ("prompt", "seconds", "tokens", "confidence", "document_cut"):
            value = getattr(self, key)
            if value is not None:
                record[key] = value
        return {**record, **self.extra}

    @classmethod
    def from_record(cls, data: Any, where: str) -> MemberOutput:
        """The member output of a record's entry; `where` names it in errors."""
        if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
            raise InputError(f"{where}: a member's output needs an 'answer' string")
        passages = data.get("passages") or []
        if not isinstance(passages, list) or not all(isinstance(p, dict) for p in passages):
            raise InputError(f"{where}: 'passages' must be a list of objects")
        # A known field of an unexpected type is kept as it was (in `extra`), not read.
        fitting = {
            key: value
            for key, value in data.items()
            if key in MEMBER_KEYS and (key not in MEMBER_TYPES or value is None or _fits(value, MEMBER_TYPES[key]))
        }
        return cls(
            answer=data["answer"],
            passages=passages,
            prompt=fitting.get("prompt"),
            seconds=fitting.get("seconds"),
            tokens=fitting.get("tokens"),
            confidence=fitting.get("confidence"),
            document_cut=fitting.get("document_cut"),
            extra={key: value for key, value in data.items() if key not in fitting},
        )


MEMBER_KEYS = frozenset({"answer", "passages", "prompt", "seconds", "tokens", "confidence", "document_cut"})
MEMBER_TYPES: dict[str, type | tuple[type, ...]] = {
    "prompt": str,
    "seconds": (int, float),
    "tokens": dict,
    "confidence": dict,
    "document_cut": dict,
}


def _fits(value: Any, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


@dataclass
class Vote:
    """The ensemble's choice for a question: the member, its answer, and every voting member's score."""

    member: str
    answer: str
    scores: dict[str, float | None]


@dataclass
class Record:
    """One question of a run (a line of `records.jsonl`, eor.runs.records): its id, text and gold answers, every
    member's output, the vote when the run voted, the members that failed (`degraded`: name -> reason), and
    the fields of the question file carried unchanged (`extra`)."""

    id: str
    question: str
    answers: list[str]
    members: dict[str, MemberOutput]
    vote: Vote | None = None
    degraded: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    judge: dict[str, Any] | None = None  # the reader's scores of the candidates (eor.pipeline.judging), last

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the record's line."""
        data: dict[str, Any] = {**self.extra, "id": self.id, "question": self.question}
        data.setdefault("answers", self.answers)  # unless kept as it was read (not a list)
        data["members"] = {name: output.record() for name, output in self.members.items()}
        if self.vote is not None:
            data["vote"] = {"member": self.vote.member, "answer": self.vote.answer, "scores": self.vote.scores}
        if self.degraded:
            data["degraded"], data["degraded_reasons"] = list(self.degraded), dict(self.degraded)
        if self.judge is not None:
            data["judge"] = self.judge
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Record:
        """The record of a line's JSON object (any eor's: fields it does not know are kept in `extra`);
        `where` (file and line) names it in errors."""
        if not isinstance(data, dict) or "id" not in data or not isinstance(data.get("members"), dict):
            raise InputError(f"{where}: not an eor record (needs 'id' and 'members')")
        members = {
            str(name): MemberOutput.from_record(output, f"{where}, member {name!r}")
            for name, output in data["members"].items()
        }
        kept = {key: value for key, value in data.items() if key not in RECORD_KEYS}  # carried as they were
        vote = data.get("vote")
        if isinstance(vote, dict) and isinstance(vote.get("member"), str) and isinstance(vote.get("answer"), str):
            scores = vote.get("scores")
            vote = Vote(vote["member"], vote["answer"], dict(scores) if isinstance(scores, dict) else {})
        elif "vote" in data:
            kept["vote"], vote = vote, None
        answers = data.get("answers", [])
        if not isinstance(answers, list):
            kept["answers"], answers = answers, []
        return cls(
            id=str(data["id"]),
            question=str(data.get("question", "")),
            answers=[str(answer) for answer in answers],
            members=members,
            vote=vote,
            degraded=_degraded(data),
            extra=kept,
            judge=data["judge"] if isinstance(data.get("judge"), dict) else None,
        )


RECORD_KEYS = frozenset({"id", "question", "answers", "members", "vote", "degraded", "degraded_reasons", "judge"})


def _degraded(data: dict[str, Any]) -> dict[str, str]:
    """The failed members of a record and why: `degraded_reasons`, or the names of `degraded` alone (a
    record written without the reasons) with an unknown reason."""
    reasons = data.get("degraded_reasons")
    if isinstance(reasons, dict):
        return {str(name): str(reason) for name, reason in reasons.items()}
    names = data.get("degraded")
    return {str(name): "unknown" for name in names} if isinstance(names, list) else {}


@dataclass
class Result:
    """One answered question: the chosen answer and member, every voting member's output and vote score,
    the members left out of the vote because they failed (`degraded`: name -> reason), the members a lazy
    vote did not need to run (`skipped`), what each stage did (`stages`, per question of its batch), for a
    cascade which members it ran and skipped and why it stopped (`cascade`), the probability that the answer is
    right where the voter has one (`probability`) and which of its fits gave it (`probability_fit`), at a risk
    asked for whether eor declined (`abstention`), and with a judge voter the candidates it chose among
    (`judged`; the answer may then be a span of the passages that no member wrote, `member` the first whose
    passages hold it). The chosen member's answer stays in `members` when eor declined."""

    id: str
    question: str
    answer: str | None  # None when eor abstained (`abstention`)
    member: str
    members: dict[str, MemberOutput]
    timings: dict[str, float]
    answers: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    degraded: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    stages: dict[str, Any] = field(default_factory=dict)
    cascade: dict[str, Any] | None = None  # which members a cascade ran and skipped, and why it stopped
    probability: float | None = None  # P(right) of the answer (voters.right); None: the voter has none
    probability_fit: str | None = (
        None  # the fit that gave it (voters.choice_evidence.FITS, a judge's level; None: a step's)
    )
    abstention: dict[str, Any] | None = None  # at a risk asked for: eor.pipeline.abstention.Abstention.to_dict()
    unanswerable: float | None = None  # P(unanswerable) of the choice (voters.right); None: the voter has none
    judged: dict[str, Any] | None = None  # with a judge voter: its candidates and choice (eor.pipeline.judging)

    @property
    def abstained(self) -> bool:
        """Whether eor declined to answer at the risk asked for (`answer` is then None)."""
        return bool(self.abstention and self.abstention["abstained"])

    @property
    def given_by(self) -> list[str]:
        """Every member whose answer is the chosen one (equal once normalised, as exact match counts), the
        chosen member first: the answer is credited to all of them, whichever the vote named on a tie. With a
        judge voter, the members that wrote the chosen candidate (none for a span)."""
        if self.judged is not None:
            return list(self.judged["candidates"][self.judged["chosen"]]["members"])
        chosen = normalize_answer(self.members[self.member].answer)
        return [self.member] + [
            name
            for name, output in self.members.items()
            if name != self.member and chosen and normalize_answer(output.answer) == chosen
        ]

    @property
    def sources(self) -> list[dict[str, Any]]:
        """Where the chosen answer comes from (eor.core.citations): the passages that hold it, whichever member
        read them (a member credited with it first: `given_by`, or for a judge voter's span the members whose
        passages hold it), each with the sentence that holds it (`holds`: true, `sentence`), then the passages
        of the credited members that do not hold it (`holds`: false, read only). Each names its member, the
        passage's id and title, and its file and page or url where it has them. Empty when eor declined or no
        passage was read (the reader's own knowledge)."""
        if self.answer is None:
            return []
        credited = self.given_by
        if self.judged is not None and not credited:
            credited = list(self.judged["candidates"][self.judged["chosen"]]["supported_by"])
        passages = {name: output.passages for name, output in self.members.items()}
        return cite(self.answer, credited, passages, is_generated)

    def to_dict(self) -> dict[str, Any]:
        """The object `eor ask --json` prints (`given_by`: every member that gave the chosen answer; `degraded`
        and `degraded_reasons` only when a member failed,
        `probability_fit` only when a P(right) fit gave the probability (voters.choice_evidence.FITS),
        `skipped` only when a lazy vote or a cascade stopped early, `cascade` only for a cascade, `abstention`
        only when a risk was asked for, `judge` only with a judge voter; `answer` is null when eor abstained)."""
        data = {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "abstained": self.abstained,
            "probability": None if self.probability is None else round(self.probability, 4),
            "member": self.member,
            "given_by": self.given_by,
            "sources": self.sources,
            "members": {name: {**output.record(), "score": output.score} for name, output in self.members.items()},
            "timings": self.timings,
        }
        if self.probability_fit is not None:
            data["probability_fit"] = self.probability_fit
        if self.stages:
            data["stages"] = self.stages
        if self.skipped:
            data["skipped"] = list(self.skipped)
        if self.cascade is not None:
            data["cascade"] = dict(self.cascade)
        if self.abstention is not None:
            data["abstention"] = dict(self.abstention)
        if self.judged is not None:
            data["judge"] = dict(self.judged)
        return {**data, **self._degraded_fields()}

    def to_record(self) -> Record:
        """The question's record (eor.runs.records), what `eor run` writes."""
        return Record(
            id=self.id,
            question=self.question,
            answers=self.answers,
            members=self.members,
            vote=Vote(
                self.member, self.members[self.member].answer, {name: o.score for name, o in self.members.items()}
            ),
            degraded=self.degraded,
            extra={key: value for key, value in self.extra.items() if key not in RECORD_KEYS},
        )

    def _degraded_fields(self) -> dict[str, Any]:
        if not self.degraded:
            return {}
        return {"degraded": list(self.degraded), "degraded_reasons": dict(self.degraded)}
