"""The four-way error breakdown of a RALM (EoR paper, section 3 and appendix B) and the error RWR.

Per member m and question n, from the member's answer, its retrieved text and the gold answers:

- retriever error   E_r = 1 when no gold answer is contained in the retrieved text;
- hallucination     E_h = 1 when the generated answer is not contained in the retrieved text;
- correct           A   = 1 when the answer is correct (exact match with any gold by default);
- extraction error  E_e = (1 − E_r)(1 − E_h)(1 − A);
- lucky guess       E_luck = E_r · E_h · A.

"Contained" is appendix B's normalised exact match: the normalised piece (eor.core.answers.normalize_answer)
occurs in the normalised text as a whole-token span. A piece that normalises to nothing (an empty answer,
"The") is contained nowhere, so an empty answer counts as a hallucination.

Members without retrieval (ReFree, or any member whose retrieved text is empty) follow the paper's
convention that retrieval-free is "a singular retriever which reads the query and outputs an empty set"
(footnote 1): nothing is contained in the empty set, so E_r = E_h = 1 for every question, E_e = 0, and each
correct answer is a lucky guess. No special case is needed: the containment rule gives exactly that. Leave
such members out of the input if their (trivial) error rows are not wanted.

Before anything is counted, questions where some member's answer is longer than five (whitespace) words
are dropped for every member (appendix B's D*), and the number dropped is reported.

The error RWR (eq. 5) is the share of r_j's errors that r_i avoids:
    RWR_E(i, j) = Σ_n (1 − I_E^i(n)) I_E^j(n) c_ij(n) / Σ_n I_E^j(n) c_ij(n)
with c_ij = 1 for E_r and E_h, c_ij = (1 − I_Er^i)(1 − I_Er^j) for E_e (both retrievers returned a correct
document) and c_ij = I_Er^i I_Eh^i I_Er^j I_Eh^j for the lucky guess. Zero denominators give NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from eor.core.answers import best_over_golds, exact_match, normalize_answer
from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.evaluation.inconsistency import as_indicator_matrix

ERROR_TYPES: tuple[str, ...] = ("retriever_error", "hallucination", "extraction_error", "lucky_guess")
MAX_ANSWER_WORDS = 5

Retrieved = str | Sequence[str]


@dataclass(frozen=True, eq=False)  # array fields: compare them with numpy, not ==
class ErrorIndicators:
    """0/1 (members × kept questions) indicator arrays of every error type, after the long-answer filter."""

    members: tuple[str, ...]
    kept: np.ndarray  # indices into the input questions of the questions that survived the filter
    dropped: int
    retriever_error: np.ndarray
    hallucination: np.ndarray
    correct: np.ndarray
    extraction_error: np.ndarray
    lucky_guess: np.ndarray

    @property
    def questions(self) -> int:
        """N*, the number of questions left after the filter."""
        return int(self.kept.shape[0])

    def by_type(self) -> dict[str, np.ndarray]:
        """The indicator array of each error type, keyed as in ERROR_TYPES."""
        return {name: getattr(self, name) for name in ERROR_TYPES}


@dataclass(frozen=True)
class MemberErrorSummary:
    """How often each error type (and a correct answer) occurred for one member over the kept questions."""

    member: str
    questions: int
    counts: dict[str, int]
    rates: dict[str, float]  # count / questions; NaN when no question is left

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN becomes None)."""
        return json_ready(
            {"member": self.member, "questions": self.questions, "counts": self.counts, "rates": self.rates}
        )


def text_contains(retrieved: Retrieved, piece: str) -> bool:
    """Whether the normalised `piece` is a whole-token span of the normalised retrieved text.

    `retrieved` is one string or a sequence of passages; with passages the piece must occur within one
    passage, so a match never straddles a passage boundary.
    """
    return _contained(piece, _normalized_passages(retrieved))


def _normalized_passages(retrieved: Retrieved) -> list[str]:
    """Each passage normalised and padded with spaces, so whole-token search is a substring test."""
    passages = [retrieved] if isinstance(retrieved, str) else list(retrieved)
    return [f" {normalize_answer(passage)} " for passage in passages]


def _contained(piece: str, padded_passages: list[str]) -> bool:
    needle = normalize_answer(piece)
    return bool(needle) and any(f" {needle} " in passage for passage in padded_passages)


def long_answer_mask(answers: Sequence[Sequence[str]], max_words: int = MAX_ANSWER_WORDS) -> np.ndarray:
    """Boolean mask over questions: True where some member's answer has more than `max_words` words."""
    if not answers:
        return np.zeros(0, dtype=bool)
    return np.array(
        [any(len(row[n].split()) > max_words for row in answers) for n in range(len(answers[0]))], dtype=bool
    )


def decompose(
    retriever_error: np.ndarray,
    hallucination: np.ndarray,
    correct: np.ndarray,
    members: Sequence[str] | None = None,
) -> ErrorIndicators:
    """Derive extraction errors and lucky guesses from (members × questions) 0/1 E_r, E_h and A arrays.

    No question is filtered here (use `error_indicators` for the filter on answer length).
    """
    arrays = [
        as_indicator_matrix(a, name)
        for a, name in (
            (retriever_error, "retriever_error"),
            (hallucination, "hallucination"),
            (correct, "correct"),
        )
    ]
    if len({a.shape for a in arrays}) != 1:
        raise InputError(
            "retriever_error, hallucination and correct must have the same (members × questions) shape, "
            f"got {[a.shape for a in arrays]}"
        )
    if any(np.any((a != 0) & (a != 1)) for a in arrays):
        raise InputError("error indicators must be 0 or 1; threshold graded scores before decomposing")
    e_r, e_h, ok = (a.astype(np.int64) for a in arrays)
    names = _member_names(members, e_r.shape[0])
    return ErrorIndicators(
        members=names,
        kept=np.arange(e_r.shape[1]),
        dropped=0,
        retriever_error=e_r,
        hallucination=e_h,
        correct=ok,
        extraction_error=(1 - e_r) * (1 - e_h) * (1 - ok),
        lucky_guess=e_r * e_h * ok,
    )


def error_indicators(
    answers: Sequence[Sequence[str]],
    retrieved: Sequence[Sequence[Retrieved]],
    golds: Sequence[Sequence[str]],
    *,
    members: Sequence[str] | None = None,
    metric: Callable[[str, str], float] = exact_match,
    threshold: float = 0.5,
    correct: np.ndarray | None = None,
    max_answer_words: int = MAX_ANSWER_WORDS,
) -> ErrorIndicators:
    """Every error indicator from texts: `answers[m][n]`, `retrieved[m][n]` (text or passages), `golds[n]`.

    An answer is correct when `best_over_golds(metric, answer, golds) >= threshold` (exact match by
    default; any threshold in (0, 1] is the same for 0/1 metrics). A precomputed 0/1 `correct` array
    (members × all questions, e.g. from an LLM judge or BEM) replaces the metric. Questions where some
    member's answer has more than `max_answer_words` words are dropped first; `dropped` counts them.
    """
    n_members = len(answers)
    n_questions = len(golds)
    if len(retrieved) != n_members:
        raise InputError(f"answers has {n_members} members but retrieved has {len(retrieved)}")
    for m in range(n_members):
        if len(answers[m]) != n_questions or len(retrieved[m]) != n_questions:
            raise InputError(
                f"member {m} has {len(answers[m])} answers and {len(retrieved[m])} retrieved texts, "
                f"but there are {n_questions} questions (one gold list per question)"
            )
    if not all(isinstance(answer, str) for row in answers for answer in row):
        raise InputError("answers must be strings (use '' for a member that gave no answer)")
    if correct is not None:
        correct = as_indicator_matrix(correct)
        if correct.shape != (n_members, n_questions):
            raise InputError(
                f"correct has shape {correct.shape}, expected (members, questions) = {(n_members, n_questions)}"
            )

    keep = ~long_answer_mask(answers, max_answer_words) if n_members else np.ones(n_questions, dtype=bool)
    kept = np.flatnonzero(keep)
    e_r = np.zeros((n_members, kept.size), dtype=np.int64)
    e_h = np.zeros_like(e_r)
    ok = np.zeros_like(e_r)
    for m in range(n_members):
        for col, n in enumerate(kept.tolist()):
            passages = _normalized_passages(retrieved[m][n])  # once per cell: retrieved texts are long
            e_r[m, col] = not any(_contained(gold, passages) for gold in golds[n])
            e_h[m, col] = not _contained(answers[m][n], passages)
            if correct is None:
                ok[m, col] = best_over_golds(metric, answers[m][n], golds[n]) >= threshold
    if correct is not None:
        ok = correct[:, kept]
    return replace(decompose(e_r, e_h, ok, members), kept=kept, dropped=int(n_questions - kept.size))


def summarize_errors(indicators: ErrorIndicators) -> list[MemberErrorSummary]:
    """Per member: counts and rates (count / N*) of each error type and of correct answers."""
    summaries = []
    n = indicators.questions
    arrays = {**indicators.by_type(), "correct": indicators.correct}
    for m, member in enumerate(indicators.members):
        counts = {name: int(array[m].sum()) for name, array in arrays.items()}
        rates = {name: (count / n if n else float("nan")) for name, count in counts.items()}
        summaries.append(MemberErrorSummary(member=member, questions=n, counts=counts, rates=rates))
    return summaries


def error_rwr(errors: np.ndarray, condition: np.ndarray | None = None) -> np.ndarray:
    """RWR_E(i, j) = Σ (1 − E_i) E_j c_ij / Σ E_j c_ij with c_ij(n) = condition[i, n] · condition[j, n].

    `errors` and `condition` are (members × questions) 0/1 arrays; no condition means c_ij = 1 (eq. 5).
    NaN where the denominator is zero (r_j never makes the error under the condition). For 0/1 errors
    the diagonal is 0 when defined.
    """
    e = as_indicator_matrix(errors, "errors")
    c = np.ones_like(e) if condition is None else as_indicator_matrix(condition, "condition")
    if c.shape != e.shape:
        raise InputError(f"condition has shape {c.shape} but errors has shape {e.shape}")
    made = e * c  # made[j, n] = E_j(n) c_j(n)
    avoided = ((1.0 - e) * c) @ made.T  # avoided[i, j] = Σ_n (1 − E_i) c_i E_j c_j
    occurred = c @ made.T  # occurred[i, j] = Σ_n c_i E_j c_j
    out = np.full(avoided.shape, np.nan)
    np.divide(avoided, occurred, out=out, where=occurred != 0)
    return out


def error_rwr_matrices(indicators: ErrorIndicators) -> dict[str, np.ndarray]:
    """RWR_E for each error type with appendix B's conditioning, keyed as in ERROR_TYPES."""
    e_r = indicators.retriever_error
    e_h = indicators.hallucination
    # Appendix B prints I*_luck = I_Er^i · I_Eh^i · I_Er^j · I_Er^j, repeating I_Er^j. The text conditions
    # E_e on "both retrievers return the correct documents" and says the lucky guess is defined "similarly",
    # so the evident intent is both members in the lucky-guess regime: I_Er^i · I_Eh^i · I_Er^j · I_Eh^j.
    # (The two readings give the same numbers, since I_luck^j already contains I_Er^j · I_Eh^j and every
    # term of both sums carries I_luck^j.)
    return {
        "retriever_error": error_rwr(e_r),
        "hallucination": error_rwr(e_h),
        "extraction_error": error_rwr(indicators.extraction_error, condition=1 - e_r),
        "lucky_guess": error_rwr(indicators.lucky_guess, condition=e_r * e_h),
    }


def breakdown_report(indicators: ErrorIndicators) -> dict[str, Any]:
    """A JSON-ready report: filter counts, per-member counts and rates, RWR_E matrices (NaN as None)."""
    return json_ready(
        {
            "members": list(indicators.members),
            "questions_kept": indicators.questions,
            "questions_dropped": indicators.dropped,
            "per_member": [summary.as_dict() for summary in summarize_errors(indicators)],
            "rwr": error_rwr_matrices(indicators),
        }
    )


def _member_names(members: Sequence[str] | None, count: int) -> tuple[str, ...]:
    if members is None:
        return tuple(f"member_{m}" for m in range(count))
    names = tuple(members)
    if len(names) != count:
        raise InputError(f"{len(names)} member names given for {count} members")
    return names
