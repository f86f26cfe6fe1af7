"""An example of extending eor from another package: a source type, a retriever operator, a similarity
metric, a voter and a reader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document

from eor.learning.crossval import Candidate
from retrievers.base import EorRetriever, SourceRetriever, passage
from retrievers.operator_type import OperatorType
from retrievers.operators import Applied
from retrievers.source_type import BuildContext, SourceType
from voters import SimilarityMetric
from voters.protocol import SimpleVoter


class NotesRetriever(SourceRetriever):
    """Passages written in the config; a passage matches a query by the words they share."""

    notes: list[dict[str, str]]
    depth: int = 3

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        results = []
        for query in queries:
            words = set(query.lower().split())
            scored = [(len(words & set(note["text"].lower().split())), n) for n, note in enumerate(self.notes)]
            ranked = sorted((s, n) for s, n in scored if s)[::-1][: self.depth]
            results.append([self._passage(n, score) for score, n in sorted(ranked, key=lambda x: (-x[0], x[1]))])
        return results

    def _passage(self, n: int, score: int) -> Document:
        note = self.notes[n]
        return passage(
            note["text"],
            id=f"{self.source_name}:{n}",
            title=note.get("title", ""),
            source=self.source_name,
            score=float(score),
        )


def _build_notes(source: str, params: dict[str, Any], context: BuildContext) -> NotesRetriever:
    return NotesRetriever(source_name=source, notes=params["notes"], depth=params.get("depth", context.depth))


NOTES = SourceType(
    "notes",
    _build_notes,
    {"notes": "the passages: a list of {title, text}", "depth": "passages per query"},
    summary="passages written in the config",
)


class Reversed(Applied):
    """`X@REV`: the child's passages, last first. It works query by query, through LangChain's own contract;
    the child's run nests under this one's."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.child.invoke(query, {"callbacks": run_manager.get_child()})[::-1]


def _build_reversed(child: EorRetriever, context: BuildContext) -> Reversed:
    return Reversed(child=child, operator="REV")


REVERSED = OperatorType("REV", _build_reversed, "the child's passages in reverse order")


class LengthRatio(SimilarityMetric):
    """Two answers are alike when they have as many words: shorter / longer word count."""

    name = "length_ratio"
    cacheable = False

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        counts = np.array([(len(a.split()), len(b.split())) for a, b in pairs], dtype=float).reshape(-1, 2)
        longer = counts.max(axis=1)
        return np.where(longer > 0, counts.min(axis=1) / np.maximum(longer, 1), 1.0)


class ShortestVoter(SimpleVoter):
    """The shortest non-empty answer wins (ties: the first member); it learns nothing."""

    kind = "shortest"

    def decision_scores(self, answers, passages=None, questions=None, members=None) -> np.ndarray:
        return np.asarray([[-len(a) if a.strip() else -np.inf for a in row] for row in answers], dtype=float)


class ShortestCandidate(Candidate):
    name = "shortest"
    voter_class = ShortestVoter

    def template(self, arrays: Any) -> ShortestVoter:
        return ShortestVoter(arrays.data.names, metrics=self.settings.metrics)  # it learns nothing: SimpleVoter.fit


class FirstTitleReader:
    """A reader without a model: it answers with the title of the first passage in the prompt (the line
    after eor's reading prefix), and "unknown" when the prompt has no passages."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = f"first-title|{name}"

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        marker = "Assuming the following paragraphs are true:\n\n"
        return [p.split(marker, 1)[1].split("\n", 1)[0] if marker in p else "unknown" for p in prompts]


def first_title_reader(config: Any) -> FirstTitleReader:
    return FirstTitleReader(config.model)
