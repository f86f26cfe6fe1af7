"""Public QA files into eor's formats: questions (`eor import-questions`) and passages (`eor import-corpus`).

Questions, one per line, in any of the forms the paper's datasets are distributed in:

- JSON Lines with `question` and `answer` or `answers` (NQ-open: `{"question": ..., "answer": [...]}`),
  and optionally `id`;
- tab-separated `question<TAB>answers`, answers as a JSON or Python list (the DPR open-domain versions of
  NQ, TriviaQA and WebQuestions: `who wrote hamlet<TAB>['William Shakespeare']`).

They become eor's question records `{"id", "question", "answers"}`; ids are kept, or made from the file's
name and the line number. Passages: a tab-separated file with a header naming `id`, `text` and `title` (DPR's
`psgs_w100.tsv`) becomes a corpus of `{"id", "title", "text"}` lines. A malformed line is reported with its
number; nothing is written unless every line reads.
"""

from __future__ import annotations

import ast
import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from eor.core.atomic import write_text_atomically
from eor.core.errors import InputError


def read_questions(path: Path, limit: int | None = None) -> list[dict]:
    """Question records of a JSON Lines or tab-separated QA file (see the module's text)."""
    records = []
    for number, line in _lines(path):
        parse = _json_question if line.lstrip().startswith("{") else _tsv_question
        record = parse(line, path, number)
        records.append({"id": record.pop("id", f"{path.stem}-{number:06d}"), **record})
        if limit is not None and len(records) >= limit:
            break
    if not records:
        raise InputError(f"{path}: no questions")
    return records


def read_passages(path: Path, limit: int | None = None) -> list[dict]:
    """Corpus records of a tab-separated passage file with an `id`, `text`, `title` header."""
    csv.field_size_limit(sys.maxsize)
    with _open(path) as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        header = next(reader, None)
        if header is None or not {"id", "text", "title"} <= set(header):
            raise InputError(f"{path}: the first line must name the columns id, text and title (tab-separated)")
        columns = {name: header.index(name) for name in ("id", "text", "title")}
        passages = []
        for number, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise InputError(f"{path}:{number}: {len(row)} columns, the header has {len(header)}")
            passages.append({name: row[columns[name]] for name in ("id", "title", "text")})
            if limit is not None and len(passages) >= limit:
                break
    if not passages:
        raise InputError(f"{path}: no passages")
    return passages


def is_passage_file(path: Path) -> bool:
    """Whether a file is a tab-separated passage file: a `.tsv` (`.tsv.gz`), or one whose first line names the
    columns id, text and title; any other file is a document."""
    if path.name.lower().endswith((".tsv", ".tsv.gz")):
        return True
    try:
        with _open(path) as handle:
            first = handle.readline(1 << 16)
    except (OSError, UnicodeDecodeError, EOFError):  # not text (a PDF, an image): a document, if anything
        return False
    return {"id", "text", "title"} <= {column.strip() for column in first.split("\t")}


def write_jsonl(records: list[dict], out: Path) -> None:
    """Write JSON Lines atomically (all or nothing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))


def _json_question(line: str, path: Path, number: int) -> dict:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
    answers = data.get("answers", data.get("answer"))
    record = {"question": _text(data.get("question"), path, number), "answers": _answers(answers, path, number)}
    if data.get("id") is not None:
        record["id"] = str(data["id"])
    return record


def _tsv_question(line: str, path: Path, number: int) -> dict:
    question, separator, answers = line.rstrip("\n").partition("\t")
    if not separator:
        raise InputError(f"{path}:{number}: expected a JSON object or question<TAB>answers")
    text = answers.strip()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise InputError(f"{path}:{number}: the answers are not a list: {text[:60]!r}") from None
    return {"question": _text(question, path, number), "answers": _answers(parsed, path, number)}


def _text(value: object, path: Path, number: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}:{number}: no question text")
    return value.strip()


def _answers(value: object, path: Path, number: int) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(a, str) and a.strip() for a in value):
        raise InputError(f"{path}:{number}: answers must be a non-empty list of strings")
    return [answer.strip() for answer in value]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


def _open(path: Path):
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    if path.suffix == ".gz":
        import gzip

        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")
