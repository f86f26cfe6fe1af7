"""Sources (BM25, Wiki, PK, ReFree), the @k and & operators, index persistence and LangChain behaviour: the
Runnable contract (callbacks and `RunnableConfig` per query, nested runs, `return_exceptions`) on members
built from the notation."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from eor import Ensemble
from eor.core.config import CorpusConfig, EnsembleConfig, VoterConfig
from eor.core.errors import ConfigError, InputError, RetrieverError
from eor.pipeline.stages.retrieval import RetrievalStage
from retrievers import index_store
from retrievers.base import NoRetrieval
from retrievers.bm25 import BM25Retriever
from retrievers.registry import BuildContext, SourcePool
from tests.conftest import write_jsonl


@pytest.fixture
def pool(demo_corpus, isolated_cache) -> SourcePool:
    return SourcePool(BuildContext(corpus_path=str(demo_corpus), depth=10))


def _ids(documents: list[Document]) -> list[str]:
    return [doc.metadata["id"] for doc in documents]


def _gold(demo_questions) -> list[dict]:
    return [json.loads(line) for line in demo_questions.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("source", ["BM25", "Wiki"])
def test_sources_find_the_gold_passage(pool, demo_questions, source: str) -> None:
    questions = _gold(demo_questions)
    results = pool.source(source).batch([q["question"] for q in questions])
    hits = sum(bool(set(q["gold_passages"]) & set(_ids(docs[:5]))) for q, docs in zip(questions, results, strict=True))
    assert hits / len(questions) >= 0.8, f"{source} found the gold passage in the top 5 for {hits}/{len(questions)}"
    first = results[0]
    assert len(first) == 10
    assert set(first[0].metadata) >= {"id", "title", "source", "score"} and first[0].metadata["source"] == source
    scores = [doc.metadata["score"] for doc in first]
    assert scores == sorted(scores, reverse=True)


def test_top_k_and_concat_by_hand(pool) -> None:
    query = "who was the first president of the united states"
    bm25 = _ids(pool.source("BM25").invoke(query))
    wiki = _ids(pool.source("Wiki").invoke(query))
    assert _ids(pool.build("BM25@3").invoke(query)) == bm25[:3]
    assert _ids(pool.build("Wiki@1").invoke(query)) == wiki[:1]
    assert _ids(pool.build("BM25@2&Wiki@2").invoke(query)) == bm25[:2] + wiki[:2]
    assert _ids(pool.build("(BM25@3&Wiki@3)@2").invoke(query)) == bm25[:2]
    assert pool.build("ReFree").invoke(query) == []
    assert pool.build("BM25@2&Wiki@2").notation == "BM25@2&Wiki@2"


def test_members_share_sources(pool) -> None:
    a, b = pool.build("BM25@1"), pool.build("BM25@2&Wiki@2")
    assert a.child is b.children[0].child


def test_unknown_source_and_bad_names(pool) -> None:
    with pytest.raises(RetrieverError, match="unknown source.*Wikki.*available: BM25, PK, ReFree, Wiki"):
        pool.build("Wikki@3")
    with pytest.raises(RetrieverError, match="position"):
        pool.build("BM25@@3")
    with pytest.raises(ConfigError, match="unknown type 'elastic'"):
        SourcePool(BuildContext(), {"ES": ("elastic", {})})
    with pytest.raises(ConfigError, match="needs a corpus"):
        SourcePool(BuildContext()).build("BM25@1")
    with pytest.raises(ConfigError, match="needs a reader"):
        SourcePool(BuildContext()).build("PK")
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) depht"):
        SourcePool(BuildContext(corpus_path="x"), {"B": ("bm25", {"depht": 3})}).build("B")


def test_an_added_operator_must_build_its_own_node(pool) -> None:
    from retrievers.operator_type import OperatorType, register_operator, unregister_operator

    register_operator(OperatorType("SAME", lambda child, context: child))  # forgets to wrap the child
    try:
        with pytest.raises(ConfigError, match=r"operator '@SAME' built 'BM25' for 'BM25@SAME'.*Applied"):
            pool.build("BM25@SAME@2")
    finally:
        unregister_operator("SAME")
    with pytest.raises(RetrieverError, match="unknown operator '@SAME'"):
        pool.build("BM25@SAME@2")


def test_index_is_persisted_and_reused(demo_corpus, isolated_cache, monkeypatch) -> None:
    from retrievers.dense import DenseRetriever

    first = DenseRetriever(corpus_path=str(demo_corpus))
    folders = sorted(p.name for p in (isolated_cache / "indexes").glob("dense-*"))  # beside the corpus's offsets
    assert len(folders) == 1
    meta = json.loads((isolated_cache / "indexes" / folders[0] / "meta.json").read_text())
    assert meta["encoder"] == "minilm-l6"

    def no_rebuild(folder, meta, build):
        raise AssertionError("the index was rebuilt")

    real = index_store.load_or_build
    monkeypatch.setattr("retrievers.dense.load_or_build", lambda f, m, b, **given: real(f, m, no_rebuild, **given))
    second = DenseRetriever(corpus_path=str(demo_corpus))
    query = "what is the largest planet in the solar system"
    assert _ids(second.invoke(query)) == _ids(first.invoke(query))


def test_changed_corpus_gets_a_new_index(tmp_path, isolated_cache) -> None:
    from retrievers.bm25 import BM25Retriever

    fruit = [
        {"id": "a", "title": "Apples", "text": "Apples are red fruit."},
        {"id": "b", "title": "Bananas", "text": "Bananas are yellow fruit."},
        {"id": "c", "title": "Grapes", "text": "Grapes are green or purple fruit."},
        {"id": "d", "title": "Plums", "text": "Plums are purple fruit."},
    ]
    corpus = write_jsonl(tmp_path / "c.jsonl", fruit)
    assert _ids(BM25Retriever(corpus_path=str(corpus), depth=1).invoke("yellow")) == ["b"]
    (before,) = (isolated_cache / "indexes").glob("bm25s-*")
    fruit[1] = {"id": "b", "title": "Bananas", "text": "Bananas are long fruit."}
    fruit[2] = {"id": "c", "title": "Lemons", "text": "Lemons are yellow and sour."}
    write_jsonl(corpus, fruit)
    assert _ids(BM25Retriever(corpus_path=str(corpus), depth=1).invoke("yellow")) == ["c"]
    (after,) = (isolated_cache / "indexes").glob("bm25s-*")  # the earlier version's index superseded and removed
    assert after != before and not before.exists()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (['{"id": "a", "text": "x"}', "{not json"], r"c.jsonl:2: not valid JSON"),
        (['{"id": "a", "title": "t"}'], r"c.jsonl:1: a corpus line needs a string field 'text'"),
        (['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'], "duplicate passage id 'a'"),
        ([""], "the corpus is empty"),
    ],
)
def test_malformed_corpus(tmp_path, isolated_cache, rows, message) -> None:
    from retrievers.bm25 import BM25Retriever

    corpus = write_jsonl(tmp_path / "c.jsonl", rows)
    with pytest.raises(InputError, match=message):
        BM25Retriever(corpus_path=str(corpus))


def test_parametric_knowledge_uses_the_reader(smollm2) -> None:
    from retrievers.parametric import ParametricRetriever

    pk = ParametricRetriever(reader=smollm2, max_tokens=24)
    docs = pk.batch(["who discovered penicillin", "what is the boiling point of water"])
    assert [len(d) for d in docs] == [1, 1]
    assert all(d[0].page_content and d[0].metadata["source"] == "PK" for d in docs)
    expected = smollm2.generate(
        ["Generate a background document to answer the given question. who discovered penicillin."],
        max_tokens=24,
    )[0].strip()
    assert docs[0][0].page_content == expected


def test_langchain_interface(pool) -> None:
    bm25 = pool.build("BM25@2")
    assert isinstance(bm25, BaseRetriever)
    query = "what is the chemical symbol for gold"
    single = bm25.invoke(query)
    assert bm25.batch([query, query]) == [single, single]
    assert asyncio.run(bm25.ainvoke(query)) == single
    assert NoRetrieval().invoke(query) == []


def test_any_langchain_retriever_as_a_source(pool) -> None:
    """A foreign BaseRetriever joins a pool unchanged, from Python."""

    class Echo(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun):
            return [Document(page_content=f"{query} {i}") for i in range(3)]

    pool.add("Echo", Echo())
    docs = pool.build("Echo@2&BM25@1").invoke("mars")
    assert [d.page_content for d in docs[:2]] == ["mars 0", "mars 1"]
    assert docs[0].metadata == {"title": "", "score": None, "id": "Echo:0", "source": "Echo"}
    assert docs[2].metadata["source"] == "BM25"


class Runs(BaseCallbackHandler):
    """Records LangChain's retriever runs: name, query, parent, tags, metadata, and how each ended."""

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, tags=None, metadata=None, **kw):
        self.runs[run_id] = {"name": kw.get("name"), "query": query, "parent": parent_run_id, "tags": tags}
        self.runs[run_id]["metadata"] = metadata

    def on_retriever_end(self, documents, *, run_id, parent_run_id=None, **kw):
        self.runs[run_id]["documents"] = documents

    def on_retriever_error(self, error, *, run_id, parent_run_id=None, **kw):
        self.runs[run_id]["error"] = error

    def children(self, run_id: UUID | None) -> list[dict[str, Any]]:
        return [{**run, "id": key} for key, run in self.runs.items() if run["parent"] == run_id]


class Picky(BaseRetriever):
    """A foreign LangChain retriever that cannot parse questions about volcanoes."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if "volcano" in query:
            raise ValueError("cannot parse the query")
        return [Document(page_content=f"notes on {query}")]


QUERIES = ["who painted the mona lisa", "what is the capital of france", "who was the first president"]


def test_callbacks_see_every_query_of_a_batch_as_nested_runs(pool) -> None:
    member = pool.build("BM25@2&BM25@1")
    runs = Runs()
    configs = [{"callbacks": [runs], "tags": ["eval"], "metadata": {"question": n}} for n in range(len(QUERIES))]
    results = member.batch(QUERIES, configs)
    assert results == [member.invoke(query) for query in QUERIES]  # the same documents as one by one

    tops = runs.children(None)
    assert [run["query"] for run in tops] == QUERIES  # one member run per query, in order
    for n, top in enumerate(tops):
        assert top["name"] == "Concat" and top["documents"] == results[n]
        top_ks = runs.children(top["id"])  # `BM25@2` and `BM25@1`, under this query's run
        assert [(run["name"], run["query"], len(run["documents"])) for run in top_ks] == [
            ("TopK", QUERIES[n], 2),
            ("TopK", QUERIES[n], 1),
        ]
        for top_k in top_ks:
            (source,) = runs.children(top_k["id"])
            assert source["name"] == "BM25Retriever" and source["query"] == QUERIES[n]
            assert source["documents"][: len(top_k["documents"])] == top_k["documents"]
            # the config's tags and metadata reach the whole tree, each query with its own
            assert "eval" in source["tags"] and source["metadata"]["question"] == n
    assert len(runs.runs) == len(QUERIES) * 5


def test_one_call_serves_the_batch_and_members_share_the_source(pool, monkeypatch) -> None:
    calls: list[list[str]] = []
    original = BM25Retriever._retrieve_uncached

    def counted(self, queries, *, run_managers):
        calls.append(list(queries))
        return original(self, queries, run_managers=run_managers)

    monkeypatch.setattr(BM25Retriever, "_retrieve_uncached", counted)
    runs = Runs()
    pool.build("BM25@2&BM25@1").batch([*QUERIES, QUERIES[0]], {"callbacks": [runs], "run_name": "BM25@2&BM25@1"})
    assert calls == [QUERIES]  # one call for the batch, each question once, the second child from the memo
    assert [run["name"] for run in runs.children(None)] == ["BM25@2&BM25@1"] * 4


def test_a_failing_query_surfaces_per_input(pool) -> None:
    pool.add("Picky", Picky())
    member = pool.build("BM25@1&Picky@1")
    queries = [QUERIES[0], "which volcano erupted in 79 AD", QUERIES[1]]
    runs = Runs()
    results = member.batch(queries, {"callbacks": [runs]}, return_exceptions=True)
    assert isinstance(results[1], ValueError) and str(results[1]) == "cannot parse the query"
    assert results[0] == member.invoke(queries[0]) and results[2] == member.invoke(queries[2])
    ends = {run["query"]: run for run in runs.children(None)}
    assert "error" in ends[queries[1]] and "documents" in ends[queries[0]] and "documents" in ends[queries[2]]
    with pytest.raises(ValueError, match="cannot parse the query"):
        member.batch(queries)


def test_the_retrieval_stage_runs_members_under_the_callers_config(pool) -> None:
    runs = Runs()
    stage = RetrievalStage({"BM25@2&BM25@1": pool.build("BM25@2&BM25@1")}, config={"callbacks": [runs]})
    results = stage.retrieve("BM25@2&BM25@1", QUERIES[:2])
    tops = runs.children(None)
    assert [(run["name"], run["query"]) for run in tops] == [("BM25@2&BM25@1", query) for query in QUERIES[:2]]
    assert [run["documents"] for run in tops] == results
    assert all(len(runs.children(run["id"])) == 2 for run in tops)


class FirstTitleReader:
    """A reader without a model: the title of the first passage in the prompt."""

    name = "first-title"

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        marker = "Assuming the following paragraphs are true:\n\n"
        return [p.split(marker, 1)[1].split("\n", 1)[0] if marker in p else "unknown" for p in prompts]


def test_an_ensembles_callbacks_reach_every_member(demo_corpus, isolated_cache) -> None:
    runs = Runs()
    config = EnsembleConfig(
        members=["BM25@1", "BM25@2&BM25@1"],
        corpus=CorpusConfig(path=str(demo_corpus)),
        voter=VoterConfig(metrics=["em", "f1"]),
    )
    ensemble = Ensemble(config, reader=FirstTitleReader(), cache=False, retrieval_config={"callbacks": [runs]})
    result = ensemble.answer_batch(QUERIES[:2], lazy=False)[0]
    assert result.members["BM25@1"].answer == "Mona Lisa"
    tops = runs.children(None)
    assert sorted((run["name"], run["query"]) for run in tops) == sorted(
        (member, query) for member in config.members for query in QUERIES[:2]
    )
    assert all(runs.children(run["id"]) for run in tops)  # each member's tree nests under its run
