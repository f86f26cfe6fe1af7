"""`eor init`, `eor import-questions` and `eor import-corpus`: files a user brings, into eor's formats."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from eor.cli import main
from eor.core.config import load_config
from eor.core.data import load_questions
from retrievers.corpus import load_corpus


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_init_writes_a_config_over_its_own_corpus_and_keeps_what_exists(tmp_path, capsys) -> None:
    folder = tmp_path / "mine"
    assert main(["init", str(folder)]) == 0
    assert "eor ask" in capsys.readouterr().out
    config = load_config(folder / "config.yaml")
    assert config.name == "mine" and config.resolve_path(config.corpus.path) == (folder / "corpus.jsonl").resolve()
    assert len(load_corpus(folder / "corpus.jsonl")) == 202 and len(load_questions(folder / "questions.jsonl")) == 49
    (folder / "corpus.jsonl").write_text('{"id": "a", "title": "A", "text": "mine"}\n')
    assert main(["init", str(folder)]) == 1
    assert "config.yaml exists; --force" in capsys.readouterr().err
    assert main(["init", str(folder), "--force"]) == 0
    assert len(load_corpus(folder / "corpus.jsonl")) == 1  # the user's corpus is never replaced


@pytest.mark.parametrize("name", ["2024-06-01", "123", "yes", "null", "a: b", "notes #2"])
def test_init_names_a_config_after_any_folder(tmp_path, name) -> None:
    """A folder named like a date, a number, a boolean or null to YAML, or holding `: ` or ` #`: the config says
    its name as a string, and loads."""
    assert main(["init", str(tmp_path / name)]) == 0
    assert load_config(tmp_path / name / "config.yaml").name == name


def test_nq_open_json_lines_and_dpr_tab_separated_questions(tmp_path) -> None:
    nq = tmp_path / "NQ-open.dev.jsonl"
    nq.write_text('{"question": "when was x", "answer": ["1901", "in 1901"]}\n\n{"question": "who", "answer": "Ann"}\n')
    dpr = tmp_path / "trivia-test.qa.csv.gz"
    with gzip.open(dpr, "wt", encoding="utf-8") as handle:
        handle.write('who wrote hamlet\t[\'William Shakespeare\', "Shakespeare\'s"]\nwhat is 2+2\t["4"]\n')
    assert main(["import-questions", str(nq), "--out", str(tmp_path / "nq.jsonl")]) == 0
    assert main(["import-questions", str(dpr), "--out", str(tmp_path / "tq.jsonl"), "--limit", "1"]) == 0
    assert lines(tmp_path / "nq.jsonl") == [
        {"id": "NQ-open.dev-000001", "question": "when was x", "answers": ["1901", "in 1901"]},
        {"id": "NQ-open.dev-000003", "question": "who", "answers": ["Ann"]},
    ]
    assert lines(tmp_path / "tq.jsonl") == [
        {
            "id": "trivia-test.qa.csv-000001",
            "question": "who wrote hamlet",
            "answers": ["William Shakespeare", "Shakespeare's"],
        }
    ]
    assert [q.answers for q in load_questions(tmp_path / "tq.jsonl")] == [["William Shakespeare", "Shakespeare's"]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"question": "q", "answer": []}\n', ":1: answers must be a non-empty list of strings"),
        ('{"question": "q", "answer": ["a"]}\n{"question": \n', ":2: invalid JSON"),
        ("just a question\n", ":1: expected a JSON object or question<TAB>answers"),
        ("q\tnot a list\n", ":1: the answers are not a list"),
        ('\t["a"]\n', ":1: no question text"),
    ],
)
def test_a_bad_question_line_is_named_and_nothing_is_written(tmp_path, capsys, text, message) -> None:
    source, out = tmp_path / "q.txt", tmp_path / "out.jsonl"
    source.write_text(text)
    assert main(["import-questions", str(source), "--out", str(out)]) == 1
    assert message in capsys.readouterr().err and not out.exists()


def test_dpr_passages_with_quoted_text_become_a_corpus(tmp_path, capsys) -> None:
    tsv = tmp_path / "psgs_w100.tsv"
    tsv.write_text('id\ttext\ttitle\n1\t"Aaron is a ""prophet"", says\tthe text"\tAaron\n2\tplain\tB\n3\tx\tC\n')
    assert main(["import-corpus", str(tsv), "--out", str(tmp_path / "wiki.jsonl"), "--limit", "2"]) == 0
    corpus = load_corpus(tmp_path / "wiki.jsonl")
    assert [(p.id, p.title) for p in corpus] == [("1", "Aaron"), ("2", "B")]
    assert corpus[0].text == 'Aaron is a "prophet", says\tthe text'
    (tmp_path / "bad.tsv").write_text("id\ttext\n1\tx\n")
    assert main(["import-corpus", str(tmp_path / "bad.tsv"), "--out", str(tmp_path / "bad.jsonl")]) == 1
    assert "must name the columns id, text and title" in capsys.readouterr().err
