"""Question files: JSON Lines with `question`, optional `id` and `answers`; other fields are kept as they are."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eor.core.errors import InputError

MAX_QUESTION_CHARS = 4000


#: the question-file field of passage ids the question's retrieval leaves out (a corpus ablation:
#: eor.learning.ablation; retrievers.withheld), and the field naming the question it was made from
WITHHELD = "withheld"
ABLATED_FROM = "ablated_from"


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def withheld(self) -> tuple[str, ...]:
        """The passage ids no member of this question may read (sorted; empty unless it is an ablated copy)."""
        return tuple(sorted(self.extra.get(WITHHELD) or ()))


def check_question(text: Any, where: str = "question") -> str:
    """The question stripped of surrounding white space; empty or over-long questions are rejected."""
    if not isinstance(text, str):
        raise InputError(f"{where}: the question must be a string, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise InputError(f"{where}: the question is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise InputError(f"{where}: the question has {len(text)} characters; the limit is {MAX_QUESTION_CHARS}")
    return text


def question_id(text: str) -> str:
    """A stable id made from the question text (white space collapsed)."""
    return "q" + hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()[:12]


def make_question(text: str, *, id: str | None = None, answers: list[str] | None = None) -> Question:
    text = check_question(text)
    return Question(id=id or question_id(text), question=text, answers=list(answers or []))


def load_questions(path: str | Path, limit: int | None = None) -> list[Question]:
    """Read a question file; errors name the file and line. Ids must be unique (absent ids are derived
    from the text; a repeated text without an id gets a `-2`, `-3`, ... suffix)."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"questions file not found: {file}")
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    questions: list[Question] = []
    seen: set[str] = set()
    try:
        # split on newlines alone: JSON strings may hold U+2028 and U+2029 raw, which str.splitlines splits on
        lines = file.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise InputError(f"{file}: not UTF-8 text ({exc.reason})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or "question" not in record:
            raise InputError(f"{where}: each line must be a JSON object with a 'question' field")
        text = check_question(record.pop("question"), where)
        if "answer" in record and "answers" not in record:  # NQ-open's name: run unlabelled, hours would be lost
            raise InputError(
                f"{where}: 'answer' is not read; name the acceptable answers 'answers' (a list of strings), or "
                "convert the file with eor import-questions"
            )
        answers = record.pop("answers", [])
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InputError(f"{where}: 'answers' must be a list of strings")
        withheld = record.get(WITHHELD)
        if withheld is not None and (not isinstance(withheld, list) or not all(isinstance(i, str) for i in withheld)):
            raise InputError(f"{where}: '{WITHHELD}' must be a list of passage ids (strings)")
        given = record.pop("id", None)
        qid = str(given) if given is not None else question_id(text)
        if qid in seen:
            if given is not None:
                raise InputError(f"{where}: duplicate id {qid!r}")
            suffix = 2
            while f"{qid}-{suffix}" in seen:
                suffix += 1
            qid = f"{qid}-{suffix}"
        seen.add(qid)
        questions.append(Question(qid, text, answers, record))
        if limit is not None and len(questions) >= limit:
            break
    if not questions:
        raise InputError(f"{file}: no questions found")
    return questions
