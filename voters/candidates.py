"""Candidate answers for the reader as judge: the members' distinct answers, and spans that no member wrote (of the
passages they read, or of the members' own sentences), proposed by a span rule and capped at K per question.

A small reader often has the answer in front of it and writes another span or a sentence: on NQ dev a gold
answer is in the passages some member read on about 98% of questions, in some member's answer on 56%. Spans
let answers no member wrote compete; the judge's likelihood features and the selector decide among them.

Span rules (a registry, `SPAN_RULES`; each `(question, passages, answers) -> spans, best first`, `answers` the
members' distinct answers in pool order):

- `entities`: maximal runs of capitalised words and numbers (joined by `of`, `the`, `and`, `de`, ...), and
  dates (`May 18, 2018`, `18 May 2018`, `1969`), as open-domain answers mostly are;
- `ngrams`: every run of one to four words that neither starts nor ends with a stop word;
- `phrases`: the entities, two entity runs apart by a comma alone (`Charles, Prince of Wales`), and common-noun
  phrases (after an article or a possessive, the longest run of up to four lower-case words that are not stop
  words: `the optic chiasm`), ranked together;
- `pointed`: what the members point at. First the members' own sentences cut to what they add (each clause of an
  answer without the stop words and the question's words at either end: "The powers not given to the federal
  government go to *states or the people*", "On *1 October 2006*"), then the `entities` spans that occur in some
  member's answer, then the other `entities` spans, each part in its own order. A small reader often writes the
  answer inside a sentence, or inside a longer name; what it wrote leads.

The spans of passages never cross a clause boundary (`.`, `;`, `:`, brackets, quotes; a comma only before a
year), drop spans made only of the question's own words, and rank a span by how close it stands to the question's
content words in the passage (in words; a passage without them counts as far), then by how many passages hold it,
then by where it first occurs (the members' passages in pool order). The rules read text only: no model, no
network.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from eor.core.answers import normalize_answer
from eor.core.errors import InputError
from eor.core.registry import Registry

MEMBERS = "members"  # the `rule` of a candidate some member wrote

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers him his how i if in into is it its itself just me more most my no nor not now of off on
    once only or other our out over own same she should so some such than that the their theirs them then
    there these they this those through to too under until up very was we were what when where which while
    who whom why will with would you your""".split()
)
_CONNECTORS = frozenset({"of", "the", "and", "de", "del", "la", "le", "du", "da", "von", "van", "der", "y", "&"})
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WORD = re.compile(r"[\w][\w'’\-.]*[\w]|[\w]|&")
# A clause ends at sentence punctuation, brackets and quotes, or at a comma that does not precede a year.
_CLAUSE_END = re.compile(r"[.;:!?()\[\]{}\"“”]\s|[;:()\[\]{}\"“”]|,(?!\s*\d{4}\b)|\n")
_DATE = re.compile(
    rf"\b(?:(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|\d{{1,2}}\s+(?:{_MONTHS})\.?,?\s+\d{{4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{4}}|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?)\b",
    re.IGNORECASE,
)
MAX_NGRAM = 4


@dataclass(frozen=True)
class Candidate:
    """One answer to weigh: its text, the members that wrote it (empty for a span) and the rule that proposed it
    (`members` for the members' answers)."""

    text: str
    members: tuple[str, ...] = ()
    rule: str = MEMBERS


@dataclass(frozen=True)
class _Span:
    text: str
    passage: int  # index of the passage it occurs in
    start: int  # word index of its first word
    end: int  # word index after its last word


SpanRule = Callable[[str, Sequence[str], Sequence[str]], list[str]]
SPAN_RULES: Registry[SpanRule] = Registry("span rule", accept=callable, expected="a span rule")


def candidates(
    question: str,
    answers: Mapping[str, str],
    passages: Sequence[str],
    *,
    rule: str | None = None,
    k: int = 0,
) -> list[Candidate]:
    """The members' distinct answers (`answers`: member → answer, in pool order; answers equal after SQuAD
    normalisation are one candidate, spelled as its first member wrote it), then up to `k` spans of `passages`
    by `rule` that are not among them. An empty answer is no candidate."""
    if k < 0:
        raise InputError(f"the number of span candidates must be 0 or more, not {k}")
    seen: dict[str, int] = {}
    out: list[Candidate] = []
    for member, answer in answers.items():
        key = normalize_answer(answer)
        if not key:
            continue
        if key in seen:
            index = seen[key]
            out[index] = Candidate(out[index].text, (*out[index].members, member))
        else:
            seen[key] = len(out)
            out.append(Candidate(answer.strip(), (member,)))
    if rule is None or k == 0:
        return out
    added = 0
    for span in SPAN_RULES[rule](question, passages, [candidate.text for candidate in out]):
        key = normalize_answer(span)
        if key and key not in seen:
            seen[key] = len(out)
            out.append(Candidate(span, (), rule))
            added += 1
            if added == k:
                break
    return out


def span_rules() -> list[str]:
    return list(SPAN_RULES)


# -- the rules ----------------------------------------------------------------------------------------------


def _clauses(text: str) -> list[list[re.Match[str]]]:
    """The words of each clause of `text` (regex matches, with their offsets)."""
    clauses: list[list[re.Match[str]]] = []
    start = 0
    for boundary in [*_CLAUSE_END.finditer(text), None]:
        stop = len(text) if boundary is None else boundary.start()
        words = list(_WORD.finditer(text, start, stop))
        if words:
            clauses.append(words)
        if boundary is not None:
            start = boundary.end()
    return clauses


def _entity_runs(words: list[re.Match[str]]) -> Iterable[tuple[int, int]]:
    """(start, end) word indexes of maximal runs of capitalised words and numbers, connectors inside only."""
    i = 0
    while i < len(words):
        if not _is_name(words[i].group()):
            i += 1
            continue
        j = i + 1
        while j < len(words):
            token = words[j].group()
            if _is_name(token):
                j += 1
            elif token.lower() in _CONNECTORS and j + 1 < len(words) and _is_name(words[j + 1].group()):
                j += 2
            else:
                break
        while i < j and words[i].group().lower() in STOP_WORDS:  # "The", "In" opening a sentence
            i += 1
        if i < j:
            yield i, j
        i = j


def _is_name(token: str) -> bool:
    return token[0].isupper() or token[0].isdigit()


def _entities(passage: str) -> Iterable[tuple[str, int, int]]:
    """(text, first character, end character) of each entity run and date in a passage."""
    for words in _clauses(passage):
        for i, j in _entity_runs(words):
            yield passage[words[i].start() : words[j - 1].end()], words[i].start(), words[j - 1].end()
    for match in _DATE.finditer(passage):
        yield match.group(), match.start(), match.end()


def _ngrams(passage: str) -> Iterable[tuple[str, int, int]]:
    for words in _clauses(passage):
        for i in range(len(words)):
            if words[i].group().lower() in STOP_WORDS:
                continue
            for j in range(i + 1, min(i + MAX_NGRAM, len(words)) + 1):
                if words[j - 1].group().lower() not in STOP_WORDS:
                    yield passage[words[i].start() : words[j - 1].end()], words[i].start(), words[j - 1].end()


def _ranked(
    question: str, passages: Sequence[str], found: Callable[[str], Iterable[tuple[str, int, int]]]
) -> list[str]:
    """The spans `found` in each passage, without those made only of the question's words, ranked by distance
    to the question's content words (in words), then by the number of passages holding them, then by first
    occurrence; each normalised span once, spelled as it first occurs."""
    asked = set(normalize_answer(question).split())
    content = asked - STOP_WORDS
    best: dict[str, tuple[float, int, int, str]] = {}
    holders: dict[str, set[int]] = {}
    order = 0
    for index, passage in enumerate(passages):
        words = list(_WORD.finditer(passage))
        starts = [word.start() for word in words]
        anchors = [n for n, word in enumerate(words) if normalize_answer(word.group()) in content]
        for text, begin, end in found(passage):
            key = normalize_answer(text)
            if not key or set(key.split()) <= asked:
                continue
            first = _word_at(starts, begin)
            last = _word_at(starts, end - 1)
            distance = min((_gap(anchor, first, last) for anchor in anchors), default=float("inf"))
            holders.setdefault(key, set()).add(index)
            order += 1
            if key not in best or distance < best[key][0]:
                best[key] = (distance, index, order, best[key][3] if key in best else text)
    ranking = sorted(best, key=lambda key: (best[key][0], -len(holders[key]), best[key][1], best[key][2]))
    return [best[key][3] for key in ranking]


def _word_at(starts: list[int], offset: int) -> int:
    """The index of the word that covers character `offset` (the last word starting at or before it)."""
    return max(bisect.bisect_right(starts, offset) - 1, 0)


def _gap(anchor: int, first: int, last: int) -> int:
    """Words between a question word at `anchor` and the span [first, last] (0 when it is inside)."""
    if anchor < first:
        return first - anchor
    if anchor > last:
        return anchor - last
    return 0


def entity_spans(question: str, passages: Sequence[str], answers: Sequence[str] = ()) -> list[str]:
    return _ranked(question, passages, _entities)


def ngram_spans(question: str, passages: Sequence[str], answers: Sequence[str] = ()) -> list[str]:
    return _ranked(question, passages, _ngrams)


#: words after which a common-noun phrase starts (`phrases`): articles and possessives
_DETERMINERS = frozenset({"a", "an", "the", "its", "their", "his", "her", "this", "these", "those"})


def _noun_phrases(passage: str) -> Iterable[tuple[str, int, int]]:
    """Common-noun phrases: after an article or a possessive, the longest run of up to MAX_NGRAM lower-case words
    that are not stop words ("the *optic chiasm* where", "the *middle layer* of")."""
    for words in _clauses(passage):
        for i in range(1, len(words)):
            if words[i - 1].group().lower() not in _DETERMINERS:
                continue
            j = i
            while j < len(words) and j - i < MAX_NGRAM:
                token = words[j].group()
                if token.lower() in STOP_WORDS or _is_name(token):
                    break
                j += 1
            if j > i:
                yield passage[words[i].start() : words[j - 1].end()], words[i].start(), words[j - 1].end()


def _apposed_names(passage: str) -> Iterable[tuple[str, int, int]]:
    """Two entity runs apart by a comma alone ("*Charles, Prince of Wales*"), which clause boundaries split."""
    runs = sorted((begin, end) for _, begin, end in _entities(passage))
    for (begin, end), (after, last) in zip(runs, runs[1:], strict=False):
        if passage[end:after] == ", ":
            yield passage[begin:last], begin, last


def _phrases(passage: str) -> Iterable[tuple[str, int, int]]:
    yield from _entities(passage)
    yield from _apposed_names(passage)
    yield from _noun_phrases(passage)


def phrase_spans(question: str, passages: Sequence[str], answers: Sequence[str] = ()) -> list[str]:
    return _ranked(question, passages, _phrases)


def _cuts(question: str, answer: str) -> Iterable[str]:
    """Each clause of a member's `answer` without the stop words and the question's own words at either end."""
    asked = set(normalize_answer(question).split())

    def spare(token: str) -> bool:
        return token.lower() in STOP_WORDS or normalize_answer(token) in asked

    for words in _clauses(answer):
        first, last = 0, len(words)
        while first < last and spare(words[first].group()):
            first += 1
        while last > first and spare(words[last - 1].group()):
            last -= 1
        if first < last:
            yield answer[words[first].start() : words[last - 1].end()]


def pointed_spans(question: str, passages: Sequence[str], answers: Sequence[str] = ()) -> list[str]:
    """The members' answers cut to what they add, then the entity spans some answer holds, then the other entity
    spans (the `pointed` rule; `candidates` drops what is already a candidate)."""
    written = [f" {normalize_answer(answer)} " for answer in answers]

    def unheld(span: str) -> bool:
        return not any(f" {normalize_answer(span)} " in answer for answer in written)

    cut = [span for answer in answers for span in _cuts(question, answer)]
    return cut + sorted(entity_spans(question, passages), key=unheld)  # a stable sort: each part in its order


SPAN_RULES.register("entities", entity_spans)
SPAN_RULES.register("ngrams", ngram_spans)
SPAN_RULES.register("phrases", phrase_spans)
SPAN_RULES.register("pointed", pointed_spans)
