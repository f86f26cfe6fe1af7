"""Corpus ablation: questions whose answer the corpus does not hold, made from questions whose answer it does,
to teach P(right) what an unanswerable question looks like (docs/abstention.md, "Beyond the corpus").

An ablated copy of a question withholds from its retrieval its gold passages and every passage of the corpus
that holds one of its gold answers (SQuAD normalisation, a whole-token span of the passage's title or text).
The copy is a question of its own (`<id>/ablated`), naming the question it was made from (`ablated_from`:
a question and its copy fall in the same cross-validation fold) and the passages withheld (`withheld`);
`eor run` applies the mask at retrieval over the indexes built once (retrievers.withheld), so its records
state what was withheld and resume, grow and pack as any other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eor.core.answers import normalize_answer
from eor.core.atomic import atomic_file
from eor.core.data import ABLATED_FROM, WITHHELD, Question
from eor.core.errors import InputError
from retrievers.corpus import Passage

#: the suffix of an ablated copy's id
SUFFIX = "/ablated"


class Ablation:
    """The corpus's passages, normalised once, and each question's ablated copy (`copy`)."""

    def __init__(self, passages: Iterable[Passage]) -> None:
        self._normalised = [(p.id, f" {normalize_answer(p.title)} ", f" {normalize_answer(p.text)} ") for p in passages]
        self.ids = {pid for pid, _, _ in self._normalised}

    def withheld(self, question: Question) -> tuple[list[str], list[str]]:
        """The question's gold passages (those the corpus has) and the other passages that hold a gold answer."""
        if not question.answers:
            raise InputError(f"question {question.id!r} has no gold answers: nothing to withhold for")
        gold = [str(pid) for pid in question.extra.get("gold_passages") or [] if str(pid) in self.ids]
        golds = {f" {norm} " for answer in question.answers if (norm := normalize_answer(answer))}
        taken = set(gold)
        holding = [
            pid
            for pid, title, text in self._normalised
            if pid not in taken and any(g in text or g in title for g in golds)
        ]
        return gold, holding

    def copy(self, question: Question) -> dict[str, Any]:
        """The question-file line of the question's ablated copy."""
        if question.withheld:
            raise InputError(f"question {question.id!r} is already an ablated copy")
        gold, holding = self.withheld(question)
        extra = {key: value for key, value in question.extra.items() if key not in (WITHHELD, ABLATED_FROM)}
        return {
            "id": question.id + SUFFIX,
            "question": question.question,
            "answers": list(question.answers),
            **extra,
            ABLATED_FROM: question.id,
            WITHHELD: sorted(set(gold) | set(holding)),
            "withheld_why": {"gold_passages": len(gold), "holding_an_answer": len(holding)},
        }


def write_ablated(questions: list[Question], passages: Iterable[Passage], out: Path) -> dict[str, float]:
    """Every question's ablated copy into the question file `out` (atomically); what was withheld, summarised."""
    if not questions:
        raise InputError("no questions to make ablated copies of")
    ablation = Ablation(passages)
    lines = [ablation.copy(question) for question in questions]
    with atomic_file(out) as handle:
        for line in lines:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    counts = sorted(len(line[WITHHELD]) for line in lines)
    return {
        "questions": len(lines),
        "passages": len(ablation.ids),
        "withheld_median": counts[len(counts) // 2],
        "withheld_max": counts[-1],
        "withheld_mean": sum(counts) / len(counts),
    }
