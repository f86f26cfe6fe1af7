"""Wiki: the FAISS inner-product index (equal to exact numpy search, persisted, reloaded, converted from the
numpy format) and the two-tower path (tiny DPR question and context encoders built here, no download)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from eor.core.errors import ConfigError
from retrievers import dense, index_store
from retrievers.bm25 import top_indices
from retrievers.corpus import load_corpus
from retrievers.dense import DenseRetriever
from retrievers.registry import BuildContext, SourcePool
from tests.conftest import write_jsonl

QUESTIONS = [
    "who was the first president of the united states",
    "what is the largest planet in the solar system",
    "who wrote romeo and juliet",
    "when did the berlin wall fall",
]


def _ids(documents) -> list[str]:
    return [doc.metadata["id"] for doc in documents]


def _numpy_search(query_vectors: np.ndarray, passage_vectors: np.ndarray, depth: int) -> list[list[tuple[int, float]]]:
    """The exact search dense.py did before FAISS: scores = Q @ P.T, top `depth`, ties in corpus order."""
    scores = query_vectors @ passage_vectors.T
    return [[(int(i), float(row[i])) for i in top_indices(row, depth)] for row in scores]


def _assert_same(documents, expected: list[tuple[int, float]], ids: list[str]) -> None:
    assert _ids(documents) == [ids[i] for i, _ in expected]
    np.testing.assert_allclose([doc.metadata["score"] for doc in documents], [s for _, s in expected], atol=1e-5)


@pytest.fixture(scope="module")
def built(tmp_path_factory, demo_corpus) -> tuple[Path, DenseRetriever]:
    """The Wiki index of the demo corpus, built once in a private cache."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EOR_CACHE", str(cache))
        return cache, DenseRetriever(corpus_path=str(demo_corpus), depth=10)


@pytest.fixture(scope="module")
def reference(demo_corpus) -> tuple[np.ndarray, np.ndarray]:
    """Passage and question vectors computed here with sentence-transformers, as the numpy version did."""
    from eor.core.models import load_sentence_encoder

    corpus = load_corpus(demo_corpus)
    model = load_sentence_encoder("minilm-l6")
    texts = [f"{t}. {x}" if t else x for t, x in ((p.title, p.text) for p in corpus)]
    passages = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    return passages, model.encode(QUESTIONS, normalize_embeddings=True, convert_to_numpy=True)


def test_flat_ip_index_equals_exact_numpy_search(built, reference, demo_corpus) -> None:
    import faiss

    _, wiki = built
    passages, queries = reference
    corpus = load_corpus(demo_corpus)
    assert isinstance(wiki.index, faiss.IndexFlatIP) and wiki.index.ntotal == len(corpus)
    np.testing.assert_allclose(wiki.index.reconstruct_n(0, len(corpus)), passages, atol=1e-5)
    for documents, expected in zip(wiki.batch(QUESTIONS), _numpy_search(queries, passages, 10), strict=True):
        _assert_same(documents, expected, [p.id for p in corpus])
    assert _ids(wiki.invoke(QUESTIONS[0]))[0] == "demo-001"


def test_index_is_written_with_its_meta_and_read_back(built, demo_corpus, monkeypatch) -> None:
    import faiss

    cache, first = built
    (folder,) = (cache / "indexes").glob("dense-*")  # beside the corpus's offsets index
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss", "meta.json"]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["corpus_sha256"] == load_corpus(demo_corpus).sha256
    assert (meta["encoder"], meta["index"], meta["normalize"], meta["version"]) == ("minilm-l6", "Flat", True, 2)

    monkeypatch.setenv("EOR_CACHE", str(cache))
    read: list[str] = []
    real_read = faiss.read_index
    monkeypatch.setattr(faiss, "read_index", lambda path, *a: read.append(path) or real_read(path, *a))

    def no_rebuild(tmp: Path) -> None:
        raise AssertionError("the index was rebuilt")

    real = index_store.load_or_build
    monkeypatch.setattr("retrievers.dense.load_or_build", lambda f, m, b, **given: real(f, m, no_rebuild, **given))
    monkeypatch.setattr(dense, "_tower_backend", lambda name: pytest.fail("an encoder was asked about passages"))
    loaded = DenseRetriever(corpus_path=str(demo_corpus), depth=10)
    assert read == [str(folder / "index.faiss")]
    monkeypatch.undo()
    assert _ids(loaded.invoke(QUESTIONS[1])) == _ids(first.invoke(QUESTIONS[1]))


def test_a_numpy_index_of_the_first_format_is_converted_without_encoding(
    reference, demo_corpus, isolated_cache, monkeypatch
) -> None:
    passages, queries = reference
    corpus = load_corpus(demo_corpus)
    folder = index_store.index_folder("dense", corpus.sha256, "minilm-l6")
    folder.mkdir(parents=True)
    np.save(folder / "embeddings.npy", passages)  # what the numpy version wrote
    old = {"kind": "dense", "corpus_sha256": corpus.sha256, "encoder": "minilm-l6", "passage_prefix": "", "version": 1}
    (folder / "meta.json").write_text(json.dumps(old))
    tower = dense._tower("minilm-l6", "auto", 256)

    class NoPassageEncoding:
        def encode_passages(self, *args, **kwargs):
            raise AssertionError("the corpus was encoded again")

        def encode_queries(self, *args, **kwargs):
            return tower.encode_queries(*args, **kwargs)

    monkeypatch.setattr(dense, "_tower", lambda *args: NoPassageEncoding())
    converted = DenseRetriever(corpus_path=str(demo_corpus), depth=5)
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss", "meta.json"]
    assert json.loads((folder / "meta.json").read_text())["version"] == 2
    for documents, expected in zip(converted.batch(QUESTIONS), _numpy_search(queries, passages, 5), strict=True):
        _assert_same(documents, expected, [p.id for p in corpus])


def test_an_approximate_faiss_index_by_factory_string(small_corpus, isolated_cache) -> None:
    import faiss

    exact = DenseRetriever(corpus_path=str(small_corpus), depth=5)
    hnsw = DenseRetriever(corpus_path=str(small_corpus), depth=5, index_factory="HNSW32")
    assert isinstance(hnsw.index, faiss.IndexHNSWFlat) and hnsw.index.ntotal == exact.index.ntotal
    assert len(list((isolated_cache / "indexes").glob("dense-*"))) == 2
    agree = [_ids(hnsw.invoke(q))[0] == _ids(exact.invoke(q))[0] for q in QUESTIONS]
    assert sum(agree) >= len(QUESTIONS) - 1
    with pytest.raises(ConfigError, match="index_factory 'Nonsense'"):
        DenseRetriever(corpus_path=str(small_corpus), index_factory="Nonsense")


def test_ivf_and_ivf_pq_indexes(demo_corpus, isolated_cache) -> None:
    import faiss

    exact = DenseRetriever(corpus_path=str(demo_corpus), depth=10)
    every_list = DenseRetriever(corpus_path=str(demo_corpus), depth=10, index_factory="IVF8,Flat", nprobe=8)
    assert faiss.extract_index_ivf(every_list.index).nprobe == 8 and every_list.index.ntotal == exact.index.ntotal
    for ivf, flat in zip(every_list.batch(QUESTIONS), exact.batch(QUESTIONS), strict=True):
        assert _ids(ivf) == _ids(flat)  # every inverted list searched: exact
    one_list = DenseRetriever(corpus_path=str(demo_corpus), depth=10, index_factory="IVF8,Flat", nprobe=1)
    assert faiss.extract_index_ivf(one_list.index).nprobe == 1  # the same index, searched in one list
    pq = DenseRetriever(corpus_path=str(demo_corpus), depth=10, index_factory="IVF4,PQ8x4", nprobe=4)
    assert pq.index.code_size == 4  # 8 codes of 4 bits per passage, against 384 floats of 4 bytes
    hits = sum(_ids(pq.invoke(q))[0] in _ids(exact.invoke(q))[:3] for q in QUESTIONS)
    assert hits >= len(QUESTIONS) - 1
    names = sorted(p.name for p in (isolated_cache / "indexes").glob("dense-*"))
    assert len(names) == 3 and not any(name.endswith(".partial") for name in names)


def test_encoding_the_corpus_resumes_after_an_interruption(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(dense, "ENCODE_SHARD", 10)
    rows = np.arange(35 * 3, dtype=np.float32).reshape(35, 3)
    calls: list[tuple[int, int]] = []

    def encode(start: int, end: int) -> np.ndarray:
        calls.append((start, end))
        if len(calls) == 3:
            raise KeyboardInterrupt  # the build is interrupted during the third shard
        return rows[start:end]

    partial = tmp_path / "index.partial"
    meta = {"corpus_sha256": "abc", "encoder": "e"}
    with pytest.raises(KeyboardInterrupt):
        dense.encode_in_shards(partial, meta, 35, encode)
    assert sorted(p.name for p in partial.glob("*.npy")) == ["000000000000.npy", "000000000010.npy"]
    calls.clear()
    np.testing.assert_array_equal(dense.encode_in_shards(partial, meta, 35, encode), rows)
    assert calls == [(20, 30), (30, 35)]  # the two shards on disk were not encoded again
    calls.clear()
    dense.encode_in_shards(partial, {**meta, "encoder": "other"}, 35, lambda a, b: calls.append(1) or rows[a:b])
    assert len(calls) == 4  # shards of another encoder are not reused


# -- two towers -------------------------------------------------------------------------------------------


def _tokenizer(vocab: dict[str, int], folder: Path):
    import transformers

    cls = transformers.DPRQuestionEncoderTokenizer
    if "vocab" in inspect.signature(cls.__init__).parameters:  # transformers >= 5
        return cls(vocab=vocab)
    file = folder / "vocab.txt"
    file.write_text("\n".join(vocab) + "\n")
    return cls(vocab_file=str(file))


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, demo_corpus) -> Path:
    """The first 40 passages of the demo corpus."""
    rows = [json.loads(line) for line in demo_corpus.read_text().splitlines()[:40]]
    return write_jsonl(tmp_path_factory.mktemp("small") / "corpus.jsonl", rows)


@pytest.fixture(scope="module")
def dpr_towers(tmp_path_factory, small_corpus) -> tuple[Path, Path, Path]:
    """The small corpus and two tiny random DPR towers (question, context) with a shared vocabulary."""
    import re

    import torch
    import transformers

    root = tmp_path_factory.mktemp("dpr")
    corpus = small_corpus
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    words = sorted({w for row in rows for w in re.findall(r"\w+|[^\w\s]", f"{row['title']} {row['text']}".lower())})
    words += sorted({w for q in QUESTIONS for w in re.findall(r"\w+|[^\w\s]", q)} - set(words))
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tokenizer = _tokenizer(vocab, root)
    config = transformers.DPRConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    folders = []
    for seed, cls in ((1, transformers.DPRQuestionEncoder), (2, transformers.DPRContextEncoder)):
        torch.manual_seed(seed)
        folder = root / cls.__name__
        cls(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders.append(folder)
    return corpus, folders[0], folders[1]


def _direct(folder: Path, cls_name: str, first: list[str], second: list[str] | None) -> np.ndarray:
    """What a DPR tower gives for these inputs, computed here with transformers alone."""
    import torch
    import transformers

    model = getattr(transformers, cls_name).from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer(first, second, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        vectors = model(**inputs).pooler_output
    return torch.nn.functional.normalize(vectors, dim=1).numpy()


def test_two_towers_encode_questions_and_passages_separately(dpr_towers, isolated_cache) -> None:
    corpus_path, question_tower, context_tower = dpr_towers
    corpus = load_corpus(corpus_path)
    wiki = DenseRetriever(
        corpus_path=str(corpus_path), query_encoder=str(question_tower), passage_encoder=str(context_tower), depth=8
    )
    assert wiki.two_towers and wiki.index_encoder == str(context_tower)
    # Passages through the context tower as (title, text) pairs; questions through the question tower.
    passages = _direct(context_tower, "DPRContextEncoder", [p.title for p in corpus], [p.text for p in corpus])
    np.testing.assert_allclose(wiki.index.reconstruct_n(0, len(corpus)), passages, atol=1e-5)
    queries = _direct(question_tower, "DPRQuestionEncoder", QUESTIONS, None)
    np.testing.assert_allclose(wiki.encode_queries(QUESTIONS), queries, atol=1e-5)
    for documents, expected in zip(wiki.batch(QUESTIONS), _numpy_search(queries, passages, 8), strict=True):
        _assert_same(documents, expected, [p.id for p in corpus])

    (folder,) = (isolated_cache / "indexes").glob("dense-*")
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["encoder"] == str(context_tower) and meta["pooling"] == "auto"

    # The towers matter: swapped, the passages get other vectors and another index.
    swapped = DenseRetriever(
        corpus_path=str(corpus_path), query_encoder=str(context_tower), passage_encoder=str(question_tower), depth=8
    )
    assert len(list((isolated_cache / "indexes").glob("dense-*"))) == 2
    assert not np.allclose(swapped.index.reconstruct(0), wiki.index.reconstruct(0))


def test_two_towers_from_a_config_and_pairs_only(dpr_towers, isolated_cache) -> None:
    corpus_path, question_tower, context_tower = dpr_towers
    params = {"query_encoder": str(question_tower), "passage_encoder": str(context_tower), "normalize": False}
    pool = SourcePool(BuildContext(corpus_path=str(corpus_path), depth=3), {"Wiki": ("dense", params)})
    documents = pool.build("Wiki@2").invoke(QUESTIONS[0])
    assert len(documents) == 2 and documents[0].metadata["score"] >= documents[1].metadata["score"]
    (folder,) = (isolated_cache / "indexes").glob("dense-*")
    assert folder.name.endswith("-raw") and json.loads((folder / "meta.json").read_text())["normalize"] is False
    with pytest.raises(ConfigError, match="set both query_encoder and passage_encoder"):
        DenseRetriever(corpus_path=str(corpus_path), query_encoder=str(question_tower))
