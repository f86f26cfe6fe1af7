"""BM25 through bm25s against rank-bm25, the reference: the same scores bit for bit, the same top 20 on every
NQ question, every BM25 passage of the shipped records, and rank-bm25's idf floor by hand."""

from __future__ import annotations

import gzip
import json
import math
import re

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from retrievers.bm25 import BM25Retriever, top_indices
from retrievers.bm25_index import BM25Index, build_index, okapi_idf, tokenize
from retrievers.withheld import withholding
from tests.conftest import ROOT, SHARED_DATA, write_jsonl

NQ_CORPUS = SHARED_DATA / "corpus" / "wiki-nq.jsonl"
PURE_BM25 = re.compile(r"^BM25[@#](\d+)(:\w+)?$")  # BM25@k: the top k; BM25#k: the k-th alone


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> tuple[BM25Retriever, BM25Retriever]:
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EOR_CACHE", str(cache))
        fast = BM25Retriever(corpus_path=str(NQ_CORPUS), engine="bm25s")
        reference = BM25Retriever(corpus_path=str(NQ_CORPUS), engine="rank-bm25")
    return fast, reference


def nq_questions() -> list[str]:
    return [
        json.loads(line)["question"] for name in ("train", "dev") for line in open(SHARED_DATA / "nq" / f"{name}.jsonl")
    ]


def test_every_nq_question_scores_the_same_bit_for_bit(engines) -> None:
    fast, reference = engines
    questions = nq_questions()
    assert len(questions) > 1900
    for question in questions:
        ours, theirs = fast.scores(question), reference.scores(question)
        assert np.array_equal(ours, theirs), question  # bit for bit (so the top 20 are the same too)


def test_every_pure_bm25_member_of_the_shipped_records_is_reproduced(engines) -> None:
    fast, _ = engines
    checked = 0
    for packed in sorted((ROOT / "docs" / "records").glob("*.jsonl.gz")):
        with gzip.open(packed, "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if "eor_records" in record:
                    continue
                for name, output in record["members"].items():
                    if (match := PURE_BM25.match(name)) is None:
                        continue
                    # an ablated copy's withheld passages are left out, as `eor run` retrieved them
                    found = fast.invoke(record["question"], withholding(None, record.get("withheld") or ()))
                    rank = int(match.group(1))
                    top = found[:rank] if "@" in name else found[rank - 1 : rank]  # BM25#k: the k-th passage
                    assert [p["id"] for p in output["passages"]] == [d.metadata["id"] for d in top], (packed, name)
                    assert [p["score"] for p in output["passages"]] == [d.metadata["score"] for d in top]
                    checked += 1
    assert checked > 5000


def test_a_term_in_most_passages_gets_rank_bm25s_floor(tmp_path) -> None:
    """'cat' is in 3 of 4 passages: ln(4 - 3 + 0.5) - ln(3 + 0.5) < 0, so its idf is 0.25 x the mean idf."""
    texts = ["cat dog", "cat fish", "cat bird bird", "owl"]
    frequencies = [3, 1, 1, 1, 1]  # cat, dog, fish, bird, owl: the order they first appear in
    raw = [math.log(4 - n + 0.5) - math.log(n + 0.5) for n in frequencies]
    assert raw[0] < 0
    floor = 0.25 * sum(raw) / 5
    assert okapi_idf(frequencies, 4).tolist() == [floor, *raw[1:]]
    build_index(texts, tmp_path, k1=1.5, b=0.75)
    index = BM25Index(tmp_path)
    avgdl = 8 / 4  # 2 + 2 + 3 + 1 tokens
    by_hand = floor * (1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 3 / avgdl)))  # 'cat' in the 3-token passage
    scores = index.scores(["cat", "unknown", "cat"])
    assert scores[2] == pytest.approx(2 * by_hand, rel=1e-15)
    reference = BM25Okapi([text.split() for text in texts])
    assert np.array_equal(scores, reference.get_scores(["cat", "unknown", "cat"]))
    assert np.array_equal(index.scores(["bird", "owl"]), reference.get_scores(["bird", "owl"]))
    assert index.scores([]).tolist() == [0.0] * 4
    assert index.posting_lengths(["cat", "owl", "zebra"]) == [3, 1, 0]


def test_the_build_streams_in_chunks_and_gives_the_same_index(tmp_path, monkeypatch) -> None:
    """A build in chunks of 7 (term, count) pairs equals one built in one chunk, file for file."""
    texts = [f"{title} {text}" for _, title, text in _corpus_rows(300)]
    build_index(texts, tmp_path / "whole", k1=1.5, b=0.75)
    monkeypatch.setattr("retrievers.bm25_index.CHUNK", 7)
    build_index(iter(texts), tmp_path / "chunks", k1=1.5, b=0.75)
    for name in ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.index.json"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "chunks" / name).read_bytes(), name
    assert not list((tmp_path / "chunks").glob("chunk*"))
    reference = BM25Okapi([tokenize(text) for text in texts])
    index = BM25Index(tmp_path / "chunks")
    for question in nq_questions()[:50]:
        assert np.array_equal(index.scores(tokenize(question)), reference.get_scores(tokenize(question)))


def test_the_engine_is_checked_and_passages_come_from_disk(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "cache"))
    corpus = write_jsonl(
        tmp_path / "c.jsonl",
        [{"id": "a", "title": "Owls", "text": "Owls hunt at night."}, {"id": "b", "title": "", "text": "Cats sleep."}],
    )
    with pytest.raises(ValueError, match="bm25s"):
        BM25Retriever(corpus_path=str(corpus), engine="lucene")
    found = BM25Retriever(corpus_path=str(corpus), depth=1).invoke("when do owls hunt")
    assert [(d.metadata["id"], d.metadata["title"], d.page_content) for d in found] == [
        ("a", "Owls", "Owls hunt at night.")
    ]


def _corpus_rows(count: int) -> list[tuple[str, str, str]]:
    rows = []
    with NQ_CORPUS.open() as handle:
        for line in handle:
            record = json.loads(line)
            rows.append((record["id"], record.get("title") or "", record["text"]))
            if len(rows) == count:
                break
    return rows


def test_the_engine_is_in_a_members_identity_unless_it_is_the_default(tmp_path) -> None:
    from eor.core.config import EnsembleConfig, from_dict
    from eor.pipeline.pool import identity_differences, member_identity

    def identity(params: dict) -> dict:
        data = {"members": ["BM25@1"], "sources": {"BM25": {"type": "bm25", "params": params}}}
        config = from_dict(EnsembleConfig, data, "test")
        return member_identity(config, "BM25@1", {"reader": "r", "corpus": None})

    assert identity({}) == identity({"engine": "bm25s"})
    assert identity_differences(identity({}), identity({"engine": "rank-bm25"})) == [
        'sources: recorded {"BM25": {"depth": 20, "params": {}, "type": "bm25"}}, now {"BM25": {"depth": 20, '
        '"params": {"engine": "rank-bm25"}, "type": "bm25"}}'
    ]


def test_the_top_passages_are_those_of_a_full_stable_sort() -> None:
    """Against sorting every score (descending, ties in corpus order): ties at the last place, fewer
    positive scores than the depth, all zeros, and negative scores."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        size = int(rng.integers(1, 60))
        scores = rng.choice([0.0, 0.5, 1.0, 2.0, 3.5], size=size, p=[0.6, 0.1, 0.1, 0.1, 0.1])
        if trial % 5 == 0:
            scores[rng.random(size) < 0.2] = -1.0
        depth = int(rng.integers(1, 25))
        expected = np.lexsort((np.arange(size), -scores))[:depth]
        assert top_indices(scores, depth).tolist() == expected.tolist(), (scores, depth)


def test_passages_without_terms_and_a_corpus_of_stop_words(tmp_path, monkeypatch) -> None:
    """Empty and stop-word-only passages (a whole chunk of them, in chunks of one pair) score as rank-bm25
    scores them; a corpus of stop words alone has no vocabulary and scores every query 0."""
    monkeypatch.setattr("retrievers.bm25_index.CHUNK", 1)
    texts = ["the of and", "owls hunt", "", "is it", "owls sleep at noon", "a"]
    build_index(texts, tmp_path / "some", k1=1.5, b=0.75)
    reference = BM25Okapi([tokenize(text) for text in texts])
    index = BM25Index(tmp_path / "some")
    for query in (["owls"], ["noon", "owls", "owls"], ["zebra"], []):
        assert np.array_equal(index.scores(query), reference.get_scores(query)), query
    build_index(["the of", "", "is"], tmp_path / "none", k1=1.5, b=0.75)
    assert BM25Index(tmp_path / "none").scores(["owls"]).tolist() == [0.0, 0.0, 0.0]
