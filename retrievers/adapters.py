"""Any LangChain retriever as an eor source."""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from retrievers.base import SourceRetriever


class LangChainSource(SourceRetriever):
    """Wraps a foreign `BaseRetriever`; its documents get eor's metadata keys where they lack them."""

    retriever: BaseRetriever

    def _retrieve_uncached(self, queries: list[str]) -> list[list[Document]]:
        results = self.retriever.batch(queries)
        return [[self._normalise(doc, rank) for rank, doc in enumerate(docs)] for docs in results]

    def _normalise(self, document: Document, rank: int) -> Document:
        metadata = {"title": "", "score": None, "id": f"{self.source_name}:{rank}", **document.metadata}
        metadata.setdefault("source", self.source_name)
        return Document(page_content=document.page_content, metadata=metadata)
