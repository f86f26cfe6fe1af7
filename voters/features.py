"""Per-candidate features of the learned answer selector (beyond the paper), computed from what records hold.

For question q and member m (candidate answer y_m), with the member's passages P_m (a list of texts):

    sim:<metric>   mean_{n≠m} sim_k(y_m, y_n)            pooled similarity per metric (eq. 6 without weights)
    agreement      #{n≠m : norm(y_n) = norm(y_m)} / (M−1)  share of the other members giving the same answer
    grounded       y_m occurs in P_m                        (eor.core.answers.contains on the normalised texts)
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

and, when the records hold the reader's confidence (eor.core.confidence), last:

    conf:mean      the mean log-probability of y_m's tokens as the reader generated them
    conf:min       their minimum
    conf:margin    the first token's margin: top-1 minus top-2 log-probability
    conf:others    Σ_{n≠m, norm(y_n) = norm(y_m)} exp(conf:mean of y_n) / (M−1): agreement weighted by the
                   others' confidence

With a single member, the pooled features are 0. Every feature is a float; a member whose confidence is
unknown has NaN in its conf features (the selector fills them with their training mean). `FeatureSet.matrix`
has shape (Q, M, F) and `names` lists the F feature names in order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from eor.core.answers import contains, normalize_answer
from eor.core.errors import InputError

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
CONFIDENCE_FEATURES = ("conf:mean", "conf:min", "conf:margin", "conf:others")
#: what records hold per member (eor.core.confidence summaries), in the order of the conf features' first three.
CONFIDENCE_FIELDS = ("mean_logprob", "min_logprob", "first_margin")


def feature_names(metrics: Sequence[str], members: Sequence[str], confidence: bool = False) -> list[str]:
    per_member = [f"{kind}:{name}" for kind in PER_MEMBER for name in members]
    names = [f"sim:{metric}" for metric in metrics] + list(BASE_FEATURES) + per_member
    return names + list(CONFIDENCE_FEATURES) if confidence else names


def confidence_array(
    confidence: Sequence[Sequence[Mapping | None]] | None, shape: tuple[int, int]
) -> np.ndarray | None:
    """(Q, M, 3) mean and minimum log-probability and first margin per answer from records' confidence
    summaries (NaN where a member has none); None when no answer has any."""
    if confidence is None:
        return None
    values = np.full((*shape, len(CONFIDENCE_FIELDS)), np.nan)
    if len(confidence) != shape[0]:
        raise InputError(f"confidence for {len(confidence)} questions, answers for {shape[0]}")
    for q, row in enumerate(confidence):
        for m, entry in enumerate(row or ()):
            if isinstance(entry, Mapping):
                values[q, m] = [np.nan if entry.get(f) is None else float(entry[f]) for f in CONFIDENCE_FIELDS]
    return None if np.all(np.isnan(values)) else values


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
    confidence: Sequence[Sequence[Mapping | None]] | None = None,
) -> FeatureSet:
    """Features of every candidate, shape (Q, M, F).

    tensor: similarities (Q, M, M, K) of `answers` under `metrics`; passages[q][m]: member m's passage texts;
    members: every member name the selector knows; member_index[m]: the position in `members` of the m-th
    answering member (default: the answers are from all members, in order); confidence[q][m]: the answer's
    confidence summary (eor.core.confidence), or None where unknown (no conf features when none is known).
    """
    blocks = candidate_blocks(tensor, answers, passages, questions, metrics, confidence)
    return blocks.features(range(blocks.members), members, member_index)


@dataclass(frozen=True)
class CandidateBlocks:
    """What the features of any subset of a pool's members are made from, computed once for all M members:
    `tensor` (Q, M, M, K) similarities; `base` (Q, M, B) the base features that do not depend on the other
    members (agreement and support are filled in per subset); `same` (Q, M, M) equal normalised answers;
    `votes` (Q, M, M) the same, non-empty; `found` (Q, M, M) member m's answer in member n's passages;
    `confidence` (Q, M, 3) mean and minimum token log-probability and first margin (NaN: unknown), or None."""

    metrics: tuple[str, ...]
    tensor: np.ndarray
    base: np.ndarray
    same: np.ndarray
    votes: np.ndarray
    found: np.ndarray
    confidence: np.ndarray | None = None

    @property
    def members(self) -> int:
        return self.tensor.shape[1]

    def features(
        self, subset: Sequence[int], members: Sequence[str], member_index: Sequence[int] | None = None
    ) -> FeatureSet:
        """The features (Q, S, F) of the answers of the members at positions `subset` (the others did not
        answer): exactly `candidate_features` over those members' answers alone. `members`: the names the
        selector knows; member_index[s]: the position in `members` of the s-th subset member (default: s)."""
        chosen = [int(m) for m in subset]
        size = len(chosen)
        index = list(range(size)) if member_index is None else [int(i) for i in member_index]
        if len(index) != size or any(not 0 <= i < len(members) for i in index):
            raise InputError("answers, passages, questions and member positions must describe the same candidates")
        names = feature_names(self.metrics, members, self.confidence is not None)
        n_questions = self.tensor.shape[0]
        matrix = np.zeros((n_questions, size, len(names)))
        k = len(self.metrics)
        grid = np.ix_(range(n_questions), chosen, chosen)
        if size > 1:
            off_diagonal = ~np.eye(size, dtype=bool)
            values = self.tensor[:, chosen][:, :, chosen]
            matrix[:, :, :k] = (values * off_diagonal[None, :, :, None]).sum(axis=2) / (size - 1)
        base = k + len(BASE_FEATURES)
        matrix[:, :, k:base] = self.base[:, chosen]
        same = (self.same[grid] & ~np.eye(size, dtype=bool)[None]).sum(axis=2)
        found = self.found[grid]
        matrix[:, :, k + _AGREEMENT] = same / (size - 1) if size > 1 else 0.0
        matrix[:, :, k + _GROUNDED] = np.diagonal(found, axis1=1, axis2=2)
        matrix[:, :, k + _SUPPORT] = found.sum(axis=2) / size
        width = len(members)
        columns = np.asarray(index)
        matrix[:, :, base + width + columns] = self.votes[grid]
        matrix[:, :, base + 2 * width + columns] = found
        for s, position in enumerate(index):
            matrix[:, s, base + position] = 1.0
        if self.confidence is not None:
            matrix[:, :, -len(CONFIDENCE_FEATURES) :] = self._confidence_features(chosen, grid)
        return FeatureSet(names, matrix)

    def _confidence_features(self, chosen: list[int], grid: tuple) -> np.ndarray:
        """(Q, S, 4): the candidate's mean, min and margin, and the others' confidence on its answer."""
        assert self.confidence is not None  # the caller checks it
        own = self.confidence[:, chosen]  # (Q, S, 3)
        size = len(chosen)
        likely = np.nan_to_num(np.exp(own[:, :, 0]), nan=0.0)  # an unknown confidence backs no one
        same = self.same[grid] & ~np.eye(size, dtype=bool)[None]
        others = (same * likely[:, None, :]).sum(axis=2) / (size - 1) if size > 1 else np.zeros(own.shape[:2])
        return np.concatenate([own, others[:, :, None]], axis=2)


_AGREEMENT, _GROUNDED, _SUPPORT = (BASE_FEATURES.index(name) for name in ("agreement", "grounded", "support"))


def candidate_blocks(
    tensor: np.ndarray,
    answers: Sequence[Sequence[str]],
    passages: Sequence[Sequence[Sequence[str]]],
    questions: Sequence[str],
    metrics: Sequence[str],
    confidence: Sequence[Sequence[Mapping | None]] | None = None,
) -> CandidateBlocks:
    """The blocks of every member's candidates (see CandidateBlocks); the arguments as `candidate_features`."""
    values = np.asarray(tensor, dtype=float)
    n_questions = len(answers)
    n_members = values.shape[1] if values.ndim == 4 else 0
    if values.shape[:3] != (n_questions, n_members, n_members) or values.shape[3] != len(metrics):
        raise InputError(f"similarity tensor of shape {values.shape} does not fit {n_questions} questions")
    if len(passages) != n_questions or len(questions) != n_questions:
        raise InputError("answers, passages, questions and member positions must describe the same candidates")
    base = np.zeros((n_questions, n_members, len(BASE_FEATURES)))
    same = np.zeros((n_questions, n_members, n_members), dtype=bool)
    votes = np.zeros((n_questions, n_members, n_members))
    found = np.zeros((n_questions, n_members, n_members))
    for q in range(n_questions):
        base[q], same[q], votes[q], found[q] = _base_rows(answers[q], passages[q], questions[q])
    known = confidence_array(confidence, (n_questions, n_members))
    return CandidateBlocks(tuple(metrics), values, base, same, votes, found, known)


def _base_rows(
    answers: Sequence[str], passages: Sequence[Sequence[str]], question: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(base features (M, B) without agreement and support, same normalised answer as member n (M, M), the
    same and non-empty (M, M), answer found in member n's passages (M, M))."""
    n_members = len(answers)
    if len(passages) != n_members:
        raise InputError(f"{len(passages)} passage lists for {n_members} answers")
    normalised = [normalize_answer(answer) for answer in answers]
    joined = ["\n".join(texts) for texts in passages]
    question_tokens = set(normalize_answer(question).split())
    rows = np.zeros((n_members, len(BASE_FEATURES)))
    same = np.zeros((n_members, n_members), dtype=bool)
    votes = np.zeros((n_members, n_members))
    found_in = np.zeros((n_members, n_members))
    for m, (answer, norm) in enumerate(zip(answers, normalised, strict=True)):
        tokens = norm.split()
        same[m] = [other == norm for other in normalised]
        votes[m] = [bool(norm) and other == norm for other in normalised]
        found_in[m] = [bool(norm) and contains(text, answer) == 1.0 for text in joined]
        rows[m] = (
            0.0,  # agreement: per subset
            0.0,  # grounded: per subset (found_in[m, m])
            float(bool(passages[m]) and bool(norm) and contains(passages[m][0], answer) == 1.0),
            0.0,  # support: per subset
            float(not passages[m]),
            math.log1p(len(tokens)),
            float(len(tokens) > LONG_ANSWER_TOKENS),
            float(is_refusal(answer)),
            sum(token in question_tokens for token in tokens) / len(tokens) if tokens else 1.0,
        )
    return rows, same, votes, found_in
