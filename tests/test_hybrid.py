"""HB (appendix C.1): SE's chunks + PK's document in 100-word chunks + the top-20 Wiki passages, in that
order, reranked by HB@RR@10; the default HB of pools with SE, configured parts, the offline HBo, errors."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document

from eor.core.errors import ConfigError, RetrieverError
from retrievers.base import SourceRetriever, passage
from retrievers.builtin_sources import HYBRID
from retrievers.hybrid import HybridPart, HybridRetriever
from retrievers.registry import BuildContext, SourcePool, source_names

QUERY = "who built the bell rock lighthouse"


class Listed(SourceRetriever):
    """A source that returns the same passages for every query."""

    documents: list[Document]

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        return [list(self.documents) for _ in queries]


class Web(Listed):
    """Like the SE source: page heads by default, all pages in chunks under @RR (`for_rerank`)."""

    chunks: list[Document]

    def for_rerank(self) -> Listed:
        return Listed(source_name=self.source_name, documents=self.chunks)


def words(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def web() -> Web:
    heads = [passage(words("head", 20), id="SE:a:w250", source="SE")]
    chunks = [
        passage("Robert Stevenson built the Bell Rock Lighthouse between 1807 and 1810.", id="SE:a#0", source="SE"),
        passage(words("page", 100), id="SE:a#1", source="SE"),
        passage("The lighthouse stands in the North Sea off the coast of Angus, Scotland.", id="SE:b#0", source="SE"),
    ]
    return Web(source_name="SE", documents=heads, chunks=chunks)


def pk() -> Listed:
    return Listed(source_name="PK", documents=[passage(words("pk", 250), id="PK:1234", source="PK")])


def wiki(n: int = 25) -> Listed:
    docs = [passage(f"Wiki passage {i} about lighthouses and the sea.", id=f"w{i}", source="Wiki") for i in range(n)]
    return Listed(source_name="Wiki", documents=docs)


def pool(**sources) -> SourcePool:
    built = SourcePool(BuildContext(), {name: ("none", {}) for name in sources})
    for name, retriever in sources.items():
        built.add(name, retriever)
    return built


def ids(documents: list[Document]) -> list[str]:
    return [doc.metadata["id"] for doc in documents]


def test_hb_is_se_chunks_then_pk_chunks_then_the_top_20_wiki_passages() -> None:
    hb = pool(SE=web(), PK=pk(), Wiki=wiki()).build("HB")
    assert isinstance(hb, HybridRetriever) and hb.notation == "HB"
    documents = hb.invoke(QUERY)
    # SE: its @RR view (all chunks), not its 250-word heads; PK: 250 words -> 100 + 100 + 50; Wiki: top 20 of 25.
    assert ids(documents) == (
        ["SE:a#0", "SE:a#1", "SE:b#0", "PK:1234#0", "PK:1234#1", "PK:1234#2"] + [f"w{i}" for i in range(20)]
    )
    assert [len(d.page_content.split()) for d in documents[3:6]] == [100, 100, 50]
    assert documents[4].page_content == " ".join(f"pk{i}" for i in range(100, 200))
    assert [d.metadata["source"] for d in documents[:7]] == ["SE"] * 3 + ["PK"] * 3 + ["Wiki"]


def test_hb_rr_10_reranks_all_chunks_by_cosine_and_cp_summarises_them() -> None:
    from eor.core.models import load_sentence_encoder

    class Reader:
        def __init__(self) -> None:
            self.prompts: list[str] = []

        def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
            self.prompts.extend(prompts)
            return ["Robert Stevenson built it."] * len(prompts)

    reader = Reader()
    sources = pool(SE=web(), PK=pk(), Wiki=wiki())
    sources.context.reader = reader
    chunks = sources.build("HB").invoke(QUERY)
    member = sources.build("HB@RR@10")
    assert member.notation == "HB@RR@10"
    reranked = member.invoke(QUERY)

    model = load_sentence_encoder("minilm-l6")
    vectors = model.encode([QUERY, *(c.page_content for c in chunks)], normalize_embeddings=True)
    cosine = vectors[1:] @ vectors[0]
    expected = [chunks[i].metadata["id"] for i in np.lexsort((np.arange(len(chunks)), -cosine))[:10]]
    assert ids(reranked) == expected and expected[0] == "SE:a#0"
    np.testing.assert_allclose([d.metadata["score"] for d in reranked], np.sort(cosine)[::-1][:10], atol=1e-5)

    compressed = sources.build("HB@RR@10@CP")
    assert compressed.notation == "HB@RR@10@CP"
    assert [d.page_content for d in compressed.invoke(QUERY)] == ["Robert Stevenson built it."]
    assert all(doc.page_content in reader.prompts[-1] for doc in reranked)


def test_hb_is_a_default_source_only_of_pools_with_se() -> None:
    assert "HB" in SourcePool(BuildContext(), {"SE": ("web", {})}).specs
    assert "HB" not in SourcePool(BuildContext()).specs
    assert source_names({"SE": None}) == {"BM25", "HB", "PK", "ReFree", "SE", "Wiki"}
    assert source_names() == {"BM25", "PK", "ReFree", "Wiki"}
    with pytest.raises(RetrieverError, match="unknown source.*HB"):
        SourcePool(BuildContext()).build("HB@RR@10")
    # A config's own HB wins over the default.
    assert SourcePool(BuildContext(), {"SE": ("web", {}), "HB": ("none", {})}).specs["HB"] == ("none", {})


def test_a_text_in_two_parts_is_pooled_once() -> None:
    same = passage("Robert Stevenson built the Bell Rock Lighthouse.", id="w7", source="Wiki")
    first = Listed(source_name="BM25", documents=[same, passage("Another passage.", id="w2", source="BM25")])
    second = Listed(source_name="Wiki", documents=[passage("A third one.", id="w9", source="Wiki"), same])
    retriever = HybridRetriever(parts=[HybridPart(retriever=first), HybridPart(retriever=second)])
    assert ids(retriever.invoke(QUERY)) == ["w7", "w2", "w9"]


def test_configured_parts_and_depths() -> None:
    sources = pool(SE=web(), PK=pk(), Wiki=wiki(), BM25=wiki(5))
    sources.specs["H2"] = ("hybrid", {"parts": ["Wiki", {"source": "SE", "depth": 2}], "chunk_words": 50})
    sources.specs["H3"] = ("hybrid", {"parts": [{"source": "PK"}]})
    assert ids(sources.build("H2").invoke(QUERY)) == [f"w{i}" for i in range(25)] + ["SE:a#0", "SE:a#1#0", "SE:a#1#1"]
    assert ids(sources.build("H3@2").invoke(QUERY)) == ["PK:1234#0", "PK:1234#1"]
    retriever = HybridRetriever(parts=[HybridPart(retriever=wiki(), depth=3), HybridPart(retriever=pk())])
    assert ids(retriever.invoke(QUERY)) == ["w0", "w1", "w2", "PK:1234#0", "PK:1234#1", "PK:1234#2"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"colour": "red"}, r"unknown parameter\(s\) colour; valid: chunk_words, parts"),
        ({"parts": []}, "'parts' must be a list of sources"),
        ({"parts": [{"name": "SE"}]}, r"parts\[0\] must be a source name"),
        ({"parts": [{"source": "Wiki", "depth": 0}]}, r"parts\[0\].depth must be a positive integer"),
        ({"parts": ["Wiki"], "chunk_words": 0}, "source .HB.: chunk_words: Input should be greater than 0"),
        ({"parts": ["SE", "Wiki"]}, "part 'SE': unknown source 'SE'"),
    ],
)
def test_configuration_errors(params, message) -> None:
    sources = pool(PK=pk(), Wiki=wiki())
    sources.specs["HB"] = ("hybrid", params)
    with pytest.raises(ConfigError, match=message):
        sources.build("HB@RR@10")


def test_a_hybrid_of_itself_and_one_outside_a_pool() -> None:
    sources = pool(Wiki=wiki())
    sources.specs["A"] = ("hybrid", {"parts": ["Wiki", "B"]})
    sources.specs["B"] = ("hybrid", {"parts": ["A"]})
    with pytest.raises(ConfigError, match="built from itself: A -> B -> A"):
        sources.build("A")
    with pytest.raises(ConfigError, match="through a SourcePool"):
        HYBRID.create("HB", {}, BuildContext())


def test_offline_hbo_over_bm25_pk_and_wiki(demo_corpus, isolated_cache) -> None:
    """The offline stand-in of nq-offline16.yaml: all BM25 results + PK chunks + the top 20 Wiki passages."""
    parts = [{"source": "BM25"}, {"source": "PK"}, {"source": "Wiki", "depth": 20}]
    sources = SourcePool(BuildContext(corpus_path=str(demo_corpus), depth=20), {"HBo": ("hybrid", {"parts": parts})})
    sources.add("PK", pk())
    documents = sources.build("HBo").invoke(QUERY)
    bm25, wiki_top = sources.source("BM25").invoke(QUERY), sources.source("Wiki").invoke(QUERY)
    shared = set(ids(bm25)) & set(ids(wiki_top)[:20])
    assert shared  # both retrieve from one corpus: the passages they share are pooled once, at BM25's place
    wiki_rest = [i for i in ids(wiki_top)[:20] if i not in shared]
    assert ids(documents) == ids(bm25) + ["PK:1234#0", "PK:1234#1", "PK:1234#2"] + wiki_rest
    assert len(documents) == 20 + 3 + 20 - len(shared)
    assert sources.build("HBo@RR@10").notation == "HBo@RR@10" and len(sources.build("HBo@RR@10").invoke(QUERY)) == 10
