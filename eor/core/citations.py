"""Where an answer comes from (`Result.sources`): the passages that hold it, whichever member read them, each
with the sentence that holds it; then the passages the members credited with it read that do not hold it,
marked as read only. A document the reader wrote (PK's background document, @CP's summary) is never a source.

"Holds" is SQuAD's normalisation (lower case, no punctuation or articles) and whole words, as exact match and
containment count (eor.core.answers.contains). Each source: the member that read it (a member credited with the
answer first, else the first in pool order), the passage's id and title, its file and page (imported documents)
or url (web pages) where it has them, `holds`, and where it holds the answer `sentence`: the first sentence of the
passage that does (or, where no single sentence does, the stretch of words around it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eor.core.answers import contains, normalize_answer

#: the passage keys a source carries, where the passage has them
KEYS = ("id", "title", "file", "page", "url")
#: a sentence ends at . ! ? followed by white space, at a blank line, or at a line break before what starts a line
#: of its own (a capital, a digit, a list mark or a table's bar; a wrapped line of prose goes on in lower case)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*[A-Z0-9*#|•-])")
#: where no sentence holds the answer (it spans one), this many words either side of its first word
WINDOW = 12


def evidence_sentence(text: str, answer: str) -> str | None:
    """The first sentence of `text` that holds `answer` (normalised, whole words); where none alone does, the
    words around the answer's first word; None when the text does not hold it."""
    if not contains(text, answer):
        return None
    for sentence in _SENTENCE_END.split(text):
        if contains(sentence, answer):
            return " ".join(sentence.split())
    words = text.split()
    first = normalize_answer(answer).split()[0]
    at = next((i for i, word in enumerate(words) if normalize_answer(word) == first), 0)
    return " ".join(words[max(0, at - WINDOW) : at + WINDOW])


def cite(
    answer: str,
    credited: Sequence[str],
    passages: Mapping[str, Iterable[Mapping[str, Any]]],
    generated: Any,
) -> list[dict[str, Any]]:
    """The sources of `answer` (see the module): `credited`, the members credited with it; `passages`, each
    member's passages in pool order; `generated(passage)`, whether the reader wrote the passage."""
    order = list(credited) + [name for name in passages if name not in credited]
    holding: list[dict[str, Any]] = []
    read_only: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name in order:
        for passage in passages.get(name, ()):
            if generated(passage):
                continue
            text = str(passage.get("text", ""))
            key = str(passage.get("id")) if passage.get("id") is not None else text
            if key in seen:
                continue
            sentence = evidence_sentence(text, answer)
            source = {"member": name, **{k: passage[k] for k in KEYS if passage.get(k) is not None}}
            if sentence is not None:
                seen.add(key)
                holding.append({**source, "holds": True, "sentence": sentence})
            elif name in credited:
                seen.add(key)
                read_only.append({**source, "holds": False})
    return holding + read_only
