"""What the ensemble returns: `Result` per question, with a `MemberOutput` per member that voted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class MemberOutput:
    answer: str
    passages: list[dict[str, Any]]
    prompt: str
    seconds: float
    score: float | None = None
    document_cut: dict[str, int] | None = None  # {"kept_words", "words"}: the prompt was over the context
    tokens: dict[str, int] | None = None  # {"prompt", "reused", "generated"}
    confidence: dict[str, Any] | None = None  # eor.confidence summary: mean/min token logprob, first margin, tokens

    def record(self) -> dict[str, Any]:
        record = {"answer": self.answer, "passages": self.passages, "prompt": self.prompt, "seconds": self.seconds}
        if self.tokens is not None:
            record["tokens"] = self.tokens
        if self.confidence is not None:
            record["confidence"] = self.confidence
        if self.document_cut is not None:
            record["document_cut"] = self.document_cut
        return record


@dataclass
class Result:
    """One answered question: the chosen answer and member, every voting member's output and vote score,
    the members left out of the vote because they failed (`degraded`: name -> reason), the members a lazy
    vote did not need to run (`skipped`), what each stage did (`stages`, per question of its batch), and for a
    cascade which members it ran and skipped and why it stopped (`cascade`)."""

    id: str
    question: str
    answer: str
    member: str
    members: dict[str, MemberOutput]
    timings: dict[str, float]
    answers: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    degraded: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    stages: dict[str, Any] = field(default_factory=dict)
    cascade: dict[str, Any] | None = None  # which members a cascade ran and skipped, and why it stopped

    def to_dict(self) -> dict[str, Any]:
        """The object `eor ask --json` prints (`degraded` and `degraded_reasons` only when a member failed,
        `skipped` only when a lazy vote or a cascade stopped early, `cascade` only for a cascade)."""
        data = {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "member": self.member,
            "members": {name: {**output.record(), "score": output.score} for name, output in self.members.items()},
            "timings": self.timings,
        }
        if self.stages:
            data["stages"] = self.stages
        if self.skipped:
            data["skipped"] = list(self.skipped)
        if self.cascade is not None:
            data["cascade"] = dict(self.cascade)
        return {**data, **self._degraded_fields()}

    def to_record(self) -> dict[str, Any]:
        """The line of `records.jsonl` (see eor.records)."""
        return {
            **self.extra,
            "id": self.id,
            "question": self.question,
            "answers": self.answers,
            "members": {name: output.record() for name, output in self.members.items()},
            "vote": {
                "member": self.member,
                "answer": self.answer,
                "scores": {name: output.score for name, output in self.members.items()},
            },
            **self._degraded_fields(),
        }

    def _degraded_fields(self) -> dict[str, Any]:
        if not self.degraded:
            return {}
        return {"degraded": list(self.degraded), "degraded_reasons": dict(self.degraded)}
