"""Members that failed, and why: what every stage records when it leaves a member out of a question's vote,
and how it is told.

A reason is one line, `"{stage} failed: {ExceptionType}: {first line of its message}"` (a timeout's own
message), at most MAX_REASON_CHARS. A batch warns once per distinct reason, naming every member it left out
and how many questions; when no member is left for a question, the error names each reason once with its
members, and no warning precedes it.

`eor run` (`LeftOut`) does not stop at such a question: the batch's other questions are answered and recorded, the
question is left unrecorded with a warning and named in the run folder's `unanswered.json` (a later `eor run` tries
it again), and the run stops only when STOP_AFTER new questions in a row had no member answer (the reader or every
retriever down), after writing the results before them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from eor.core.data import Question
from eor.core.errors import ReaderError, RetrieverError, UnansweredError
from eor.core.results import Result
from eor.pipeline.stages.retrieval import MemberTimeoutError

log = logging.getLogger(__name__)

#: longest failure reason kept in `Result.degraded` (foreign exceptions can carry long messages).
MAX_REASON_CHARS = 300
#: questions in a row with no member answering after which `eor run` stops: not one odd question, a service down
STOP_AFTER = 3


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


class _NotRead(ReaderError, UnansweredError):
    """Every member failed on a question, each in its reading."""


class _NotRetrieved(RetrieverError, UnansweredError):
    """Every member failed on a question, one at least in its retrieval."""


def no_member_left(item: Question, reasons: dict[str, str]) -> UnansweredError:
    """The error of a question no member could answer: a ReaderError when every member failed generating."""
    detail = "; ".join(f"{', '.join(names)}: {text}" for text, names in by_reason(reasons).items())
    generation = all(text.startswith("generation") for text in reasons.values())
    cls = _NotRead if reasons and generation else _NotRetrieved
    error = cls(f"every member failed on question {item.id}: {detail}")
    error.question_id = item.id
    return error


class LeftOut:
    """`eor run`'s questions that no member answered (see the module's text). `known`: the ids an earlier run of
    the folder left out (its `unanswered.json`): tried again, their failures do not count toward the stop, so a
    run stopped at a cluster of such questions goes past them when resumed. `reasons`: id -> why, for those this
    run left out; `stop`: the error to raise once the results before it are written (None: go on)."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self.known = frozenset(known)
        self.reasons: dict[str, str] = {}
        self.in_a_row = 0
        self.stop: UnansweredError | None = None

    def answered(self, batch: list[Question], answer: Callable[[list[Question]], list[Result]]) -> list[Result]:
        """The results of `batch` by `answer`, in order, less those of questions no member answered (each
        warned; the questions around it answered again as batches); nothing once `stop` is set."""
        if self.stop is not None or not batch:
            return []
        try:
            results = answer(batch)
        except UnansweredError as error:
            at = [item.id for item in batch].index(error.question_id)
            before = self.answered(batch[:at], answer)
            self._left_out(error)
            return before + self.answered(batch[at + 1 :], answer)
        self.in_a_row = 0
        return results

    def _left_out(self, error: UnansweredError) -> None:
        if self.stop is not None:
            return
        self.reasons[error.question_id] = str(error)
        if error.question_id not in self.known:
            self.in_a_row += 1
        if self.in_a_row < STOP_AFTER:
            log.warning("not recorded (run again to try it again): %s", error)
            return
        self.stop = type(error)(
            f"stopped: no member answered {self.in_a_row} questions in a row (the reader or every retriever may be "
            f"down); the last: {error}. The records so far are kept: run again to resume (the questions left out "
            "are tried again, and no longer count toward a stop)"
        )
        self.stop.question_id = error.question_id
