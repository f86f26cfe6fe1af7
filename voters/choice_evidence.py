"""The evidence of a vote's choice: what P(right) (voters.right) and P(unanswerable) judge a chosen answer on, the
same for every voter kind.

Whatever the voter, its decision scores over the members that voted choose the answer (argmax, ties to the first;
a cascade's scores are those of the step it stopped at). The features (`FEATURES`), computed from the scores and
what the voting members gave:

    score            the chosen answer's decision score z
    margin           z minus the best score of an answer that differs once normalised (0 when none does)
    alone            1 when no voting member gave another answer
    agreement        the share of voting members giving the chosen answer (normalised)
    distinct         the number of different answers over the number of voting members
    log_length       log(1 + tokens of the normalised chosen answer)
    refusal          the chosen answer declines ("sorry", "unknown", ...; voters.features)
    grounded         the chosen answer occurs in its member's own passages
    support          the share of voting members whose passages hold the chosen answer
    conf:mean, conf:min, conf:margin       the reader's confidence in the chosen answer (eor.core.confidence):
                     mean and minimum token log-probability, the first token's margin
    conf:agreeing_best, conf:agreeing_mean the best and the mean of conf:mean over the members giving it
    retr:cosine      over the passages the voting members retrieved from a corpus (voters.relevance): the best
                     cosine with the question under eor's own encoder,
    retr:margin      its margin over the mean of the others,
    retr:share       the best share of the question's content words a passage holds,
    support:passages and the share of those passages that hold the chosen answer

**Feature sets** (`FITS`). Records made before the reader's confidence was recorded, and a reader that reports
none, give a choice without the conf features; a batch without the members' retrieved passages gives none of the
retrieval family. No feature is filled in: P(right) holds a fit per feature set it may meet (voters.right),
"confidence, retrieval" (every feature), "confidence" (no retrieval family: the fits of weights files made
before it), "retrieval" (no reader confidence) and "no confidence" (neither), and a choice is scored by the
richest fit whose features it has.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eor.core.answers import contains, normalize_answer
from eor.core.errors import InputError
from voters.batch import VoteBatch
from voters.features import is_refusal
from voters.relevance import Relevance
from voters.scoring import choose

#: the features of a vote's choice, in order (module docstring)
FEATURES = (
    "score",
    "margin",
    "alone",
    "agreement",
    "distinct",
    "log_length",
    "refusal",
    "grounded",
    "support",
    "conf:mean",
    "conf:min",
    "conf:margin",
    "conf:agreeing_best",
    "conf:agreeing_mean",
    "retr:cosine",
    "retr:margin",
    "retr:share",
    "support:passages",
)
#: the reader's confidence in the chosen answer and in the answers agreeing with it
CONFIDENCE = ("conf:mean", "conf:min", "conf:margin", "conf:agreeing_best", "conf:agreeing_mean")
#: how well the passages retrieved match the question, and how many of them hold the answer (voters.relevance)
RETRIEVAL = ("retr:cosine", "retr:margin", "retr:share", "support:passages")
#: the feature sets a P(right) is fitted for, richest first: a choice is scored by the first whose features it has.
#: Files from before the retrieval family hold the two fits without it (their features as they were).
WITH_BOTH, WITH_CONFIDENCE, WITH_RETRIEVAL, WITHOUT_CONFIDENCE = (
    "confidence, retrieval",
    "confidence",
    "retrieval",
    "no confidence",
)
#: the fits of a P(right) fitted on answerable questions alone: the retrieval family, evidence of whether the corpus
#: holds an answer at all, is learned only with questions it does not (eor.learning.beyond_corpus)
ANSWERABLE_FITS = (WITH_CONFIDENCE, WITHOUT_CONFIDENCE)
FITS = {
    WITH_BOTH: FEATURES,
    WITH_CONFIDENCE: tuple(f for f in FEATURES if f not in RETRIEVAL),
    WITH_RETRIEVAL: tuple(f for f in FEATURES if f not in CONFIDENCE),
    WITHOUT_CONFIDENCE: tuple(f for f in FEATURES if f not in CONFIDENCE + RETRIEVAL),
}
#: the group of a voter that runs every member, and a cascade's two groups
ALL, EARLY, LAST = "all", "early", "last"
GROUPS = (ALL, EARLY, LAST)
Texts = Sequence[str]


@dataclass(frozen=True)
class Evidence:
    """Per question: the chosen member's position, the features of the choice (Q, len(FEATURES); NaN where the
    reader's confidence is unknown) and the group (ALL, EARLY or LAST)."""

    pick: np.ndarray
    features: np.ndarray
    group: np.ndarray

    def __len__(self) -> int:
        return len(self.pick)

    def take(self, rows: np.ndarray) -> Evidence:
        return Evidence(self.pick[rows], self.features[rows], self.group[rows])

    @staticmethod
    def concatenate(parts: Sequence[Evidence]) -> Evidence:
        width = len(FEATURES)
        return Evidence(
            np.concatenate([p.pick for p in parts]).astype(int),
            np.concatenate([p.features.reshape(-1, width) for p in parts]),
            np.concatenate([p.group for p in parts]).astype(str),
        )


def evidence(
    scores: np.ndarray,
    answers: Sequence[Texts],
    passages: Sequence[Sequence[Texts]],
    confidence: Sequence[Sequence[Mapping[str, Any] | None]] | None = None,
    group: str | Sequence[str] = ALL,
    pick: Sequence[int] | None = None,
    retrieved: Sequence[Sequence[Texts]] | None = None,
    relevance: Sequence[Relevance] | None = None,
) -> Evidence:
    """The evidence of each question's choice: decision scores (Q, M) over the members' `answers` (Q, M),
    their `passages` (Q, M, texts) and the reader's `confidence` summaries (eor.core.confidence; None: unknown).
    Members with a score of −inf (dropped by their weight, or not run) are not in the vote. `pick`: the
    chosen positions when the voter chose otherwise than the argmax of `scores` (ties to the first).
    `retrieved` (Q, M, texts: each member's passages found in a corpus) and their `relevance` to each question
    (voters.relevance) give the retrieval family; without them it is unknown (NaN)."""
    values = np.asarray(scores, dtype=float).reshape(len(answers), -1)
    chosen = choose(values) if pick is None else np.asarray(pick, dtype=int)
    rows = [
        _row(values[q], answers[q], passages[q], None if confidence is None else confidence[q], int(chosen[q]))
        + _retrieval(
            values[q],
            answers[q],
            None if retrieved is None else retrieved[q],
            None if relevance is None else relevance[q],
            int(chosen[q]),
        )
        for q in range(len(answers))
    ]
    groups = np.broadcast_to(np.asarray(group, dtype=object), (len(answers),)).astype(str)
    return Evidence(chosen, np.array(rows, dtype=float).reshape(len(answers), len(FEATURES)), groups)


def _row(
    scores: np.ndarray,
    answers: Texts,
    passages: Sequence[Texts],
    confidence: Sequence[Mapping[str, Any] | None] | None,
    pick: int,
) -> list[float]:
    """The features of one question's choice (module docstring)."""
    voting = [m for m in range(len(answers)) if np.isfinite(scores[m]) or m == pick]
    normal = {m: normalize_answer(answers[m]) for m in voting}
    agreeing = [m for m in voting if normal[m] == normal[pick]]
    rivals = [scores[m] for m in voting if normal[m] != normal[pick] and np.isfinite(scores[m])]
    top = float(scores[pick]) if np.isfinite(scores[pick]) else 0.0
    tokens = normal[pick].split()
    found = [bool(tokens) and contains("\n".join(passages[m]), answers[pick]) == 1.0 for m in voting]
    known = [dict(confidence[m] or {}) if confidence is not None else {} for m in range(len(answers))]
    own = known[pick]
    agreeing_conf = [float(known[m]["mean_logprob"]) for m in agreeing if known[m].get("mean_logprob") is not None]
    return [
        top,
        top - max(rivals) if rivals else 0.0,
        float(not rivals),
        len(agreeing) / len(voting),
        len(set(normal.values())) / len(voting),
        math.log1p(len(tokens)),
        float(is_refusal(answers[pick])),
        float(bool(tokens) and contains("\n".join(passages[pick]), answers[pick]) == 1.0),
        sum(found) / len(voting),
        _number(own.get("mean_logprob")),
        _number(own.get("min_logprob")),
        _number(own.get("first_margin")),
        max(agreeing_conf) if agreeing_conf else math.nan,
        sum(agreeing_conf) / len(agreeing_conf) if agreeing_conf else math.nan,
    ]


def _retrieval(
    scores: np.ndarray, answers: Texts, retrieved: Sequence[Texts] | None, relevance: Relevance | None, pick: int
) -> list[float]:
    """The retrieval family of one question's choice, over the passages the voting members retrieved: the best
    cosine with the question, its margin over the others, the best share of the question's words
    (voters.relevance), and the share of those passages that hold the chosen answer; NaN when unknown."""
    if retrieved is None or relevance is None:
        return [math.nan] * len(RETRIEVAL)
    voting = [m for m in range(len(answers)) if np.isfinite(scores[m]) or m == pick]
    texts = list(dict.fromkeys(text for m in voting for text in retrieved[m]))
    holding = sum(contains(text, answers[pick]) == 1.0 for text in texts) if normalize_answer(answers[pick]) else 0
    return [*relevance.over(texts), holding / len(texts) if texts else 0.0]


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def choice_evidence(voter: Any, X: VoteBatch) -> Evidence:
    """The evidence of a fitted voter's choices on batch X (recorded answers of every member, voters.batch):
    from the scores and groups of its `vote_scores` where it has one (a cascade: the step it stops at), else
    from its decision function (group ALL); the features read X's passages and the reader's confidence."""
    if X.passages is None:
        raise InputError("the evidence of a vote reads each member's passages: give them (passages=...)")
    retrieved, relevance = X.retrieved, X.relevance()
    if voter.in_steps:  # voters.protocol: the scores of the step each question stops at
        scores, groups, picks = voter.vote_scores(X)
        return evidence(scores, X.answers, X.passages, X.confidence, groups, picks, retrieved, relevance)
    return evidence(voter.decision_function(X), X.answers, X.passages, X.confidence, ALL, None, retrieved, relevance)
