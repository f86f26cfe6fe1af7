"""Sanity checks for the hand-written demo data set in eor/demo/ (corpus.jsonl and questions.jsonl)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eor.core.answers import normalize_answer

DEMO_DIR = Path(__file__).parent.parent / "eor" / "demo"
CORPUS_PATH = DEMO_DIR / "corpus.jsonl"
QUESTIONS_PATH = DEMO_DIR / "questions.jsonl"

MIN_PASSAGES = 150
MIN_QUESTIONS = 30
MIN_WORDS = 40
MAX_WORDS = 110
MAX_ANSWER_WORDS = 4


def _read_jsonl(path: Path) -> list[dict]:
    records = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:  # pragma: no cover - reported as a failure
                pytest.fail(f"{path.name}:{line_no} is not valid JSON: {exc}")
            assert isinstance(record, dict), f"{path.name}:{line_no} is not a JSON object"
            records.append(record)
    return records


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return _read_jsonl(CORPUS_PATH)


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    return _read_jsonl(QUESTIONS_PATH)


@pytest.fixture(scope="module")
def passages_by_id(corpus: list[dict]) -> dict[str, dict]:
    return {p["id"]: p for p in corpus}


def test_files_exist() -> None:
    assert CORPUS_PATH.is_file()
    assert QUESTIONS_PATH.is_file()


def test_corpus_schema(corpus: list[dict]) -> None:
    for passage in corpus:
        assert set(passage) == {"id", "title", "text"}, passage
        assert re.fullmatch(r"demo-\d{3}", passage["id"]), passage["id"]
        assert isinstance(passage["title"], str) and passage["title"].strip()
        assert isinstance(passage["text"], str) and passage["text"].strip()


def test_corpus_size(corpus: list[dict]) -> None:
    assert len(corpus) >= MIN_PASSAGES


def test_corpus_ids_unique(corpus: list[dict]) -> None:
    ids = [p["id"] for p in corpus]
    assert len(ids) == len(set(ids))


def test_corpus_text_lengths(corpus: list[dict]) -> None:
    bad = {p["id"]: len(p["text"].split()) for p in corpus if not MIN_WORDS <= len(p["text"].split()) <= MAX_WORDS}
    assert not bad, f"passages outside {MIN_WORDS}-{MAX_WORDS} words: {bad}"


def test_corpus_texts_distinct(corpus: list[dict]) -> None:
    texts = [normalize_answer(p["text"]) for p in corpus]
    assert len(texts) == len(set(texts))


def test_questions_schema(questions: list[dict]) -> None:
    for q in questions:
        assert set(q) == {"id", "question", "answers", "gold_passages"}, q
        assert re.fullmatch(r"demo-q\d{2,}", q["id"]), q["id"]
        assert isinstance(q["question"], str) and q["question"].strip()
        assert q["question"] == q["question"].lower(), q["question"]


def test_questions_size(questions: list[dict]) -> None:
    assert len(questions) >= MIN_QUESTIONS


def test_question_ids_unique(questions: list[dict]) -> None:
    ids = [q["id"] for q in questions]
    assert len(ids) == len(set(ids))


def test_question_texts_unique(questions: list[dict]) -> None:
    texts = [q["question"] for q in questions]
    assert len(texts) == len(set(texts))


def test_answers_non_empty_and_short(questions: list[dict]) -> None:
    for q in questions:
        answers = q["answers"]
        assert isinstance(answers, list) and answers, q["id"]
        for answer in answers:
            assert isinstance(answer, str) and normalize_answer(answer), (q["id"], answer)
            assert len(answer.split()) <= MAX_ANSWER_WORDS, (q["id"], answer)


def test_canonical_question_present(questions: list[dict]) -> None:
    by_text = {q["question"]: q for q in questions}
    q = by_text.get("who was the first president of the united states")
    assert q is not None
    assert "George Washington" in q["answers"]


def test_gold_passages_exist(questions: list[dict], passages_by_id: dict[str, dict]) -> None:
    for q in questions:
        gold = q["gold_passages"]
        assert isinstance(gold, list) and gold, q["id"]
        missing = [pid for pid in gold if pid not in passages_by_id]
        assert not missing, (q["id"], missing)


def test_gold_passages_contain_an_answer(questions: list[dict], passages_by_id: dict[str, dict]) -> None:
    for q in questions:
        answers = [normalize_answer(a) for a in q["answers"]]
        for pid in q["gold_passages"]:
            body = f" {normalize_answer(passages_by_id[pid]['text'])} "
            assert any(f" {a} " in body for a in answers), (q["id"], pid, q["answers"])
