"""Run records: one JSON object per question per line (`records.jsonl`), appended as questions finish; in
Python each line is an `eor.results.Record` (with a `MemberOutput` per member).

Format (stable; everything downstream reads it):
    {"id", "question", "answers": [gold strings],
     "members": {NAME: {"answer", "passages": [{"id", "title", "text", "score"[, "url"]}], "prompt", "seconds",
                        "document_cut": {"kept_words", "words"}  # only when the prompt was over the context}},
     "vote": {"member", "answer", "scores": {NAME: score}},   # the ensemble's choice when the run voted
     ...fields of the question file carried unchanged}

A run folder holds `records.jsonl`, or `records.jsonl.gz` when its records are kept compressed (as the
repository keeps the runs behind its reported figures); readers take the folder or either file. A packed
records file (`eor records pack`) starts with one header line, `{"eor_records": {"version", "pool", "config",
"questions"[, "made_by"]}}`: the pool's identity (eor.pool: members, reader identity with the model's digest,
corpus), the resolved config the records were made with, and the software of each stretch of `eor run` that
wrote them (`made_by.json` of the run folder: `note_stretch`); readers skip it (`read_header` returns it).
`unpack_records` turns a packed file back into a run folder (records, config.json, pool.json) that `eor run`
resumes or grows by new members (eor.runner).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eor.atomic import atomic_file, write_text_atomically
from eor.errors import DiskFullError, InputError, is_disk_full
from eor.faults import failpoint
from eor.results import Record

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


def _without_machine_paths(config: dict[str, Any]) -> dict[str, Any]:
    """The run's resolved config with file names in place of this machine's absolute paths."""
    clean = json.loads(json.dumps(config))
    corpus = clean.get("corpus")
    if isinstance(corpus, dict) and corpus.get("path"):
        corpus["path"] = Path(corpus["path"]).name
    for holder, key in ((clean, "weights"), (clean.get("voter") or {}, "weights")):
        if holder.get(key):
            holder[key] = Path(holder[key]).name
    return clean


MADE_BY_FILE = "made_by.json"


def software() -> dict[str, Any]:
    """This eor: its version, and the git commit of its source when it runs from a checkout ("+changes" when
    tracked files differ from it; None outside a checkout)."""
    from importlib import metadata

    try:
        version = metadata.version("eor")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"eor": version, "commit": _commit(Path(__file__).resolve().parent.parent)}


def _commit(root: Path) -> str | None:
    import subprocess

    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        changes = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode:
        return None
    return head.stdout.strip() + ("+changes" if changes.stdout.strip() else "")


def note_stretch(run: str | Path, questions_done: int) -> None:
    """Add this stretch of `eor run` (when, the software, the questions already recorded) to the run folder's
    `made_by.json`, a list that `pack_records` puts in the header."""
    import datetime

    path = Path(run) / MADE_BY_FILE
    stretches = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    stretches.append({"started": started, **software(), "questions_done": questions_done})
    write_text_atomically(path, json.dumps(stretches, indent=2) + "\n")


def pack_records(run: str | Path, out: str | Path) -> int:
    """Write a run folder's records as one gzip file (level 9, no timestamp: the same records give the same
    bytes) headed by the pool's identity and the run's config; returns the number of records."""
    folder = Path(run)
    config, pool = folder / "config.json", folder / "pool.json"
    if not config.is_file() or not pool.is_file():
        raise InputError(f"{folder} is not a run folder of `eor run` (it needs config.json and pool.json)")
    records = read_records(folder)
    header = {
        "version": HEADER_VERSION,
        "pool": json.loads(pool.read_text(encoding="utf-8")),
        "config": _without_machine_paths(json.loads(config.read_text(encoding="utf-8"))),
        "questions": len(records),
    }
    made_by = folder / MADE_BY_FILE
    if made_by.is_file():
        header["made_by"] = json.loads(made_by.read_text(encoding="utf-8"))
    lines = [json.dumps({HEADER_KEY: header}, ensure_ascii=False)]
    lines += [json.dumps(record.to_dict(), ensure_ascii=False) for record in records]
    with atomic_file(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as handle:
        handle.write(("\n".join(lines) + "\n").encode("utf-8"))
    return len(records)


def unpack_records(packed: str | Path, out: str | Path) -> int:
    """A packed records file (`pack_records`) back into a run folder: `records.jsonl` (its lines as they are),
    and the header's config, pool and stretches as `config.json`, `pool.json` and `made_by.json`, so that
    `eor run` can resume or grow the records and checks what they were made with. Refuses a folder that
    already holds records."""
    file = records_file(packed)
    header = read_header(file)
    if header is None or not isinstance(header.get("config"), dict) or not isinstance(header.get("pool"), dict):
        raise InputError(f"{file} has no header with the config and pool of its records (see `eor records pack`)")
    folder = Path(out)
    if records_file_or_none(folder) is not None:
        raise InputError(f"{folder} already holds records; unpack into a new folder")
    lines = [line for line in _lines(file)[1:] if line.strip()]
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomically(folder / "config.json", json.dumps({**header["config"], "weights": None}, indent=2))
    write_text_atomically(folder / "pool.json", json.dumps(header["pool"], indent=2) + "\n")
    if isinstance(header.get("made_by"), list):
        write_text_atomically(folder / MADE_BY_FILE, json.dumps(header["made_by"], indent=2) + "\n")
    write_text_atomically(folder / RECORDS_FILE, "".join(line + "\n" for line in lines))
    return len(lines)


class RecordWriter:
    """Appends records to `records.jsonl`, flushed and synced per batch, so an interruption loses at
    most the batch in flight. A torn last line left by an earlier interruption is cut off first."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / RECORDS_FILE
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
    """Rewrite a run's `records.jsonl` with `records`, atomically (eor.atomic)."""
    lines = "".join(json.dumps(record.to_dict(), ensure_ascii=False) + "\n" for record in records)
    write_text_atomically(Path(folder) / RECORDS_FILE, lines)
