"""A JSON Lines corpus (`id`, `title`, `text`; for imported documents also `file` and `page`, which cite the
passage's origin) read from disk, one passage at a time.

A corpus is opened through an index of byte offsets, built by one validating pass over the file the first
time the file is seen and kept in the index store (`<cache>/indexes/corpus-<sha256>`, memory-mapped): the
offsets of passage i are `offsets[i]` to `offsets[i + 1]`, so `corpus[i]` costs one `pread`, and titles,
texts and ids are never all in memory (21M DPR passages are 13 GB of text; their offsets are 170 MB).

The validating pass raises InputError naming the file and line of the first line that is not a JSON object
with a string `text`, and of a duplicate passage id (ids are compared by 64-bit digests, and a digest seen
twice is confirmed on the ids themselves). A passage without an `id` takes its line number (blank lines
counted; kept in `lines.npy` where blank lines make it differ from the row). The file is opened once per
version (path, size, modification time, inode): a corpus replaced on disk is indexed and read anew.

The corpus is identified by the sha256 of its file (eor.core.models.file_sha256: computed once per path, size and
modification time, then read from a stamp), which keys every index built over it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from eor.core.cache_policy import KeyedMemo
from eor.core.errors import InputError
from eor.core.models import file_sha256
from retrievers.index_store import index_folder, load_or_build

OFFSETS_VERSION = 1
_READ_BLOCK = 1 << 24  # bytes read at a time by the validating pass and by sequential reads


class Passage(NamedTuple):
    id: str
    title: str
    text: str
    cite: dict[str, Any] | None = None  # where it comes from, for a passage of an imported document: file, page


#: the fields of a corpus line that cite a passage's origin (eor.documents: one's own documents)
CITATION_FIELDS = ("file", "page")


@dataclass(frozen=True, eq=False)
class Corpus:
    """Passages of one corpus file, read from disk by row (`corpus[i]`, `corpus.rows(start, end)`, iteration)
    or by id (`corpus.by_ids(ids)`)."""

    path: Path
    sha256: str
    offsets: np.ndarray  # int64, len(corpus) + 1: passage i is bytes [offsets[i], offsets[i + 1]) of the file
    lines: np.ndarray | None  # int64 line numbers, kept only where blank lines make them differ from row + 1
    fd: int  # the file this corpus was indexed from, opened once (a file replaced later keeps its old inode)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, row: int) -> Passage:
        if not 0 <= row < len(self):
            raise IndexError(f"passage row {row} is outside the corpus's {len(self)} passages")
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        return self._passage(os.pread(self.fd, end - start, start), row)

    def rows(self, start: int, end: int) -> list[Passage]:
        """Passages start..end-1, read in one sequential pass."""
        end = min(end, len(self))
        if start >= end:
            return []
        low, high = int(self.offsets[start]), int(self.offsets[end])
        block = os.pread(self.fd, high - low, low)
        cuts = (self.offsets[start : end + 1] - low).tolist()
        return [self._passage(block[cuts[i] : cuts[i + 1]], start + i) for i in range(end - start)]

    def __iter__(self) -> Iterator[Passage]:
        step = 4096
        for start in range(0, len(self), step):
            yield from self.rows(start, start + step)

    def by_ids(self, ids: Iterable[str]) -> dict[str, Passage]:
        """The passages whose ids are among `ids`, by id in corpus order (an id the corpus lacks is absent),
        read in one sequential pass that stops once every id is found."""
        wanted = set(ids)
        found: dict[str, Passage] = {}
        if not wanted:
            return found
        for passage in self:
            if passage.id in wanted:
                found[passage.id] = passage
                if len(found) == len(wanted):
                    break
        return found

    def _passage(self, line: bytes, row: int) -> Passage:
        record = json.loads(line)
        if "id" in record:
            pid = str(record["id"])
        else:  # its line number, as the validating pass named it
            pid = str(int(self.lines[row]) if self.lines is not None else row + 1)
        cite = {key: record[key] for key in CITATION_FIELDS if record.get(key) is not None}
        return Passage(pid, str(record.get("title") or ""), record["text"], cite or None)


_OPENED: KeyedMemo[tuple[str, int, int, int], Corpus] = KeyedMemo()


def load_corpus(path: str | Path) -> Corpus:
    """Open a corpus file through its offsets index (built by a validating pass the first time it is seen)."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"corpus file not found: {file}")
    fd = os.open(file, os.O_RDONLY)
    info = os.fstat(fd)
    key = (str(file.resolve()), info.st_size, info.st_mtime_ns, info.st_ino)
    kept = _OPENED.get(key)
    if kept is not None:
        os.close(fd)
        return kept
    try:
        sha256 = file_sha256(file)
        meta = {"kind": "corpus", "corpus_sha256": sha256, "bytes": info.st_size, "version": OFFSETS_VERSION}
        build = functools.partial(_write_offsets, file)
        folder = load_or_build(index_folder("corpus", sha256), meta, build, source=file)
        offsets = np.load(folder / "offsets.npy", mmap_mode="r")
        lines = np.load(folder / "lines.npy", mmap_mode="r") if (folder / "lines.npy").is_file() else None
    except BaseException:
        os.close(fd)
        raise
    return _OPENED.keep(key, Corpus(file.resolve(), sha256, offsets, lines, fd))


def _write_offsets(file: Path, folder: Path) -> None:
    from tqdm.auto import tqdm

    starts, numbers = array("q"), array("q")  # compact: 21M passages' starts and id digests are 340 MB here
    digests = bytearray()
    unnamed = False  # a passage without an id is named by its line number
    total = file.stat().st_size
    with file.open("rb") as handle, tqdm(total=total, unit="B", unit_scale=True, desc=f"reading {file.name}") as bar:
        position, number = 0, 0
        for line in handle:
            number += 1
            if line.strip():
                pid, named = _checked_id(line, file, number)
                unnamed = unnamed or not named
                digests += _id_digest(pid)
                starts.append(position)
                numbers.append(number)
            position += len(line)
            if number % 65536 == 0:
                bar.update(position - bar.n)
        bar.update(position - bar.n)
    if not starts:
        raise InputError(f"{file}: the corpus is empty")
    _refuse_duplicate_ids(file, np.frombuffer(digests, dtype="<u8"))
    starts.append(position)
    np.save(folder / "offsets.npy", np.frombuffer(starts, dtype=np.int64))
    lines = np.frombuffer(numbers, dtype=np.int64)
    if unnamed and not np.array_equal(lines, np.arange(1, len(lines) + 1)):
        np.save(folder / "lines.npy", lines)


def _checked_id(line: bytes, file: Path, number: int) -> tuple[str, bool]:
    """The passage id of a corpus line (its line number when it has none) and whether the line names it."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise InputError(f"{file}:{number}: not valid JSON ({reason})") from None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        raise InputError(f"{file}:{number}: a corpus line needs a string field 'text'")
    return (str(record["id"]), True) if "id" in record else (str(number), False)


def _id_digest(pid: str) -> bytes:
    return hashlib.blake2b(pid.encode(), digest_size=8).digest()


def _refuse_duplicate_ids(file: Path, digests: np.ndarray) -> None:
    """InputError naming the line of the first passage whose id an earlier passage has."""
    order = np.argsort(digests, kind="stable")
    ranked = digests[order]
    twice = np.flatnonzero(ranked[1:] == ranked[:-1])
    if not len(twice):
        return
    rows = {int(order[i + 1]): int(order[i]) for i in twice}  # a later row -> an earlier row with its digest
    corpus_lines = _lines_of(file, set(rows) | set(rows.values()))
    for later in sorted(rows):
        (_, first_id), (number, pid) = corpus_lines[rows[later]], corpus_lines[later]
        if pid == first_id:
            raise InputError(f"{file}:{number}: duplicate passage id {pid!r}")


def _lines_of(file: Path, rows: set[int]) -> dict[int, tuple[int, str]]:
    """(line number, id) of the given passage rows (non-blank lines, counted from 0)."""
    found, row = {}, -1
    with file.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                row += 1
                if row in rows:
                    found[row] = (number, _checked_id(line, file, number)[0])
    return found
