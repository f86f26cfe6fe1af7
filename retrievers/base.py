"""The base of every eor retriever: a LangChain `BaseRetriever` that can also retrieve for a batch of queries."""

from __future__ import annotations

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr

from retrievers import notation


class EorRetriever(BaseRetriever):
    """A LangChain retriever whose core method is `retrieve_batch(queries) -> list[list[Document]]`.

    Batching lets the ensemble send every question of a batch to an encoder or the reader in one call.
    Documents carry `metadata = {"id", "title", "source", "score"}`.
    """

    def retrieve_batch(self, queries: list[str]) -> list[list[Document]]:
        raise NotImplementedError

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.retrieve_batch([query])[0]

    def to_node(self) -> notation.Node:
        """This retriever tree as a notation tree."""
        raise NotImplementedError

    @property
    def notation(self) -> str:
        """The member name of this retriever tree in the paper's notation (canonical form)."""
        return notation.to_name(self.to_node())

    # A source may serve the paper's own meaning of `@k` and `@RR` over it (web search, appendix C.1) by
    # returning another view of itself; the pool puts what these return under the operator.

    def for_top_k(self, k: int) -> EorRetriever:
        """The retriever to put under `@k` over this source (default: itself)."""
        return self

    def for_rerank(self) -> EorRetriever:
        """The retriever to put under `@RR` over this source (default: itself)."""
        return self


class SourceRetriever(EorRetriever):
    """A base source (BM25, Wiki, PK, ...): remembers its results per query, so members that share the
    source (`BM25@1`, `BM25@3`, `BM25@2&Wiki@2`) run it once per question."""

    source_name: str
    memo_size: int = 4096
    _memo: dict[str, list[Document]] = PrivateAttr(default_factory=dict)

    def to_node(self) -> notation.Node:
        return notation.Source(self.source_name)

    def retrieve_batch(self, queries: list[str]) -> list[list[Document]]:
        missing = list(dict.fromkeys(query for query in queries if query not in self._memo))
        if missing:
            for query, documents in zip(missing, self._retrieve_uncached(missing), strict=True):
                if len(self._memo) >= self.memo_size:
                    self._memo.pop(next(iter(self._memo)))
                self._memo[query] = documents
        return [list(self._memo[query]) for query in queries]

    def _retrieve_uncached(self, queries: list[str]) -> list[list[Document]]:
        raise NotImplementedError


class NoRetrieval(SourceRetriever):
    """ReFree: the retrieval-free member reads the question alone."""

    source_name: str = "ReFree"

    def _retrieve_uncached(self, queries: list[str]) -> list[list[Document]]:
        return [[] for _ in queries]


def passage(text: str, *, id: str, title: str = "", source: str, score: float | None = None) -> Document:
    """A passage as a LangChain Document with eor's metadata keys."""
    return Document(page_content=text, metadata={"id": id, "title": title, "source": source, "score": score})
