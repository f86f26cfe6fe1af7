"""Per-candidate features of the learned answer selector (beyond the paper), computed from what records hold.

For question q and member m (candidate answer y_m), with the member's passages P_m (a list of texts):

    sim:<metric>   mean_{n≠m} sim_k(y_m, y_n)            pooled similarity per metric (eq. 6 without weights)
    agreement      #{n≠m : norm(y_n) = norm(y_m)} / (M−1)  share of the other members giving the same answer
    grounded       y_m occurs in P_m                        (eor.answers.contains on the normalised texts)
    first_passage  y_m occurs in P_m[0]
    support        #{n : y_m occurs in P_n} / M             share of all members' passages holding the answer
    no_passages    P_m is empty (ReFree)
    log_length     log(1 + number of tokens of norm(y_m))
    long           norm(y_m) has more than 5 tokens         (appendix B's filter length)
    refusal        y_m is empty or refuses ("sorry", "cannot", "unknown", ...)
    in_question    share of norm(y_m)'s tokens that occur in the question (copying the question)
    member:<name>  1 for the candidate's own member          (its prior accuracy, learned)
    vote:<name>    1 when member <name> gives the same normalised answer (a learned weighted vote)
    found:<name>   1 when the answer occurs in member <name>'s passages (whose retrieval backs it)

With a single member, the pooled features are 0. Every feature is a float; `FeatureSet.matrix` has shape
(Q, M, F) and `names` lists the F feature names in order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eor.answers import contains, normalize_answer
from eor.errors import InputError

#: answers that decline rather than answer (matched on the lower-cased raw answer).
REFUSAL = re.compile(
    r"\b(sorry|cannot|can't|can not|unable|unknown|not (?:provided|mentioned|specified|available|clear|given)"
    r"|no (?:information|answer)|don't know|do not know|not sure|none of the)\b"
)
LONG_ANSWER_TOKENS = 5
BASE_FEATURES = (
    "agreement",
    "grounded",
    "first_passage",
    "support",
    "no_passages",
    "log_length",
    "long",
    "refusal",
    "in_question",
)


@dataclass(frozen=True)
class FeatureSet:
    names: list[str]
    matrix: np.ndarray  # (Q, M, F)


PER_MEMBER = ("member", "vote", "found")


def feature_names(metrics: Sequence[str], members: Sequence[str]) -> list[str]:
    per_member = [f"{kind}:{name}" for kind in PER_MEMBER for name in members]
    return [f"sim:{metric}" for metric in metrics] + list(BASE_FEATURES) + per_member


def is_refusal(answer: str) -> bool:
    return not normalize_answer(answer) or REFUSAL.search(answer.lower()) is not None


def candidate_features(
    tensor: np.ndarray,
    answers: Sequence[Sequence[str]],
    passages: Sequence[Sequence[Sequence[str]]],
    questions: Sequence[str],
    metrics: Sequence[str],
    members: Sequence[str],
    member_index: Sequence[int] | None = None,
) -> FeatureSet:
    """Features of every candidate, shape (Q, M, F).

    tensor: similarities (Q, M, M, K) of `answers` under `metrics`; passages[q][m]: member m's passage texts;
    members: every member name the selector knows; member_index[m]: the position in `members` of the m-th
    answering member (default: the answers are from all members, in order).
    """
    values = np.asarray(tensor, dtype=float)
    n_questions = len(answers)
    n_members = values.shape[1] if values.ndim == 4 else 0
    index = list(range(n_members)) if member_index is None else list(member_index)
    if values.shape[:3] != (n_questions, n_members, n_members) or values.shape[3] != len(metrics):
        raise InputError(f"similarity tensor of shape {values.shape} does not fit {n_questions} questions")
    if len(passages) != n_questions or len(questions) != n_questions or len(index) != n_members:
        raise InputError("answers, passages, questions and member positions must describe the same candidates")
    names = feature_names(metrics, members)
    matrix = np.zeros((n_questions, n_members, len(names)))
    k = len(metrics)
    if n_members > 1:
        off_diagonal = ~np.eye(n_members, dtype=bool)
        matrix[:, :, :k] = (values * off_diagonal[None, :, :, None]).sum(axis=2) / (n_members - 1)
    base = k + len(BASE_FEATURES)
    columns = np.asarray(index)
    width = len(members)
    for q in range(n_questions):
        rows, votes, found = _base_rows(answers[q], passages[q], questions[q])
        view = matrix[q]  # (M, F); one advanced index keeps the [m, n] order of votes and found
        view[:, k:base] = rows
        view[:, base + width + columns] = votes
        view[:, base + 2 * width + columns] = found
    for m, position in enumerate(index):
        matrix[:, m, base + position] = 1.0
    return FeatureSet(names, matrix)


def _base_rows(
    answers: Sequence[str], passages: Sequence[Sequence[str]], question: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base features (M, B), same answer as member n (M, M), answer found in member n's passages (M, M))."""
    n_members = len(answers)
    if len(passages) != n_members:
        raise InputError(f"{len(passages)} passage lists for {n_members} answers")
    normalised = [normalize_answer(answer) for answer in answers]
    joined = ["\n".join(texts) for texts in passages]
    question_tokens = set(normalize_answer(question).split())
    rows = np.zeros((n_members, len(BASE_FEATURES)))
    votes = np.zeros((n_members, n_members))
    found_in = np.zeros((n_members, n_members))
    for m, (answer, norm) in enumerate(zip(answers, normalised, strict=True)):
        tokens = norm.split()
        same = sum(1 for n, other in enumerate(normalised) if n != m and other == norm)
        found = [bool(norm) and contains(text, answer) == 1.0 for text in joined]
        votes[m] = [bool(norm) and other == norm for other in normalised]
        found_in[m] = found
        rows[m] = (
            same / (n_members - 1) if n_members > 1 else 0.0,
            float(found[m]),
            float(bool(passages[m]) and bool(norm) and contains(passages[m][0], answer) == 1.0),
            sum(found) / n_members,
            float(not passages[m]),
            math.log1p(len(tokens)),
            float(len(tokens) > LONG_ANSWER_TOKENS),
            float(is_refusal(answer)),
            sum(token in question_tokens for token in tokens) / len(tokens) if tokens else 1.0,
        )
    return rows, votes, found_in
