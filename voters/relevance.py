"""How well the passages the members retrieved match the question: evidence that the corpus holds (or does not
hold) an answer, in terms that carry over from one corpus and pool to another (voters.right's retrieval family).

Per retrieved passage (one a retriever found in a corpus; never a document the reader wrote, PK's or @CP's):

- its **cosine** with the question under eor's own encoder (all-MiniLM-L6-v2, normalised embeddings), whatever
  retriever found it: so BM25's and a dense index's passages are judged alike, and a score means the same over
  any corpus (a retriever's own scores, BM25's above all, depend on its index);
- the **share of the question's content words** it holds (SQuAD-normalised tokens, stop words left out).

`Relevance.of(questions, retrieved)` computes both for every distinct passage text of a batch in one encoder call;
voters.right reads them over the passages of the members that voted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from eor.core.answers import normalize_answer
from eor.core.models import load_sentence_encoder
from voters.candidates import STOP_WORDS

#: eor's own encoder of questions and passages for relevance (a packaged model)
ENCODER = "minilm-l6"


def content_words(text: str) -> set[str]:
    """The normalised words of `text` that are not stop words."""
    return {word for word in normalize_answer(text).split() if word not in STOP_WORDS}


def word_share(question: str, passage: str) -> float:
    """The share of the question's content words that the passage holds (0 for a question without any)."""
    asked = content_words(question)
    return len(asked & set(normalize_answer(passage).split())) / len(asked) if asked else 0.0


@dataclass(frozen=True)
class Relevance:
    """Per question, each retrieved passage text's (cosine with the question, share of its content words)."""

    by_text: Mapping[str, tuple[float, float]]

    @staticmethod
    def of(questions: Sequence[str], retrieved: Sequence[Sequence[Sequence[str]]]) -> list[Relevance]:
        """The relevance of every passage of `retrieved[q][m]` to `questions[q]`, encoded in one call."""
        per_question = [sorted({text for texts in row for text in texts}) for row in retrieved]
        texts = sorted({text for row in per_question for text in row} | set(questions))
        if not any(per_question):
            return [Relevance({}) for _ in questions]
        vectors = load_sentence_encoder(ENCODER).encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=64
        )
        position = {text: i for i, text in enumerate(texts)}
        out = []
        for question, passages in zip(questions, per_question, strict=True):
            if not passages:
                out.append(Relevance({}))
                continue
            cosines = vectors[[position[p] for p in passages]] @ vectors[position[question]]
            out.append(
                Relevance(
                    {p: (float(c), word_share(question, p)) for p, c in zip(passages, np.asarray(cosines), strict=True)}
                )
            )
        return out

    def over(self, texts: Sequence[str]) -> tuple[float, float, float]:
        """Over the distinct `texts` (passages of the voting members): the best cosine, its margin over the mean
        cosine of the others (0 with one passage), and the best share of the question's words; all 0 when no
        member retrieved a passage (nothing in the corpus matched)."""
        values = [self.by_text[text] for text in dict.fromkeys(texts) if text in self.by_text]
        if not values:
            return 0.0, 0.0, 0.0
        cosines = sorted((cosine for cosine, _ in values), reverse=True)
        margin = cosines[0] - float(np.mean(cosines[1:])) if len(cosines) > 1 else 0.0
        return cosines[0], margin, max(share for _, share in values)
