"""The records of a run as arrays: member names, question texts, answers, golds and passages per member.

Training, cross-validation and benchmarks read runs through `load_run` (several as one: `load_runs`); questions
without gold answers are skipped unless asked for, and every record must hold every member (the member order is
that of the first record, or the `members` given).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eor.core.data import ABLATED_FROM
from eor.core.errors import InputError
from eor.runs.records import read_records

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunData:
    """Questions with gold answers, in record order; `answers[q][m]` is member m's answer to question q.

    `passages[q][m]` is member m's retrieved passages (one string each, for the error breakdown, where a
    match must lie within one passage); `joined[q][m]` the same passages joined by spaces, as the paper's
    voter with grounding takes them; `texts[q]` the question; `seconds[q][m]` member m's recorded seconds
    (retrieval plus generation; None when the record lacks them) and `tokens[q][m]` its token counts
    (`prompt`, `reused`, `generated`; None in records written before they were recorded); `confidence[q][m]`
    the reader's confidence in its answer (eor.core.confidence summary; None likewise).
    """

    names: list[str]
    ids: list[str]
    answers: list[list[str]]
    golds: list[list[str]]
    passages: list[list[list[str]]]
    joined: list[list[str]]
    texts: list[str]
    seconds: list[list[float | None]] = field(default_factory=list)
    tokens: list[list[dict[str, int] | None]] = field(default_factory=list)
    confidence: list[list[dict[str, float] | None]] = field(default_factory=list)
    prompts: list[list[str | None]] = field(default_factory=list)  # each member's answer prompt, as recorded
    retrieved: list[list[list[str]]] = field(default_factory=list)  # the passages found in a corpus (not PK's, @CP's)
    origins: list[str] = field(default_factory=list)  # the question each was made from (an ablated copy's), else []

    @property
    def origin_ids(self) -> list[str]:
        """Per question, the id of the question it was made from (an ablated copy's `ablated_from`), else its own."""
        return list(self.origins) if self.origins else list(self.ids)

    @property
    def has_confidence(self) -> bool:
        """Whether any answer carries the reader's confidence (eor.core.confidence)."""
        return any(entry is not None for row in self.confidence for entry in row)

    @property
    def questions(self) -> int:
        return len(self.ids)

    def by_member(self) -> tuple[list[list[str]], list[list[list[str]]]]:
        """(answers, passages) indexed [member][question], the layout of eor.evaluation.error_breakdown."""
        answers = [[row[m] for row in self.answers] for m in range(len(self.names))]
        passages = [[row[m] for row in self.passages] for m in range(len(self.names))]
        return answers, passages

    def without(self, ids: set[str]) -> RunData:
        """The same run without the questions of `ids` (e.g. a prompt variant's worked examples)."""
        rows = [i for i, question in enumerate(self.ids) if question not in ids]
        return self if len(rows) == len(self.ids) else self.subset(rows)

    def subset(self, rows: list[int]) -> RunData:
        """The same run restricted to the questions at `rows` (in that order)."""
        return RunData(
            names=self.names,
            ids=[self.ids[i] for i in rows],
            answers=[self.answers[i] for i in rows],
            golds=[self.golds[i] for i in rows],
            passages=[self.passages[i] for i in rows],
            joined=[self.joined[i] for i in rows],
            texts=[self.texts[i] for i in rows],
            seconds=[self.seconds[i] for i in rows] if self.seconds else [],
            tokens=[self.tokens[i] for i in rows] if self.tokens else [],
            confidence=[self.confidence[i] for i in rows] if self.confidence else [],
            prompts=[self.prompts[i] for i in rows] if self.prompts else [],
            retrieved=[self.retrieved[i] for i in rows] if self.retrieved else [],
            origins=[self.origins[i] for i in rows] if self.origins else [],
        )

    def concatenate(self, other: RunData) -> RunData:
        """This run's questions, then `other`'s (the same members in the same order; InputError otherwise). A
        per-answer field one of them lacks (records of old runs) is left out."""
        if other.names != self.names:
            raise InputError(f"runs of different members cannot be joined: {self.names} and {other.names}")

        def both(name: str) -> list:
            first, second = getattr(self, name), getattr(other, name)
            return first + second if first and second else []

        return RunData(
            names=self.names,
            ids=self.ids + other.ids,
            answers=self.answers + other.answers,
            golds=self.golds + other.golds,
            passages=self.passages + other.passages,
            joined=self.joined + other.joined,
            texts=self.texts + other.texts,
            seconds=both("seconds"),
            tokens=both("tokens"),
            confidence=both("confidence"),
            prompts=both("prompts"),
            retrieved=both("retrieved"),
            origins=self.origin_ids + other.origin_ids,
        )


def load_runs(paths: Sequence[str | Path], members: list[str] | None = None) -> RunData:
    """Several runs read as one (`load_run` each, the members of the first where none are given, in order); InputError
    when a question id repeats across them."""
    if not paths:
        raise InputError("no records given")
    data = load_run(paths[0], members)
    for path in paths[1:]:
        data = data.concatenate(load_run(path, data.names))
    _unique(data.ids, paths)
    return data


def run_paths(records: str | Path | Sequence[str | Path]) -> list[Path]:
    """The path of one run, or of several, as a list."""
    return [Path(records)] if isinstance(records, str | Path) else [Path(path) for path in records]


def named_runs(paths: Sequence[Path]) -> str | list[str]:
    """The runs as a weights file's `meta.records` names them: the one path, or the list of them."""
    return str(paths[0]) if len(paths) == 1 else [str(path) for path in paths]


def read_runs(paths: Sequence[str | Path]) -> list[Any]:
    """The records of several runs, in order (eor.runs.records.read_records each); InputError when a question id
    repeats across them, as `load_runs` has it."""
    if not paths:
        raise InputError("no records given")
    records = [record for path in paths for record in read_records(path)]
    _unique([record.id for record in records], paths)
    return records


def _unique(ids: Sequence[str], paths: Sequence[str | Path]) -> None:
    repeated = sorted(i for i, count in Counter(ids).items() if count > 1)
    if repeated:
        raise InputError(f"question id(s) repeat across {', '.join(map(str, paths))}: {', '.join(repeated[:5])}")


def load_run(path: str | Path, members: list[str] | None = None, unlabelled: bool = False) -> RunData:
    """Read a run folder (or records file, `.jsonl` or `.jsonl.gz`). `unlabelled`: keep the questions without gold
    answers too (their `golds` empty: never right), as questions a corpus cannot answer may come. A question on
    which a member failed (the record names it `degraded`: `eor run --retry-failed` runs it again) is left out,
    with a warning; a record lacking a member for another reason is an InputError."""
    records = read_records(path)
    if not records:
        raise InputError(f"{path}: no records")
    names = list(records[0].members if members is None else members)
    if len(set(names)) != len(names):
        raise InputError(f"{path}: member names repeat: {names}")
    ids, answers, golds, passages, texts, seconds, tokens, confidence, prompts = [], [], [], [], [], [], [], [], []
    retrieved: list[list[list[str]]] = []
    origins: list[str] = []
    failed: list[str] = []
    for record in records:
        missing = [name for name in names if name not in record.members]
        if missing and set(missing) <= set(record.degraded):
            failed.append(record.id)
            continue
        if missing:
            raise InputError(f"{path}: record {record.id!r} lacks member(s) {', '.join(missing)}")
        if not record.answers and not unlabelled:
            continue
        outputs = [record.members[name] for name in names]
        ids.append(record.id)
        texts.append(record.question)
        answers.append([out.answer for out in outputs])
        golds.append(list(record.answers))
        passages.append([[str(p.get("text", "")) for p in out.passages] for out in outputs])
        seconds.append([None if out.seconds is None else float(out.seconds) for out in outputs])
        tokens.append([out.tokens for out in outputs])
        confidence.append([out.confidence for out in outputs])
        prompts.append([out.prompt for out in outputs])
        retrieved.append([out.retrieved_texts for out in outputs])
        origins.append(str(record.extra.get(ABLATED_FROM) or record.id))
    if failed:
        log.warning(
            "%s: %d question(s) left out, a member failed on each (e.g. %s; eor run --retry-failed runs it again)",
            path,
            len(failed),
            failed[0],
        )
    if not answers:
        raise InputError(f"{path}: no record has gold answers to train on")
    joined = [[" ".join(texts_) for texts_ in row] for row in passages]
    return RunData(
        names, ids, answers, golds, passages, joined, texts, seconds, tokens, confidence, prompts, retrieved, origins
    )
