"""The corpus read from disk: each passage equals its file line, ids are checked without holding them, the
hash is computed once per file version, and a damaged offsets index is rebuilt with one warning."""

from __future__ import annotations

import json
import logging
import os

import pytest

from eor.core.cache_policy import KeyedMemo
from eor.core.errors import InputError
from retrievers import corpus as corpus_module
from retrievers.corpus import load_corpus
from tests.conftest import SHARED_DATA

NQ_CORPUS = SHARED_DATA / "corpus" / "wiki-nq.jsonl"


@pytest.fixture(autouse=True)
def _fresh(isolated_cache, monkeypatch):
    monkeypatch.setattr(corpus_module, "_OPENED", KeyedMemo())
    monkeypatch.setattr("eor.core.models._DIGESTS", KeyedMemo())


def test_every_passage_read_from_disk_equals_its_line_of_the_file() -> None:
    corpus = load_corpus(NQ_CORPUS)
    lines = [json.loads(line) for line in NQ_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(corpus) == len(lines) == 3600
    expected = [(str(line["id"]), line.get("title") or "", line["text"]) for line in lines]
    assert [tuple(passage) for passage in corpus] == [(*row, None) for row in expected]  # streamed, in shards
    for row in (0, 1, 1799, 3599):
        assert tuple(corpus[row]) == (*expected[row], None)  # one pread each; no file or page cited
    assert [(p.id, p.title, p.text) for p in corpus.rows(3590, 4000)] == expected[3590:]
    wanted = [expected[3599][0], "no such id", expected[5][0]]  # by id: in corpus order, a missing id absent
    assert {pid: tuple(p)[:3] for pid, p in corpus.by_ids(wanted).items()} == {
        expected[5][0]: expected[5],
        expected[3599][0]: expected[3599],
    }
    assert list(corpus.by_ids(wanted)) == [expected[5][0], expected[3599][0]] and corpus.by_ids([]) == {}
    with pytest.raises(IndexError, match="3600 passages"):
        corpus[3600]


def test_blank_lines_missing_ids_and_unicode_line_separators(tmp_path) -> None:
    rows = ['{"text": "first"}', "", "   ", '{"id": 7, "title": null, "text": "a\u2028b"}', "", '{"text": "x"}']
    file = tmp_path / "c.jsonl"
    file.write_text("\n".join(rows) + "\n", encoding="utf-8")
    corpus = load_corpus(file)  # a passage without an id is named by its line, blank lines counted
    assert [(p.id, p.title, p.text) for p in corpus] == [("1", "", "first"), ("7", "", "a\u2028b"), ("6", "", "x")]
    assert corpus[2].id == "6" and corpus.rows(1, 3)[1].id == "6"
    clash = tmp_path / "d.jsonl"
    clash.write_text('{"id": "3", "text": "a"}\n\n{"text": "b"}\n')
    with pytest.raises(InputError, match=r"d.jsonl:3: duplicate passage id '3'"):
        load_corpus(clash)


def test_a_corpus_replaced_on_disk_is_read_anew(tmp_path) -> None:
    file = tmp_path / "c.jsonl"
    file.write_text('{"id": "a", "text": "old"}\n')
    assert load_corpus(file)[0].text == "old"
    replacement = tmp_path / "new.jsonl"
    replacement.write_text('{"id": "a", "text": "new text"}\n{"id": "b", "text": "more"}\n')
    replacement.replace(file)  # a new inode at the same path, as an atomic write leaves it
    assert [p.text for p in load_corpus(file)] == ["new text", "more"]


def test_a_duplicate_id_is_named_by_its_line_and_a_digest_collision_is_not_a_duplicate(tmp_path, monkeypatch) -> None:
    file = tmp_path / "c.jsonl"
    file.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n\n{"id": "a", "text": "z"}\n')
    with pytest.raises(InputError, match=r"c.jsonl:4: duplicate passage id 'a'"):
        load_corpus(file)
    monkeypatch.setattr(corpus_module, "_id_digest", lambda pid: b"\0" * 8)  # every id collides
    other = tmp_path / "d.jsonl"
    other.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n')
    assert [p.id for p in load_corpus(other)] == ["a", "b"]


def test_the_hash_is_computed_once_per_file_version(tmp_path, monkeypatch) -> None:
    file = tmp_path / "c.jsonl"
    file.write_text('{"id": "a", "text": "x"}\n')
    first = load_corpus(file).sha256
    monkeypatch.setattr(corpus_module, "_OPENED", KeyedMemo())
    monkeypatch.setattr("eor.core.models._DIGESTS", KeyedMemo())

    def refuse(path):
        raise AssertionError("hashed again")

    monkeypatch.setattr("eor.core.models.sha256_of", refuse)
    assert load_corpus(file).sha256 == first  # a fresh process reads the stamp
    file.write_text('{"id": "a", "text": "changed"}\n')
    os.utime(file, ns=(1, 1))
    with pytest.raises(AssertionError, match="hashed again"):
        load_corpus(file)


def test_a_truncated_offsets_index_is_rebuilt_with_one_warning(tmp_path, monkeypatch, caplog) -> None:
    file = tmp_path / "c.jsonl"
    file.write_text("".join(json.dumps({"id": str(i), "text": f"passage {i}"}) + "\n" for i in range(50)))
    expected = [tuple(p) for p in load_corpus(file)]
    folder = next((tmp_path / "cache" / "indexes").glob("corpus-*"))
    offsets = folder / "offsets.npy"
    offsets.write_bytes(offsets.read_bytes()[:100])
    monkeypatch.setattr(corpus_module, "_OPENED", KeyedMemo())
    with caplog.at_level(logging.WARNING):
        again = load_corpus(file)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "is damaged: offsets.npy has 100 bytes" in warnings[0] and "rebuilding" in warnings[0]
    assert [tuple(p) for p in again] == expected
