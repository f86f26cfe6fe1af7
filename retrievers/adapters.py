"""Any LangChain retriever as an eor source; its runs nest under the source's own in LangChain's callbacks."""

from __future__ import annotations

from typing import ClassVar

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from retrievers.base import SourceRetriever, child_configs


class LangChainSource(SourceRetriever):
    """Wraps a foreign `BaseRetriever`; its documents get eor's metadata keys where they lack them."""

    retriever: BaseRetriever
    withholds: ClassVar[bool] = False  # no corpus ids to rank past (retrievers.withheld)

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        results = self.retriever.batch(queries, child_configs(run_managers))
        return [[self._normalise(doc, rank) for rank, doc in enumerate(docs)] for docs in results]

    def _normalise(self, document: Document, rank: int) -> Document:
        metadata = {"title": "", "score": None, "id": f"{self.source_name}:{rank}", **document.metadata}
        metadata.setdefault("source", self.source_name)
        return Document(page_content=document.page_content, metadata=metadata)
