"""How well the passages the members retrieved match the question: evidence that the corpus holds (or does not
hold) an answer, in terms that carry over from one corpus and pool to another (voters.right's retrieval family).

Per retrieved passage (one a retriever found in a corpus; never a document the reader wrote, PK's or @CP's):

- its **cosine** with the question under eor's own encoder (all-MiniLM-L6-v2, normalised embeddings), whatever
  retriever found it: so BM25's and a dense index's passages are judged alike, and a score means the same over
  any corpus (a retriever's own scores, BM25's above all, depend on its index);
- the **share of the question's content words** it holds (SQuAD-normalised tokens, stop words left out).

And, given the members' answers, per answer the evidence of the passages that hold it (the strength and coverage
of Wang et al., ICLR 2018, "Evidence aggregation for answer re-ranking", with eor's encoder in place of a trained
one): each such passage's sentence holding the answer (eor.core.citations.evidence_sentence), its cosine with the
question, and the share of the question's content words those sentences hold together.

`Relevance.of(questions, retrieved, answers)` computes them for every distinct passage text and evidence sentence
of a batch in two encoder calls; voters.choice_evidence reads them over the passages of the members that voted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from eor.core.answers import contains, normalize_answer
from eor.core.citations import evidence_sentence
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
    """Per question, each retrieved passage text's (cosine with the question, share of its content words), the
    cosine with the question of each sentence holding a member's answer, and the question's content words."""

    by_text: Mapping[str, tuple[float, float]]
    by_sentence: Mapping[str, float] | None = None  # None: encoded without the members' answers
    asked: frozenset[str] = frozenset()

    @staticmethod
    def of(
        questions: Sequence[str],
        retrieved: Sequence[Sequence[Sequence[str]]],
        answers: Sequence[Sequence[str]] | None = None,
    ) -> list[Relevance]:
        """The relevance of every passage of `retrieved[q][m]` to `questions[q]`, and (given the members'
        `answers[q][m]`) of every sentence of them holding one of the question's answers (in a second encoder call)."""
        per_question = [sorted({text for texts in row for text in texts}) for row in retrieved]
        texts = sorted({text for row in per_question for text in row} | set(questions))
        if not any(per_question):
            return [Relevance({}) for _ in questions]
        encoder = load_sentence_encoder(ENCODER)
        vectors = encoder.encode(texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
        position = {text: i for i, text in enumerate(texts)}
        sentences = [
            _evidence_sentences(passages, answers[q]) if answers is not None else {}
            for q, passages in enumerate(per_question)
        ]
        # the sentences in a call of their own: the passages' cosines stay those of an encoding without them
        distinct = sorted({s for row in sentences for s in row})
        of_sentences = (
            encoder.encode(distinct, normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
            if distinct
            else np.zeros((0, vectors.shape[1]))
        )
        at = {s: i for i, s in enumerate(distinct)}
        out = []
        for question, passages, held in zip(questions, per_question, sentences, strict=True):
            if not passages:
                out.append(Relevance({}))
                continue
            asked = vectors[position[question]]
            cosines = vectors[[position[p] for p in passages]] @ asked
            held_cosines = of_sentences[[at[s] for s in held]] @ asked if held else []
            out.append(
                Relevance(
                    {
                        p: (float(c), word_share(question, p))
                        for p, c in zip(passages, np.asarray(cosines), strict=True)
                    },
                    MappingProxyType({s: float(c) for s, c in zip(held, held_cosines, strict=True)})
                    if answers is not None
                    else None,
                    frozenset(content_words(question)),
                )
            )
        return out

    def holding(self, texts: Sequence[str], answer: str) -> tuple[float, float]:
        """The evidence for `answer` over the distinct `texts` (passages of the voting members) that hold it: the
        best cosine of their sentences holding it with the question, and the share of the question's content
        words those sentences hold together; (0, 0) when none holds it. ValueError when the sentences were not
        encoded (`of` without the answers)."""
        held = [s for s in (evidence_sentence(t, answer) for t in dict.fromkeys(texts)) if s is not None]
        if not held:
            return 0.0, 0.0
        if self.by_sentence is None or any(s not in self.by_sentence for s in held):
            raise ValueError("the evidence sentences of this answer were not encoded: Relevance.of(..., answers)")
        words = set(normalize_answer(" ".join(held)).split())
        return max(self.by_sentence[s] for s in held), len(self.asked & words) / len(self.asked) if self.asked else 0.0

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


def _evidence_sentences(passages: Sequence[str], answers: Sequence[str]) -> dict[str, None]:
    """The sentences of `passages` holding one of `answers` (eor.core.citations.evidence_sentence), in order."""
    distinct = [a for a in dict.fromkeys(answers) if normalize_answer(a)]
    found: dict[str, None] = {}
    for text in passages:
        for answer in distinct:
            if contains(text, answer):
                found[evidence_sentence(text, answer) or ""] = None
    found.pop("", None)
    return found
