"""Per-candidate features of the reader as judge: what a voter that chooses among a question's candidates
(members' answers and spans, voters.candidates) knows of each, from the candidates' likelihood scores (a
record's `judge` field, eor.pipeline.judging) and the evidence the members answered from (`Evidence`).

For question q with candidates c (members' answers first, then spans) and prompts p (each member's prompt,
and `#id` for each retrieved passage alone), with L(c|p) the reader's log-probability of c (end of turn
included) and L̄(c|p) its per-token mean, the features come in families (`FAMILIES`):

votes: who wrote it
    wrote:<member>     1 when <member> wrote c
    agreement          #members that wrote c / M
    span               1 when c is a span no member wrote
    log_length         log(1 + words of c)
evidence: where it stands in what the members read and wrote (text only, no reader)
    support:passages   share of the distinct passages read that hold c (a whole-word match, normalised)
    top:passage        1 when some member's first passage holds c
    inside:members     share of the M members whose answer holds c without being c (a sentence around it)
    in_question        share of c's words that the question has (copying the question)
type: whether c has the shape the question asks for (`question_type`, `answer_shapes`)
    type:match         the question asks for a date, a number or a name and c has that shape
    type:clash         it asks for one and c has not
scores: the reader's likelihood under the members' prompts
    lp:<member>        L(c|p_member) − max_c' L(c'|p_member)        (0 for the likeliest candidate)
    mean:<member>      L̄(c|p_member) − max_c' L̄(c'|p_member)
    mix:members        log Σ_m exp L(c|p_m) − max_c' (same)         (RAG-Sequence over the members' prompts)
    rank:members       rank of c by mix:members among the n candidates over n − 1 (0 = first, 1 = last)
    margin:members     mix:members of c minus that of the best other candidate
passages: the reader's likelihood under each passage alone
    mix:passages       log Σ_p exp L(c|p) − max_c' (same), over the passages alone
    best:passages      max_p L(c|p) − max_c' max_p L(c'|p)

absolute (not for choosing: for P(right), voters.judge_selector)
    abs:mean           max over the members' prompts of L̄(c|p)
    abs:mix            log Σ_m exp L(c|p_m)
    abs:passages       max over the passages alone of L̄(c|p)
    abs:distinct       the number of distinct non-empty answers of the members / M
    retr:cosine        over the passages the members found in a corpus (voters.relevance): the best cosine with
    retr:margin        the question, its margin over the mean of the others, and the best share of the
    retr:share         question's content words; NaN when the evidence carries no relevance (read by a fit
                       whose P(right) reads the retrieval family, `RETRIEVAL`: evidence that the corpus holds no
                       answer, docs/abstention.md)
    null:mix           the null candidate (eor.pipeline.judging.NULL_ANSWERS: the reader's own "no answer"; SQuAD
                       2.0's null span): log Σ_m exp max_t L(t|p_m), over its phrasings t and the members' prompts;
    null:margin        abs:mix of c minus null:mix (how much likelier c is than declining); NaN when the null
                       candidate was not scored (read by a fit whose P(right) reads the null family, `NULL`)

Relative values (to the question's best candidate) make a question's features comparable with another's for
choosing: a long prompt or a rare answer lowers every candidate's likelihood alike. How likely the chosen
candidate is at all, and how split the members are, say how sure the choice is: P(right) reads them. A prompt
the scores lack (a member that failed, or no scoring at all) gives its features the value 0 for every
candidate; `scored` says which likelihood families the scores hold, so that a voter can tell a missing family
from a zero.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eor.core.answers import normalize_answer
from eor.core.errors import InputError
from voters.relevance import Relevance

PASSAGE = "#"  # a prompt name that starts so is a passage alone: `#` + its id (eor.pipeline.judging)

FAMILIES: dict[str, tuple[str, ...]] = {
    "votes": ("wrote:", "agreement", "span", "log_length"),
    "evidence": ("support:passages", "top:passage", "inside:members", "in_question"),
    "type": ("type:match", "type:clash"),
    "scores": ("lp:", "mean:", "mix:members", "rank:members", "margin:members"),
    "passages": ("mix:passages", "best:passages"),
}
#: the families that need the reader's scores (the others read text only)
SCORED_FAMILIES = ("scores", "passages")
#: what P(right) reads besides a fit's own features (voters.judge_selector), by the family whose scores it needs
#: (None: the text's): absolute values, which the relative features above leave out on purpose
#: ("retrieval": the passages' relevance to the question, which only a fit made to read it reads)
RETRIEVAL, NULL = "retrieval", "null"
ABSOLUTE = {
    "abs:mean": "scores",
    "abs:mix": "scores",
    "abs:passages": "passages",
    "abs:distinct": None,
    "retr:cosine": RETRIEVAL,
    "retr:margin": RETRIEVAL,
    "retr:share": RETRIEVAL,
    "null:mix": NULL,
    "null:margin": NULL,
}

# The question types an answer's shape can be checked against, first match wins (lower-cased question).
_QUESTION_TYPES = (
    ("number", re.compile(r"\bhow (?:many|much|long|old|far|tall|big|high|deep)\b")),
    ("date", re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month|century|decade)\b")),
    ("name", re.compile(r"\bwho(?:m|se)?\b|\bwhere\b")),
)
_YEAR_OR_MONTH = re.compile(
    r"\b(?:1\d{3}|20\d{2})s?\b|\b(?:january|february|march|april|may|june|july|august|september|october"
    r"|november|december)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty"
    r"|hundred|thousand|million|billion|dozen)\b",
    re.IGNORECASE,
)
_NAME_CONNECTORS = frozenset({"of", "the", "and", "de", "del", "la", "le", "von", "van", "der", "&"})


def question_type(question: str) -> str | None:
    """`number` (how many, how long...), `date` (when, what year...), `name` (who, where) or None."""
    lowered = question.lower()
    return next((kind for kind, pattern in _QUESTION_TYPES if pattern.search(lowered)), None)


def answer_shapes(text: str) -> set[str]:
    """The shapes of an answer: `date` (a year or a month), `number` (a digit or a number word), `name` (every
    word capitalised, connectors aside, and no digit)."""
    shapes = set()
    if _YEAR_OR_MONTH.search(text):
        shapes.add("date")
    if _NUMBER.search(text):
        shapes.add("number")
    words = text.split()
    if words and not any(ch.isdigit() for ch in text):
        if all(word[0].isupper() or word.lower() in _NAME_CONNECTORS for word in words):
            shapes.add("name")
    return shapes


@dataclass(frozen=True)
class Evidence:
    """What a question's candidates are weighed against: the question, and each member's answer and passage
    texts (rank order), by member name (a member that failed: an empty answer and no passages); `relevance`: the
    best cosine, its margin and the best word share over the passages the members found in a corpus
    (`relevance_of`; None: not computed)."""

    question: str
    answers: Mapping[str, str]
    passages: Mapping[str, Sequence[str]]
    relevance: tuple[float, float, float] | None = None

    @classmethod
    def from_outputs(
        cls, question: str, outputs: Mapping[str, Any], relevance: tuple[float, float, float] | None = None
    ) -> Evidence:
        """From member outputs (eor.core.results.MemberOutput: `answer`, `passages` as dicts with `text`)."""
        return cls(
            question,
            {name: str(output.answer or "") for name, output in outputs.items()},
            {name: [str(p.get("text", "")) for p in output.passages] for name, output in outputs.items()},
            relevance,
        )


def relevance_of(questions: Sequence[str], outputs: Sequence[Mapping[str, Any]]) -> list[tuple[float, float, float]]:
    """Per question, the relevance (voters.relevance) of the passages its members' outputs (`retrieved_texts`:
    found in a corpus, never PK's or @CP's documents) hold: the best cosine, its margin over the others, the best
    share of the question's content words; in one encoder call for all."""
    retrieved = [[list(output.retrieved_texts) for output in row.values()] for row in outputs]
    found = Relevance.of(list(questions), retrieved)
    return [rel.over([text for texts in row for text in texts]) for rel, row in zip(found, retrieved, strict=True)]


@dataclass(frozen=True)
class JudgeFeatures:
    """A question's candidate texts, their features (candidates × features), the feature names, and the
    likelihood families (`SCORED_FAMILIES`) the scores held."""

    texts: list[str]
    matrix: np.ndarray
    names: list[str]
    scored: frozenset[str] = frozenset(SCORED_FAMILIES)


def feature_names(members: Sequence[str]) -> list[str]:
    names = [f"wrote:{m}" for m in members] + ["agreement", "span", "log_length"]
    names += ["support:passages", "top:passage", "inside:members", "in_question", "type:match", "type:clash"]
    names += [f"lp:{m}" for m in members] + [f"mean:{m}" for m in members]
    names += ["mix:members", "rank:members", "margin:members", "mix:passages", "best:passages"]
    return names + list(ABSOLUTE)


def family_prefixes(families: Sequence[str]) -> tuple[str, ...]:
    """The feature-name prefixes of `families` (names of `FAMILIES`); InputError naming an unknown one."""
    unknown = [family for family in families if family not in FAMILIES]
    if unknown:
        raise InputError(
            f"unknown feature famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
            f"known: {', '.join(FAMILIES)}"
        )
    return tuple(prefix for family in families for prefix in FAMILIES[family])


def judge_features(
    candidates: Sequence[Mapping[str, Any]],
    members: Sequence[str],
    evidence: Evidence,
    null: Mapping[str, Any] | None = None,
) -> JudgeFeatures:
    """The features of a question's candidates (a record's `judge["candidates"]`: dicts with `text`,
    `members` and `scores`, the scores possibly empty) for the pool `members`, weighed against `evidence`;
    `null`: the null candidate's scores (a record's `judge["null"]`, eor.pipeline.judging.null_scores), if
    scored."""
    n = len(candidates)
    names = feature_names(members)
    if not n:
        return JudgeFeatures([], np.zeros((0, len(names))), names, _scored(candidates, members))
    columns: list[np.ndarray] = [np.array([float(m in c["members"]) for c in candidates]) for m in members]
    columns.append(np.array([len(c["members"]) / max(len(members), 1) for c in candidates]))
    columns.append(np.array([float(not c["members"]) for c in candidates]))
    columns.append(np.array([math.log1p(len(normalize_answer(c["text"]).split())) for c in candidates]))
    columns += _evidence_columns([str(c["text"]) for c in candidates], members, evidence)
    totals = {m: _scores(candidates, m, "logprob") for m in members}
    means = {m: _scores(candidates, m, "mean_logprob") for m in members}
    columns += [_relative(totals[m]) for m in members] + [_relative(means[m]) for m in members]
    present = [totals[m] for m in members if not np.isnan(totals[m]).all()]
    mix = _relative(_logsumexp(present)) if present else np.zeros(n)
    order = np.argsort(-mix, kind="stable")
    rank = np.empty(n)
    rank[order] = np.arange(n)
    columns += [mix, rank / max(n - 1, 1), _margins(mix)]
    passages = sorted({p for c in candidates for p in c.get("scores") or {} if p.startswith(PASSAGE)})
    alone = [_scores(candidates, p, "logprob") for p in passages]
    columns.append(_relative(_logsumexp(alone)) if alone else np.zeros(n))
    columns.append(_relative(np.nanmax(np.vstack(alone), axis=0)) if alone else np.zeros(n))
    # absolute: how likely the reader finds the candidate at all, and how split the members are (P(right))
    prompted = [means[m] for m in members if not np.isnan(means[m]).all()]
    columns.append(np.nan_to_num(np.nanmax(np.vstack(prompted), axis=0), nan=0.0) if prompted else np.zeros(n))
    columns.append(np.nan_to_num(_logsumexp(present), nan=0.0) if present else np.zeros(n))
    alone_means = [_scores(candidates, p, "mean_logprob") for p in passages]
    columns.append(np.nan_to_num(np.nanmax(np.vstack(alone_means), axis=0), nan=0.0) if alone else np.zeros(n))
    distinct = len({normalize_answer(evidence.answers.get(m, "")) for m in members} - {""})
    columns.append(np.full(n, distinct / max(len(members), 1)))
    relevance = evidence.relevance if evidence.relevance is not None else (math.nan,) * 3
    columns += [np.full(n, float(value)) for value in relevance]
    declining = _null_mix(null, members)
    columns.append(np.full(n, declining))
    columns.append(columns[names.index("abs:mix")] - declining if present else np.full(n, math.nan))
    texts = [str(c["text"]) for c in candidates]
    return JudgeFeatures(texts, np.column_stack(columns), names, _scored(candidates, members))


def _null_mix(null: Mapping[str, Any] | None, members: Sequence[str]) -> float:
    """log Σ_m exp max_t L(t|p_m) over the null candidate's phrasings t and the members' prompts it was scored
    under (NaN when it was not)."""
    scores = (null or {}).get("scores") or {}
    best = [max(float(summary["logprob"]) for summary in scores[m]) for m in members if scores.get(m)]
    if not best:
        return math.nan
    peak = max(best)
    return peak + math.log(sum(math.exp(value - peak) for value in best))


def _scored(candidates: Sequence[Mapping[str, Any]], members: Sequence[str]) -> frozenset[str]:
    """The likelihood families the candidates' scores hold."""
    prompts = {p for c in candidates for p in c.get("scores") or {}}
    held = set()
    if prompts & set(members):
        held.add("scores")
    if any(p.startswith(PASSAGE) for p in prompts):
        held.add("passages")
    return frozenset(held)


def _evidence_columns(texts: list[str], members: Sequence[str], evidence: Evidence) -> list[np.ndarray]:
    """support:passages, top:passage, inside:members, in_question, type:match, type:clash."""
    read: dict[str, None] = {}
    tops: list[str] = []
    for member in members:
        normalised = [f" {normalize_answer(text)} " for text in evidence.passages.get(member, ())]
        read.update(dict.fromkeys(normalised))
        tops += normalised[:1]
    answers = [normalize_answer(evidence.answers.get(member, "")) for member in members]
    asked = set(normalize_answer(evidence.question).split())
    wanted = question_type(evidence.question)
    rows = []
    for text in texts:
        key = normalize_answer(text)
        words = key.split()
        needle = f" {key} "
        shapes = answer_shapes(text)
        rows.append(
            (
                sum(needle in passage for passage in read) / max(len(read), 1),
                float(any(needle in passage for passage in tops)),
                sum(bool(key) and answer != key and needle in f" {answer} " for answer in answers)
                / max(len(members), 1),
                sum(word in asked for word in words) / len(words) if words else 1.0,
                float(wanted is not None and wanted in shapes),
                float(wanted is not None and wanted not in shapes),
            )
        )
    return list(np.array(rows, dtype=float).reshape(len(texts), 6).T)


def _scores(candidates: Sequence[Mapping[str, Any]], prompt: str, key: str) -> np.ndarray:
    """Each candidate's `key` under `prompt` (NaN where the scores have no such prompt)."""
    held = [c.get("scores") or {} for c in candidates]
    return np.array([float(scores[prompt][key]) if prompt in scores else math.nan for scores in held])


def _relative(values: np.ndarray) -> np.ndarray:
    """values − their maximum; 0 where unknown."""
    if np.isnan(values).all():
        return np.zeros(len(values))
    return np.nan_to_num(values - np.nanmax(values), nan=0.0)


def _logsumexp(rows: list[np.ndarray]) -> np.ndarray:
    stacked = np.vstack(rows)
    peak = np.nanmax(stacked, axis=0)
    return peak + np.log(np.nansum(np.exp(stacked - peak), axis=0))


def _margins(values: np.ndarray) -> np.ndarray:
    """Each value minus the best of the others (0 for a lone candidate)."""
    if len(values) < 2:
        return np.zeros(len(values))
    top = np.sort(values)[::-1]
    return np.where(values >= top[0], values - top[1], values - top[0])
