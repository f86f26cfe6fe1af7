"""Answer correctness, in one place: g(prediction, golds) for training and scoring voters, benchmark reports,
eRAG's downstream labels, utility and `eor run`'s summary (a name -> function registry).

Each metric scores a prediction against the best of the gold answers (eor.core.answers.best_over_golds): `em`
(normalised exact match, the paper's default), `f1` (token F1), `contains` (a gold answer occurs in the
prediction as a whole-token span), `semantic` (sentence-embedding equivalence, eor.core.correctness.semantic) and
`bem` (a BERT answer-equivalence classifier that reads the question too, eor.core.correctness.bem). Other code
adds metrics with `register_correctness`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eor.core.answers import best_over_golds, contains, exact_match, matches_gold, token_f1
from eor.core.correctness.bem import bem_correctness
from eor.core.correctness.semantic import semantic_equivalence
from eor.core.errors import InputError
from eor.core.registry import Registry

CorrectnessFunction = Callable[[str, str], float]
"""(prediction, one gold answer) -> score in [0, 1]."""
CORRECTNESS: Registry[CorrectnessFunction] = Registry("correctness metric")
for _name, _function in (
    ("em", exact_match),
    ("f1", token_f1),
    ("contains", contains),
    ("bem", bem_correctness),
    ("semantic", semantic_equivalence),
):
    CORRECTNESS.register(_name, _function)


def register_correctness(name: str, *, replace: bool = False) -> Callable[[CorrectnessFunction], CorrectnessFunction]:
    """Register `function(prediction, gold) -> [0, 1]` as correctness metric `name` (a decorator)."""
    return CORRECTNESS.add(name, replace=replace)


def get_correctness(name: str) -> CorrectnessFunction:
    return CORRECTNESS[name]


def score_answer(metric: str, prediction: str, golds: Sequence[str]) -> float:
    """The prediction's best score over the gold answers under `metric` (em, f1, contains, ...)."""
    return best_over_golds(get_correctness(metric), prediction, golds)


def correctness_matrix(
    answers: Sequence[Sequence[str]],
    golds: Sequence[Sequence[str]],
    metric: str = "em",
    questions: Sequence[str] | None = None,
    *,
    function: CorrectnessFunction | None = None,
) -> np.ndarray:
    """g(y_m, a) per question and member, shape (Q, M); each distinct answer of a question is scored once.
    `function` scores in place of the one registered as `metric` (e.g. a `BemCorrectness` of a chosen model).

    A metric that judges an answer with its question (`needs_question`, e.g. `bem`: eor.core.correctness.bem) scores
    every distinct (question, answer, gold) triple in one call of its `score`, and needs `questions`."""
    rows = correctness_rows(answers, golds, metric, questions, function=function)
    width = len(answers[0]) if len(answers) else 0
    return np.array(rows, dtype=float).reshape(len(answers), width)


def correctness_rows(
    answers: Sequence[Sequence[str]],
    golds: Sequence[Sequence[str]],
    metric: str = "em",
    questions: Sequence[str] | None = None,
    *,
    function: CorrectnessFunction | None = None,
) -> list[list[float]]:
    """`correctness_matrix`'s rows, each question's as long as its answers (questions may have different
    numbers of answers: e.g. the judge's candidates)."""
    function = get_correctness(metric) if function is None else function
    if len(answers) != len(golds):
        raise InputError(f"got answers for {len(answers)} questions but gold answers for {len(golds)}")
    for q, gold in enumerate(golds):
        if isinstance(gold, str):
            raise InputError(f"question {q}: gold answers must be a list of strings, got a string")
    if getattr(function, "needs_question", False):
        return _with_questions(function, answers, golds, questions, metric)
    rows = []
    for row, gold in zip(answers, golds, strict=True):
        scored = {answer: best_over_golds(function, answer, gold) for answer in dict.fromkeys(row)}
        rows.append([scored[answer] for answer in row])
    return rows


def _with_questions(
    function: Any,
    answers: Sequence[Sequence[str]],
    golds: Sequence[Sequence[str]],
    questions: Sequence[str] | None,
    metric: str,
) -> list[list[float]]:
    if questions is None or len(questions) != len(answers):
        raise InputError(f"the {metric} correctness judges each answer with its question: give the questions")
    triples = list(
        dict.fromkeys(
            (question, answer, gold)
            for question, row, gold_list in zip(questions, answers, golds, strict=True)
            for answer in row
            for gold in gold_list
        )
    )
    score = dict(zip(triples, function.score(triples), strict=True))
    return [
        [max((score[(question, answer, gold)] for gold in gold_list), default=0.0) for answer in row]
        for question, row, gold_list in zip(questions, answers, golds, strict=True)
    ]


def members_right(records: Sequence[Any], members: Sequence[str]) -> np.ndarray:
    """(Q, M): 1.0 where a record (eor.core.results.Record) holds the member's answer and it matches a gold answer
    (eor.core.answers.matches_gold, how every EM figure counts an answer right), else 0.0."""
    rows = [[m in r.members and matches_gold(r.members[m].answer, r.answers) for m in members] for r in records]
    return np.asarray(rows, dtype=float).reshape(len(records), len(members))
