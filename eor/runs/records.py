"""Run records: one JSON object per question per line (`records.jsonl`), appended as questions finish; in
Python each line is an `eor.core.results.Record` (with a `MemberOutput` per member).

Format (stable; everything downstream reads it):
    {"id", "question", "answers": [gold strings],
     "members": {NAME: {"answer", "passages": [{"id", "title", "text", "score"[, "url"]}], "prompt", "seconds",
                        "document_cut": {"kept_words", "words"}  # only when the prompt was over the context}},
     "vote": {"member", "answer", "scores": {NAME: score}},   # the ensemble's choice when the run voted
     ...fields of the question file carried unchanged}

A run folder (eor.runs.run_folder: the files beside the records) holds `records.jsonl`, or `records.jsonl.gz` when
its records are kept compressed (as the repository keeps the runs behind its reported figures); readers take
the folder or either file. A packed records file (`eor records pack`) starts with one header line,
`{"eor_records": {"version", "pool", "config", "questions"[, "made_by"]}}`: the pool's identity (eor.pipeline.pool:
members, reader identity with the model's digest, corpus), the resolved config the records were made with,
and the software of each stretch of `eor run` that wrote them (the run folder's `made_by.json`); readers skip
it (`read_header` returns it, `packed_lines` the lines after it). eor.runs.run_folder packs a run folder into one
such file and unpacks one back into a run folder that `eor run` resumes or grows by new members.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eor.core.atomic import write_text_atomically
from eor.core.errors import DiskFullError, InputError, is_disk_full
from eor.core.faults import failpoint
from eor.core.results import Record

RECORDS_FILE = "records.jsonl"
COMPRESSED_RECORDS_FILE = RECORDS_FILE + ".gz"
HEADER_KEY = "eor_records"
HEADER_VERSION = 1


def records_file(path: str | Path) -> Path:
    """The records file of a run folder (`records.jsonl`, else `records.jsonl.gz`), or `path` itself."""
    file = Path(path)
    if file.is_dir():
        plain = file / RECORDS_FILE
        compressed = file / COMPRESSED_RECORDS_FILE
        file = compressed if compressed.is_file() and not plain.is_file() else plain
    if not file.is_file():
        raise InputError(f"records file not found: {file}")
    return file


def records_file_or_none(folder: str | Path) -> Path | None:
    """The records file of a run folder, or None when it has none yet."""
    try:
        return records_file(folder)
    except InputError:
        return None


def read_records(path: str | Path) -> list[Record]:
    """All complete records of a run folder or records file; a torn last line (an interrupted write)
    is ignored, any other malformed line is an error that names it."""
    return list(iter_records(path))


def iter_records(path: str | Path) -> Iterator[Record]:
    file = records_file(path)
    lines = _lines(file)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # the last line lacks its newline: a write was interrupted
                return
            raise InputError(f"{file}:{number}: not valid JSON ({exc.msg})") from None
        if number == 1 and isinstance(record, dict) and HEADER_KEY in record:
            continue  # a packed file's header
        yield Record.from_dict(record, f"{file}:{number}")


def read_header(path: str | Path) -> dict[str, Any] | None:
    """The header of a packed records file (see the module's text), or None."""
    lines = _lines(records_file(path))
    try:
        first = json.loads(lines[0]) if lines and lines[0].strip() else None
    except json.JSONDecodeError:
        return None
    return first[HEADER_KEY] if isinstance(first, dict) and isinstance(first.get(HEADER_KEY), dict) else None


def _lines(file: Path) -> list[str]:
    try:
        if file.name.endswith(".gz"):
            with gzip.open(file, "rt", encoding="utf-8") as handle:
                return handle.read().split("\n")
        return file.read_text(encoding="utf-8").split("\n")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"{file}: cannot read records ({exc})") from None


def packed_lines(file: str | Path) -> list[str]:
    """The record lines of a records file as they are, a packed file's header left out."""
    lines = _lines(Path(file))
    header = read_header(file) is not None
    return [line for line in lines[1 if header else 0 :] if line.strip()]


class RecordWriter:
    """Appends records to `records.jsonl`, flushed and synced per batch, so an interruption loses at
    most the batch in flight. A torn last line left by an earlier interruption is cut off first."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / RECORDS_FILE
        packed = Path(folder) / COMPRESSED_RECORDS_FILE
        if packed.is_file() and not self.path.exists():  # its questions would all be answered again, beside it
            raise InputError(
                f"{folder} holds compressed records ({COMPRESSED_RECORDS_FILE}); to resume or grow them, unpack them "
                f"into a run folder first: eor records unpack {packed} --out DIR"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.repaired_bytes = 0  # the torn last line cut off, if there was one
        self._repair()
        self.done_ids = {record.id for record in iter_records(self.path)} if self.path.exists() else set()
        self._handle = self.path.open("a", encoding="utf-8")

    def _repair(self) -> None:
        """Cut a torn last line off in place (a truncation: it needs no space on a full disk)."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            kept = data.rfind(b"\n") + 1
            os.truncate(self.path, kept)
            self.repaired_bytes = len(data) - kept

    def write(self, records: list[Record]) -> None:
        """Append `records`; a full disk raises DiskFullError naming the file, and the records written before
        stay whole (a torn last line is cut off when the run resumes)."""
        try:
            for record in records:
                line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
                self._handle.write(line[: len(line) // 2])
                failpoint("record-write", before=self._handle.flush)  # tests: die with half a line on disk
                self._handle.write(line[len(line) // 2 :])
                self.done_ids.add(record.id)
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            raise DiskFullError(
                f"no space left on the device writing {self.path}: the records written before are kept; free "
                "space and run the same command to resume"
            ) from None

    def close(self) -> None:
        try:
            self._handle.close()
        except OSError as exc:  # what a full disk kept in the buffer is lost; the lines before it are whole
            if not is_disk_full(exc):
                raise

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replace_records(folder: str | Path, records: list[Record]) -> None:
    """Rewrite a run's `records.jsonl` with `records`, atomically (eor.core.atomic)."""
    lines = "".join(json.dumps(record.to_dict(), ensure_ascii=False) + "\n" for record in records)
    write_text_atomically(Path(folder) / RECORDS_FILE, lines)
