"""LangChain's own standard retriever tests (`langchain-tests`) against eor's retrievers.

The number of results (the suite's `k`) is eor's `@k` operator: a member `X@k` is `TopK(child=X, k=k)`,
and `TopK.invoke(query, k=n)` gives `X@n` for one call. So the suite constructs `TopK` over BM25 (demo
corpus), over Wiki, and over a concatenation `(BM25@3&Wiki@3)@k`.
"""

from __future__ import annotations

from functools import cache

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from retrievers.base import EorRetriever
from retrievers.operators import Concat, TopK
from tests.conftest import DEMO

# The suite's async test needs pytest-asyncio's mark; on its synchronous tests the mark is a no-op that warns.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function .*> is marked with '@pytest.mark.asyncio'"),
]

QUERY = "who was the first president of the united states"


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """Indexes of the demo corpus go to a private cache, built once for this module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EOR_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield
    _source.cache_clear()


@cache
def _source(kind: str) -> EorRetriever:
    from retrievers.registry import BuildContext, SourcePool

    return SourcePool(BuildContext(corpus_path=str(DEMO / "corpus.jsonl"))).source(kind)


class TestBM25(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[TopK]:
        return TopK

    @property
    def retriever_constructor_params(self) -> dict:
        return {"child": _source("BM25"), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestWiki(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[TopK]:
        return TopK

    @property
    def retriever_constructor_params(self) -> dict:
        return {"child": _source("Wiki"), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestTopKOfConcat(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[TopK]:
        return TopK

    @property
    def retriever_constructor_params(self) -> dict:
        both = Concat(children=[TopK(child=_source("BM25"), k=3), TopK(child=_source("Wiki"), k=3)])
        return {"child": both, "k": 5}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def test_the_composition_prints_its_member_name() -> None:
    retriever = TopK(**TestTopKOfConcat().retriever_constructor_params)
    assert retriever.notation == "(BM25@3&Wiki@3)@5"
    documents = retriever.invoke(QUERY, k=4)
    bm25, wiki = _source("BM25").invoke(QUERY), _source("Wiki").invoke(QUERY)
    assert [d.metadata["id"] for d in documents] == [d.metadata["id"] for d in bm25[:3] + wiki[:1]]
