"""A run folder: what `eor run` writes into its `--out`, and what every command that reads a run finds there.

    records.jsonl    the records, one question per line (eor.runs.records: the format, the writer that appends
                     and syncs each batch, the readers); `records.jsonl.gz` when they are kept compressed.
                     `eor run` appends them, and rewrites them whole when they grow by new members or
                     `--retry-failed` merges what failed members answer now; `eor records unpack` writes them.
    config.json      the run's resolved config (eor.core.config's schema) and "weights": the weights file of the
                     recorded vote, or null. `eor run` writes it before the first question (again when the
                     records grow by new members) and refuses a folder that holds another config's run;
                     `eor records unpack` writes it from the packed header. `eor train` and `eor bench` read
                     the reader, corpus and name in it. `eor erag` and `eor utility` write theirs the same way.
    pool.json        the pool's identity (eor.pipeline.pool: members, the reader's identity with its model's digest, the
                     corpus file, size and sha256), as `eor run` built it (or `eor records unpack` restored it).
                     `eor train` records it in the weights file, `eor bench` reports it, and records grow only
                     by members whose identity matches.
    generation.json  what the reader did in the latest invocation of `eor run` that answered or grew anything
                     (eor.pipeline.stages.generation.GenerationStats: prompts generated and read back, prompt tokens
                     evaluated and reused, generated tokens, the seconds of each phase), with "questions" (how
                     many it answered), "wall_seconds" (what they took) and "grew": true when it grew records
                     (its figures then count some members only). `eor plan` reads it (eor.commands.plan_command).
    made_by.json     a list, one entry per stretch of `eor run` that answered questions: {"started" (UTC, ISO
                     8601), "eor" (version), "commit" (git commit, "+changes" when tracked files differed; null
                     outside a checkout), "questions_done" (recorded before it)}. `eor records pack` puts it in
                     the packed header, `eor records unpack` writes it back.
    unanswered.json  {question id: why}: the questions `eor run` left unrecorded because no member answered them
                     (eor.pipeline.stages.failures.LeftOut); each run tries them again, and drops those it records.
    .writer.lock     held while `eor run` writes the folder (`RunFolder.writing`): the pid of the process holding
                     it; a second `eor run` on the folder is refused at once instead of interleaving its records.

`RunFolder` is the one way to these files: the records through eor.runs.records, every JSON file whole through
eor.core.atomic (a new file, synced, renamed over the old: an interruption leaves the old file or the new one).
Reading one that is missing or not what its writer writes raises InputError naming the file and its writer.

A packed records file (eor.runs.records: a gzip file headed by the pool's identity, the config and the stretches)
holds a run folder in one file: `pack_records` writes one, `unpack_records` turns one back into a run folder
that `eor run` resumes or grows. `recorded_config` and `recorded_pool` read what a run was made with from
either.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import gzip
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from eor.core.atomic import atomic_file, write_text_atomically
from eor.core.errors import DiskFullError, EorError, InputError, is_disk_full
from eor.core.results import Record
from eor.runs.records import (
    HEADER_KEY,
    HEADER_VERSION,
    RECORDS_FILE,
    RecordWriter,
    iter_records,
    packed_lines,
    read_header,
    read_records,
    records_file,
    records_file_or_none,
    replace_records,
)

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
POOL_FILE = "pool.json"
GENERATION_FILE = "generation.json"
MADE_BY_FILE = "made_by.json"
UNANSWERED_FILE = "unanswered.json"
LOCK_FILE = ".writer.lock"

#: each JSON file of a run folder: what its content is (a JSON object or list) and what writes it
_FILES: dict[str, tuple[type, str]] = {
    CONFIG_FILE: (dict, "`eor run` (or `eor records unpack`)"),
    POOL_FILE: (dict, "`eor run` (or `eor records unpack`)"),
    GENERATION_FILE: (dict, "`eor run` (when it answers questions)"),
    MADE_BY_FILE: (list, "`eor run` (when it answers questions)"),
    UNANSWERED_FILE: (dict, "`eor run` (when no member answered a question)"),
}


@dataclass(frozen=True)
class RunFolder:
    """The files of one run folder (see the module's text); nothing is read or written until asked."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @classmethod
    def of(cls, records: str | Path) -> RunFolder:
        """The run folder of `records`: the folder itself, or the folder that holds a records file."""
        path = Path(records)
        return cls(path if path.is_dir() else path.parent)

    def file(self, name: str) -> Path:
        return self.path / name

    def has(self, name: str) -> bool:
        """Whether the folder holds the file `name` (CONFIG_FILE, POOL_FILE, ...)."""
        return self.file(name).is_file()

    # --- records (eor.runs.records) -------------------------------------------------------------------------

    def records_file(self) -> Path | None:
        """`records.jsonl` (else `records.jsonl.gz`), or None when the folder holds no records yet."""
        return records_file_or_none(self.path)

    def read_records(self) -> list[Record]:
        return read_records(self.path)

    def iter_records(self) -> Iterator[Record]:
        """The records, one at a time; none when the folder holds none yet."""
        return iter_records(self.path) if self.records_file() is not None else iter(())

    def record_writer(self) -> RecordWriter:
        """The writer that appends to `records.jsonl` (eor.runs.records.RecordWriter)."""
        return RecordWriter(self.path)

    def replace_records(self, records: list[Record]) -> None:
        replace_records(self.path, records)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Held while one command writes the folder (`eor run`, `eor records unpack`): another that asks while it
        is held is refused at once (InputError naming the holder's pid). An advisory lock (fcntl.flock) that the
        system drops when its process ends, however it ends: a crashed run leaves nothing to clean up. On a file
        system without such locks (some network ones) the folder is written unlocked, with a warning."""
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"{self.path} is a file: a run is written into a folder (`--out DIR`)")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            handle = open(self.file(LOCK_FILE), "a+", encoding="utf-8")  # noqa: SIM115 (held until the end)
        except OSError as exc:
            raise _unwritable(self.path, exc) from None
        with handle:
            _lock(handle, self.path)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- the JSON files (eor.core.atomic) ------------------------------------------------------------------

    def read_config(self) -> dict[str, Any]:
        return self._read(CONFIG_FILE)

    def write_config(self, config: dict[str, Any]) -> None:
        self._write(CONFIG_FILE, config)

    def read_pool(self) -> dict[str, Any]:
        return self._read(POOL_FILE)

    def write_pool(self, identity: dict[str, Any]) -> None:
        self._write(POOL_FILE, identity)

    def read_generation(self) -> dict[str, Any]:
        return self._read(GENERATION_FILE)

    def write_generation(self, stats: dict[str, Any]) -> None:
        self._write(GENERATION_FILE, stats)

    def read_made_by(self) -> list[dict[str, Any]]:
        """The stretches of `eor run` that wrote the records; none before the first."""
        return self._read(MADE_BY_FILE) if self.has(MADE_BY_FILE) else []

    def write_made_by(self, stretches: list[dict[str, Any]]) -> None:
        self._write(MADE_BY_FILE, stretches)

    def read_unanswered(self) -> dict[str, str]:
        """The questions an `eor run` left unrecorded (id -> why); none before the first."""
        return self._read(UNANSWERED_FILE) if self.has(UNANSWERED_FILE) else {}

    def write_unanswered(self, reasons: dict[str, str]) -> None:
        self._write(UNANSWERED_FILE, reasons)

    def note_stretch(self, questions_done: int) -> None:
        """Add this stretch of `eor run` (when, the software, the questions already recorded) to `made_by.json`."""
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.write_made_by([*self.read_made_by(), {"started": started, **software(), "questions_done": questions_done}])

    def _read(self, name: str) -> Any:
        kind, writer = _FILES[name]
        file = self.file(name)
        if not file.is_file():
            raise InputError(f"{file} not found: {writer} writes it; is {self.path} a run folder of `eor run`?")
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{file} cannot be read ({exc}): not the file {writer} writes") from None
        if not isinstance(data, kind):
            shape = "object" if kind is dict else "list"
            raise InputError(f"{file} is not a JSON {shape}: not the file {writer} writes")
        return data

    def _write(self, name: str, data: Any) -> None:
        write_text_atomically(self.file(name), json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _lock(handle: Any, folder: Path) -> None:
    """Take the folder's lock on `handle` (its file, opened for appending) and write this process's pid into it."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        raise InputError(
            f"{folder} is being written by another eor command (pid {holder}): wait for it to end, or stop it, before "
            "writing into the same folder again"
        ) from None
    except OSError as exc:  # ENOLCK, EOPNOTSUPP...: a file system without flock
        log.warning("%s cannot be locked (%s): written unlocked; run one eor run into it at a time", folder, exc)
        return
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
    except OSError as exc:
        raise _unwritable(folder, exc) from None


def _unwritable(folder: Path, exc: OSError) -> EorError:
    if is_disk_full(exc):
        return DiskFullError(f"no space left to write {folder} ({exc.strerror}); nothing was written")
    return InputError(f"{folder} cannot be written: {exc.strerror or exc}")


def recorded_config(records: str | Path) -> dict[str, Any] | None:
    """The config a run's records were made with: a packed records file's header, else the `config.json` of the
    run folder (of the records file); None when neither says (records from before eor kept it)."""
    return _recorded(records, "config", CONFIG_FILE)


def recorded_pool(records: str | Path) -> dict[str, Any] | None:
    """The pool identity of a run (eor.pipeline.pool): a packed records file's header, else the `pool.json` of the run
    folder (of the records file); None when neither says."""
    return _recorded(records, "pool", POOL_FILE)


def _recorded(records: str | Path, key: str, name: str) -> dict[str, Any] | None:
    path = Path(records)
    if path.is_file():
        header = read_header(path)
        if header is not None and isinstance(header.get(key), dict):
            return header[key]
    folder = RunFolder.of(path)
    return folder._read(name) if folder.has(name) else None


def software() -> dict[str, Any]:
    """This eor: its version, and the git commit of its source when it runs from a checkout ("+changes" when
    tracked files differ from it; None outside a checkout)."""
    try:
        version = metadata.version("eor")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"eor": version, "commit": _commit(Path(__file__).resolve().parents[2])}


def _commit(root: Path) -> str | None:
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


def pack_records(run: str | Path, out: str | Path) -> int:
    """Write a run folder's records as one gzip file (level 9, no timestamp: the same records give the same
    bytes) headed by the pool's identity, the run's config and its stretches; returns the number of records."""
    folder = RunFolder(Path(run))
    if not folder.has(CONFIG_FILE) or not folder.has(POOL_FILE):
        raise InputError(f"{folder.path} is not a run folder of `eor run` (it needs {CONFIG_FILE} and {POOL_FILE})")
    records = folder.read_records()
    header = {
        "version": HEADER_VERSION,
        "pool": folder.read_pool(),
        "config": _without_machine_paths(folder.read_config()),
        "questions": len(records),
    }
    if folder.has(MADE_BY_FILE):
        header["made_by"] = folder.read_made_by()
    lines = [json.dumps({HEADER_KEY: header}, ensure_ascii=False)]
    lines += [json.dumps(record.to_dict(), ensure_ascii=False) for record in records]
    # no name in the gzip header (it would be the temporary file's, pid and thread id in it): the same bytes each time
    with (
        atomic_file(out, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=9, mtime=0) as handle,
    ):
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
    folder = RunFolder(Path(out))
    with folder.writing():
        if folder.records_file() is not None:
            raise InputError(f"{folder.path} already holds records; unpack into a new folder")
        lines = packed_lines(file)
        folder.write_config({**header["config"], "weights": None})
        folder.write_pool(header["pool"])
        if isinstance(header.get("made_by"), list):
            folder.write_made_by(header["made_by"])
        write_text_atomically(folder.file(RECORDS_FILE), "".join(line + "\n" for line in lines))
    return len(lines)
