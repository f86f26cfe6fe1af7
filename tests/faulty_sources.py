"""LangChain retrievers that fail on purpose, for the server's fault tests and the load test under faults
(joined through the `langchain` source type: `{type: langchain, params: {class: "tests.faulty_sources:NAME"}}`)."""

from __future__ import annotations

import itertools
import time

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

_CALLS = itertools.count()


class HalfBroken(BaseRetriever):
    """Fails every second call (across instances of this process), answers the others."""

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        if next(_CALLS) % 2:
            raise ConnectionError("backend dropped the connection")
        return [Document(page_content="Leonardo da Vinci painted the Mona Lisa.", metadata={"title": "Mona Lisa"})]


class Slow(BaseRetriever):
    """Answers after `seconds` (within the member timeout): keeps a request in flight for a while."""

    seconds: float = 1.5

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        time.sleep(self.seconds)
        return [Document(page_content="The Eiffel Tower is in Paris.", metadata={"title": "Eiffel Tower"})]
