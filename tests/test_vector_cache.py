"""The passage vector cache (retrievers.vector_cache) and what it buys: a corpus file that changed builds its dense
index encoding only its new or changed passages, with the vectors an empty cache gives; the index of the file's
earlier version is removed (retrievers.index_store, superseded); the cache keeps exact float32 bytes, keys on the
encoding settings and stays under its bound."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from retrievers import index_store
from retrievers.dense import DenseRetriever
from retrievers.vector_cache import VectorCache, passage_key
from tests.conftest import DEMO, write_jsonl


def test_vectors_come_back_as_written_keyed_by_settings_and_bounded(tmp_path):
    cache = VectorCache(tmp_path, max_bytes=3500)
    rng = np.random.default_rng(0)
    vectors = {passage_key("t", f"text {i}"): rng.standard_normal(16).astype(np.float32) for i in range(10)}
    cache.put_many("s1", vectors.items())
    found = cache.get_many("s1", list(vectors))
    assert all(np.array_equal(found[key], vector) for key, vector in vectors.items())  # bit for bit
    assert cache.get_many("s2", list(vectors)) == {}  # other settings: another vector
    assert passage_key("a", "bc") != passage_key("ab", "c")  # title and text kept apart
    # each vector holds 32 + 64 bytes: 30 more take the file to 3840 bytes, past 3500; the least recently used
    # go first until 90% of the bound is left (8 vectors): those of the first ten that were not read again
    time.sleep(0.01)
    read = list(vectors)[:2]
    cache.get_many("s1", read)
    time.sleep(0.01)
    more = {passage_key("t", f"more {i}"): rng.standard_normal(16).astype(np.float32) for i in range(30)}
    cache.put_many("s1", more.items())
    assert cache.report().bytes_in_use <= 3500 and len(cache) == 32
    assert set(cache.get_many("s1", list(vectors))) == set(read) and len(cache.get_many("s1", list(more))) == 30


def _corpus(path: Path, changed: int = 0) -> list[dict]:
    """The demo corpus, the first `changed` passages' text edited."""
    rows = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines() if line.strip()]
    for row in rows[:changed]:
        row["text"] = row["text"] + " (edited)"
    write_jsonl(path, rows)
    return rows


def _vectors(retriever: DenseRetriever) -> np.ndarray:
    index = retriever.index
    return np.vstack([index.reconstruct(i) for i in range(index.ntotal)])


def test_a_changed_corpus_encodes_only_its_changed_passages(tmp_path, monkeypatch):
    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.jsonl"
    rows = _corpus(corpus)
    first = DenseRetriever(corpus_path=str(corpus), depth=5)
    assert first.encoded == {"encoded": len(rows), "cached": 0}
    old = sorted(p.name for p in index_store.index_root().iterdir() if p.name.startswith("dense-"))
    _corpus(corpus, changed=3)
    second = DenseRetriever(corpus_path=str(corpus), depth=5)
    assert second.encoded == {"encoded": 3, "cached": len(rows) - 3}
    # the same vectors as an index built from an empty cache
    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "empty"))
    fresh = DenseRetriever(corpus_path=str(corpus), depth=5)
    assert fresh.encoded == {"encoded": len(rows), "cached": 0}
    np.testing.assert_allclose(_vectors(second), _vectors(fresh), atol=1e-6)
    assert not np.allclose(_vectors(first)[:3], _vectors(second)[:3], atol=1e-3)  # the edited ones did change
    # the first version's index was superseded and removed; the new one is there
    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "cache"))
    now = sorted(p.name for p in index_store.index_root().iterdir() if p.name.startswith("dense-"))
    assert len(old) == len(now) == 1 and old != now
    assert not any(p.name.startswith("corpus-") and p.name[7:23] in old[0] for p in index_store.index_root().iterdir())
    lineage = json.loads((index_store.index_root() / index_store.LINEAGE).read_text())
    assert now[0] in lineage.values()


@pytest.mark.parametrize("kind", ["bm25s", "corpus"])
def test_every_index_of_an_earlier_version_of_a_corpus_file_is_superseded(tmp_path, monkeypatch, kind):
    from retrievers.bm25 import BM25Retriever

    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.jsonl"
    _corpus(corpus)
    BM25Retriever(corpus_path=str(corpus), depth=5)
    before = {p.name for p in index_store.index_root().iterdir() if p.name.startswith(f"{kind}-")}
    _corpus(corpus, changed=1)
    BM25Retriever(corpus_path=str(corpus), depth=5)
    after = {p.name for p in index_store.index_root().iterdir() if p.name.startswith(f"{kind}-")}
    assert len(before) == len(after) == 1 and before != after


def test_a_local_encoder_saved_again_under_the_same_path_encodes_anew(tmp_path, monkeypatch):
    """Vectors and indexes are keyed by the encoder's content digest, not its name: a model folder saved again
    with other weights under the same path encodes every passage again, with the new weights' vectors; the same
    folder unchanged reads them all back."""
    import shutil

    import torch
    from sentence_transformers import SentenceTransformer

    from eor.core.models import resolve_model

    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.jsonl"
    rows = _corpus(corpus)
    model = tmp_path / "my-encoder"
    shutil.copytree(resolve_model("minilm-l6"), model)
    first = DenseRetriever(corpus_path=str(corpus), encoder=str(model), depth=5)
    assert first.encoded == {"encoded": len(rows), "cached": 0}
    assert not DenseRetriever(corpus_path=str(corpus), encoder=str(model), depth=5).encoded.get("encoded")
    tuned = SentenceTransformer(str(model), device="cpu")
    with torch.no_grad():
        for parameter in list(tuned.parameters())[-4:]:
            parameter.mul_(1.5).add_(0.01)
    tuned.save(str(model))  # saved again under the same path
    again = DenseRetriever(corpus_path=str(corpus), encoder=str(model), depth=5)
    assert again.encoded == {"encoded": len(rows), "cached": 0}
    assert not np.allclose(_vectors(first), _vectors(again), atol=1e-3)
