"""`eor retrieve` on the demo corpus: text and JSON Lines, a question file, and members it refuses."""

from __future__ import annotations

import json

import pytest

from eor.cli import main
from retrievers.bm25 import BM25Retriever
from tests.conftest import write_jsonl


def test_one_question_as_text_names_ids_scores_and_sources(demo_corpus, isolated_cache, capsys) -> None:
    assert main(["retrieve", "who wrote the declaration of independence", "--members", "BM25@5,BM25#2", "-k", "3"]) == 0
    out, err = capsys.readouterr()
    expected = BM25Retriever(corpus_path=str(demo_corpus), depth=5).invoke("who wrote the declaration of independence")
    blocks = out.strip().split("\n\n")
    assert blocks[0].startswith("BM25@5: who wrote the declaration of independence  (3 passages, ")
    for line, doc in zip(blocks[0].splitlines()[1:], expected[:3], strict=True):
        assert f"{doc.metadata['id']}  {doc.metadata['score']:.4f}  [BM25]  {doc.metadata['title']}: " in line
    assert blocks[1].startswith("BM25#2: who wrote the declaration of independence  (1 passage, ")
    assert expected[1].metadata["id"] in blocks[1]
    assert "BM25@5: 1 question(s), p50 " in err and "BM25#2: 1 question(s)" in err


def test_a_question_file_as_json_lines(demo_corpus, isolated_cache, tmp_path, capsys) -> None:
    questions = write_jsonl(
        tmp_path / "q.jsonl",
        [{"id": "a", "question": "who wrote hamlet"}, {"id": "b", "question": "capital of france"}],
    )
    assert main(["retrieve", "--questions", str(questions), "--members", "BM25@4", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["id"], line["member"]) for line in lines] == [("a", "BM25@4"), ("b", "BM25@4")]
    bm25 = BM25Retriever(corpus_path=str(demo_corpus), depth=4)
    for line, question in zip(lines, ("who wrote hamlet", "capital of france"), strict=True):
        expected = bm25.invoke(question)
        assert line["question"] == question and line["seconds"] > 0
        assert [(p["rank"], p["id"], p["score"], p["source"], p["text"]) for p in line["passages"]] == [
            (rank, d.metadata["id"], d.metadata["score"], "BM25", d.page_content)
            for rank, d in enumerate(expected, start=1)
        ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["retrieve", "q", "--members", "PK"], "member PK: source PK needs the reader"),
        (["retrieve", "q", "--members", "BM25@1@CP"], "member BM25@1@CP: @CP needs the reader"),
        (["retrieve"], "give a question or --questions FILE"),
        (["retrieve", "q", "--questions", "f.jsonl"], "give a question or --questions FILE"),
        (["retrieve", "q", "--members", "Nope@1"], "unknown source(s) Nope; available: BM25, PK, ReFree, Wiki"),
    ],
)
def test_what_it_refuses_it_names(argv, message, isolated_cache, capsys) -> None:
    assert main(argv) == 1
    assert message in capsys.readouterr().err
