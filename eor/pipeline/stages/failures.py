"""Members that failed, and why: what every stage records when it leaves a member out of a question's vote,
and how it is told.

A reason is one line, `"{stage} failed: {ExceptionType}: {first line of its message}"` (a timeout's own
message), at most MAX_REASON_CHARS. A batch warns once per distinct reason, naming every member it left out
and how many questions; when no member is left for a question, the error names each reason once with its
members, and no warning precedes it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from eor.core.data import Question
from eor.core.errors import EorError, ReaderError, RetrieverError
from eor.core.results import Result
from eor.pipeline.stages.retrieval import MemberTimeoutError

log = logging.getLogger(__name__)

#: longest failure reason kept in `Result.degraded` (foreign exceptions can carry long messages).
MAX_REASON_CHARS = 300


class Failures:
    """Per question of a batch, the members that failed on it: name -> reason (`by_question`, filled in place)."""

    def __init__(self, by_question: list[dict[str, str]]) -> None:
        self.by_question = by_question

    @classmethod
    def for_batch(cls, questions: int) -> Failures:
        return cls([{} for _ in range(questions)])

    def fail(self, question: int, name: str, exc: BaseException, stage: str) -> None:
        self.by_question[question][name] = reason(exc, stage)

    def __getitem__(self, question: int) -> dict[str, str]:
        return self.by_question[question]


def reason(exc: BaseException, stage: str) -> str:
    """The one-line reason of a member's failure in a stage."""
    if isinstance(exc, MemberTimeoutError):
        return str(exc)
    message = (str(exc).splitlines() or [""])[0]
    text = f"{stage} failed: {type(exc).__name__}" + (f": {message}" if message else "")
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def by_reason(reasons: dict[str, str]) -> dict[str, list[str]]:
    """The members of each distinct reason, in order: a reader that is down is one reason, named once."""
    grouped: dict[str, list[str]] = {}
    for name, text in reasons.items():
        grouped.setdefault(text, []).append(name)
    return grouped


def warn_degraded(results: Sequence[Result]) -> None:
    """One warning per distinct reason a batch left members out of the vote, with the members and questions."""
    questions: dict[str, set[int]] = {}
    members: dict[str, dict[str, None]] = {}
    for i, result in enumerate(results):
        for text, names in by_reason(result.degraded).items():
            questions.setdefault(text, set()).add(i)
            members.setdefault(text, {}).update(dict.fromkeys(names))
    for text, named in members.items():
        who = f"member {next(iter(named))}" if len(named) == 1 else f"members {', '.join(named)}"
        log.warning("%s left out of the vote of %d question(s): %s", who, len(questions[text]), text)


def no_member_left(item: Question, reasons: dict[str, str]) -> EorError:
    """The error of a question no member could answer: a ReaderError when every member failed generating."""
    detail = "; ".join(f"{', '.join(names)}: {text}" for text, names in by_reason(reasons).items())
    generation = all(text.startswith("generation") for text in reasons.values())
    cls = ReaderError if reasons and generation else RetrieverError
    return cls(f"every member failed on question {item.id}: {detail}")
