"""The operators of the paper's notation over retriever trees: `@k` top-k, `&` concatenation,
`@RR` reranking by a bi-encoder (or a cross-encoder) and `@CP` compression by the reader; eor's `#r` (one
passage of a ranked list alone) and `+` (reciprocal rank fusion); `Applied`, the base of operators that other
code adds (retrievers.operator_type)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor

from eor.core.models import load_sentence_encoder, resolve_model
from eor.core.prompts import PromptTemplates
from retrievers import notation
from retrievers.base import EorRetriever, child_configs, passage

if TYPE_CHECKING:
    from eor.readers.base import Reader


class TopK(EorRetriever):
    """`child@k`: the first k passages of the child's ranked list.

    LangChain's convention for the number of results works too: `TopK(child=..., k=3)`, and
    `invoke(query, k=5)` / `ainvoke(query, k=5)` for the first 5 this once (`child@5`)."""

    child: EorRetriever
    k: int

    def to_node(self) -> notation.Node:
        return notation.TopK(self.child.to_node(), self.k)

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        return [documents[: self.k] for documents in self.child.batch(queries, child_configs(run_managers))]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        documents = self.child.invoke(query, child_configs([run_manager])[0])
        return documents[: self.k if k is None else k]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return await run_in_executor(None, self._get_relevant_documents, query, run_manager=run_manager.get_sync(), k=k)


class Pick(EorRetriever):
    """`child#r`: the child's r-th passage alone (none when it retrieved fewer than r)."""

    child: EorRetriever
    rank: int

    def to_node(self) -> notation.Node:
        return notation.Pick(self.child.to_node(), self.rank)

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        return [
            documents[self.rank - 1 : self.rank] for documents in self.child.batch(queries, child_configs(run_managers))
        ]


RRF_K = 60  # reciprocal rank fusion's constant (Cormack, Clarke and Büttcher 2009)


class Fuse(EorRetriever):
    """`a+b+...`: reciprocal rank fusion (Cormack, Clarke and Büttcher 2009) of the children's ranked lists.

    A passage's score is the sum over the lists that hold it of 1 / (k + rank), ranks from 1; a passage is
    known by its `id` (so the lists fused should share an id space: sources over one corpus), by its text
    when it has none, and keeps its text and title from the first list that holds it. Ties keep the order
    of first appearance (list by list, rank by rank), so the fusion is deterministic."""

    children: list[EorRetriever]
    k: int = RRF_K

    def to_node(self) -> notation.Node:
        return notation.Fuse(tuple(child.to_node() for child in self.children))

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        per_child = [child.batch(queries, child_configs(run_managers)) for child in self.children]
        return [reciprocal_rank_fusion(lists, self.k) for lists in zip(*per_child, strict=True)]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Document]], k: int = RRF_K) -> list[Document]:
    """One ranking of the passages of `rankings`, by the sum of 1 / (k + rank) over the rankings that hold each
    (`Fuse`), a passage's rank in a ranking being its first place there; the fused score is its `score`."""
    scores: dict[str, float] = {}
    first: dict[str, Document] = {}
    for ranking in rankings:
        ranked: set[str] = set()
        for rank, document in enumerate(ranking, start=1):
            known = document.metadata.get("id")
            key = f"id:{known}" if known is not None else f"text:{document.page_content}"
            if key in ranked:  # a ranking that holds it twice (a concatenation) ranks it once, at its first place
                continue
            ranked.add(key)
            if key not in first:
                first[key] = document
                scores[key] = 0.0
            scores[key] += 1.0 / (k + rank)
    order = sorted(first, key=lambda key: -scores[key])  # stable: ties keep their first appearance
    return [_with_score(first[key], scores[key]) for key in order]


class Concat(EorRetriever):
    """`a&b&...`: the passages of every child, in order."""

    children: list[EorRetriever]

    def to_node(self) -> notation.Node:
        return notation.Concat(tuple(child.to_node() for child in self.children))

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        per_child = [child.batch(queries, child_configs(run_managers)) for child in self.children]
        return [[doc for documents in parts for doc in documents] for parts in zip(*per_child, strict=True)]


class Rerank(EorRetriever):
    """`child@RR`: split passages into ~`chunk_words`-word chunks and order them by cosine similarity of
    query and chunk embeddings (the paper's Contriever-style bi-encoder), or by a cross-encoder's score."""

    child: EorRetriever
    encoder: str = "minilm-l6"
    cross_encoder: str | None = None
    chunk_words: int = 100

    def to_node(self) -> notation.Node:
        return notation.Rerank(self.child.to_node())

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        results: list[list[Document]] = []
        for query, documents in zip(queries, self.child.batch(queries, child_configs(run_managers)), strict=True):
            chunks = [chunk for doc in documents for chunk in chunk_document(doc, self.chunk_words)]
            if not chunks:
                results.append([])
                continue
            scores = self._scores(query, [chunk.page_content for chunk in chunks])
            order = np.lexsort((np.arange(len(chunks)), -scores))
            results.append([_with_score(chunks[i], float(scores[i])) for i in order])
        return results

    def _scores(self, query: str, texts: list[str]) -> np.ndarray:
        if self.cross_encoder:
            from sentence_transformers import CrossEncoder

            model = CrossEncoder(str(resolve_model(self.cross_encoder)))
            return np.asarray(model.predict([(query, text) for text in texts]), dtype=float)

        model = load_sentence_encoder(self.encoder)
        vectors = model.encode([query, *texts], normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vectors[1:] @ vectors[0], dtype=float)


class Compress(EorRetriever):
    """`child@CP`: the reader summarises the child's passages (appendix C.2 prompt); one passage out."""

    child: EorRetriever
    reader: object
    max_tokens: int = 300
    prompts: object = PromptTemplates()

    def to_node(self) -> notation.Node:
        return notation.Compress(self.child.to_node())

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        # fields of any object for pydantic: eor's reader (eor.readers.base.Reader) and prompt templates
        reader, templates = cast("Reader", self.reader), cast(PromptTemplates, self.prompts)
        children = self.child.batch(queries, child_configs(run_managers))
        todo = [(i, query, docs) for i, (query, docs) in enumerate(zip(queries, children, strict=True)) if docs]
        prompts = [
            templates.compression_prompt(query, [(d.metadata.get("title", ""), d.page_content) for d in docs])
            for _, query, docs in todo
        ]
        summaries = reader.generate(prompts, max_tokens=self.max_tokens) if prompts else []
        results: list[list[Document]] = [[] for _ in queries]
        for (i, _, _), summary in zip(todo, summaries, strict=True):
            digest = hashlib.sha1(summary.encode()).hexdigest()[:12]
            results[i] = [passage(summary.strip(), id=f"CP:{digest}", source=self.notation, generated=True)]
        return results


class Applied(EorRetriever):
    """`child@WORD`: the base of an operator added with `retrievers.operator_type.register_operator`;
    a subclass implements `_batch_relevant_documents(queries, *, run_managers)` (usually over
    `self.child.batch(queries, child_configs(run_managers))`), or LangChain's `_get_relevant_documents`."""

    child: EorRetriever
    operator: str

    def to_node(self) -> notation.Node:
        return notation.Apply(self.child.to_node(), self.operator)


def chunk_document(document: Document, words: int) -> list[Document]:
    """Split a passage into consecutive chunks of at most `words` words (the last may be shorter)."""
    tokens = document.page_content.split()
    if len(tokens) <= words:
        return [document]
    chunks = []
    for n, start in enumerate(range(0, len(tokens), words)):
        metadata = {**document.metadata, "id": f"{document.metadata.get('id')}#{n}"}
        chunks.append(Document(page_content=" ".join(tokens[start : start + words]), metadata=metadata))
    return chunks


def _with_score(document: Document, score: float) -> Document:
    return Document(page_content=document.page_content, metadata={**document.metadata, "score": score})
