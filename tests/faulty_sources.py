"""LangChain retrievers that fail on purpose, for the server's fault tests and the load test under faults
(joined through the `langchain` source type: `{type: langchain, params: {class: "tests.faulty_sources:NAME"}}`)."""

from __future__ import annotations

import hashlib
import time

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever


def fails_on(query: str) -> bool:
    """About half of all questions: those whose SHA-1 starts with an odd byte."""
    return hashlib.sha1(query.encode("utf-8")).digest()[0] % 2 == 1


class HalfBroken(BaseRetriever):
    """Fails on about half of the questions (`fails_on`), every time they are asked, and answers the others:
    whether an answer must name it as degraded is known from the question alone, whatever is cached."""

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        if fails_on(query):
            raise ConnectionError("backend dropped the connection")
        return [Document(page_content="Leonardo da Vinci painted the Mona Lisa.", metadata={"title": "Mona Lisa"})]


class Slow(BaseRetriever):
    """Answers after `seconds` (within the member timeout): keeps a request in flight for a while."""

    seconds: float = 1.5

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        time.sleep(self.seconds)
        return [Document(page_content="The Eiffel Tower is in Paris.", metadata={"title": "Eiffel Tower"})]
