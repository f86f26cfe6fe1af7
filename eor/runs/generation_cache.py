"""The one persistent cache of reader generations, shared by every command (`eor run`, `ask`, `serve`, `erag`,
`utility`) and every process: an SQLite file, by default `$EOR_CACHE/generations.sqlite`.

An entry's key is the sha256 of a canonical JSON object {reader identity, exact prompt, generation parameters
(max_tokens)}; the reader identity changes whenever the reader's outputs could (backend, model file hash,
context size, library version; see each reader's `identity`). An entry holds the output text, the seconds
its generation took, when it was made, and (schema 2) what the reader reported of it: token counts and the
reader's confidence (eor.core.confidence), as JSON in `meta`. Identical prompts are therefore generated once, across
members, questions, commands and runs. A schema-1 file is upgraded in place when opened (its entries keep no
meta; a caller that wants confidence regenerates such an entry once, eor.pipeline.stages.generation).

Size bound, as for every cache (eor.core.cache_policy): the entries' bytes (keys, reader identities, texts, meta)
stay under `max_bytes` (`--cache-max`, else `EOR_CACHE_MAX_BYTES`, else 4 GB): after a write that passes it,
the least recently used entries (by their last read or write, `used`) are deleted until they hold a tenth
less, so a long `eor serve` cannot fill a disk. Freed pages are reused by later writes (`eor cache clear`
also shrinks the file).

Safety: the file is in WAL mode, every batch of puts is one transaction (`INSERT OR IGNORE`, so concurrent
processes that generate the same prompt both succeed and keep the first output), and a process killed in the
middle of a write leaves whole entries only (SQLite rolls the torn transaction back on the next open).
Writers wait up to `BUSY_TIMEOUT_S` for each other (eor.runs.generation_cache_file: the file's schema, versions
and opening).

`EOR_GENERATION_CACHE` chooses the default: a file path, or `off` to disable caching.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eor.core.cache_policy import DEFAULT_MAX_BYTES, CacheReport, roll_back, size_bound
from eor.core.errors import CacheError, is_disk_full
from eor.core.faults import failpoint
from eor.core.models import cache_dir
from eor.runs.generation_cache_file import BOUND, CACHE_FILE, cache_error, open_file, open_memory

log = logging.getLogger(__name__)

ENV_VARIABLE = "EOR_GENERATION_CACHE"
OFF_VALUES = frozenset({"off", "0", "false", "no", "none", ""})
_CHUNK = 500  # keys per SELECT ... IN (...), well under SQLite's limit on bound parameters


def default_cache_path() -> Path | None:
    """`$EOR_GENERATION_CACHE` when set (None when it says `off`), else `<eor cache folder>/generations.sqlite`."""
    value = os.environ.get(ENV_VARIABLE)
    if value is None:
        return cache_dir() / CACHE_FILE
    if value.strip().lower() in OFF_VALUES:
        return None
    return Path(value).expanduser()


def generation_key(reader: str, prompt: str, params: Mapping[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of {reader identity, prompt, generation parameters}."""
    canonical = json.dumps(
        {"reader": reader, "prompt": prompt, "params": dict(params)},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Generation:
    """One cached output: its key, the identity of the reader that produced it, the text, the seconds the
    generation took, and what else the reader reported (`meta`: token counts, confidence; None in entries
    of schema 1)."""

    key: str
    reader: str
    text: str
    seconds: float = 0.0
    meta: dict[str, Any] | None = None


@dataclass
class CacheStats:
    """What `eor cache stats` shows: the file, its entries (in all and per reader identity), its size on disk
    (WAL included) and the part of it entries use against the bound, and this process's look-ups (`hits`,
    `misses`) and evictions."""

    path: str
    entries: int
    bytes: int
    readers: dict[str, int] = field(default_factory=dict)
    bytes_in_use: int = 0
    max_bytes: int = DEFAULT_MAX_BYTES
    evicted: int = 0
    hits: int = 0
    misses: int = 0
    oldest: float | None = None
    newest: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def report(self) -> CacheReport:
        """The lines every cache has in `eor cache stats` (eor.core.cache_policy)."""
        return CacheReport("generation cache", self.path, self.entries, self.bytes, self.bytes_in_use, self.max_bytes)


class GenerationCache:
    """Generations by key in an SQLite file (`path`), or in memory when `path` is None (nothing persists).

    Thread-safe (one connection per process, behind a lock) and fork-safe (a child process opens its own
    connection). A file that is not an eor generation cache raises CacheError when opened.
    """

    def __init__(self, path: str | Path | None = None, max_bytes: int | str | None = None) -> None:
        self.path = None if path is None else Path(path).expanduser()
        self.max_bytes = size_bound(max_bytes)
        self.evicted = 0  # entries this process deleted to stay under max_bytes
        self.hits = 0
        self.full_disk_warned = False
        self.misses = 0
        self._lock = threading.RLock()
        self._connection: sqlite3.Connection | None = None
        self._pid = -1
        with self._lock:
            self._connect()

    @classmethod
    def default(cls) -> GenerationCache | None:
        """The cache of `default_cache_path()`, or None when the environment turns caching off."""
        path = default_cache_path()
        return None if path is None else cls(path)

    def __repr__(self) -> str:
        return f"GenerationCache({str(self.path) if self.path else 'in memory'})"

    @property
    def where(self) -> str:
        """The file, or `in memory`."""
        return str(self.path) if self.path is not None else "in memory"

    # -- reading and writing --------------------------------------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, Generation]:
        """The cached generations among `keys` (missing keys are absent from the result)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Generation] = {}
        with self._using() as connection:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(
                    f"SELECT key, reader, output, seconds, meta FROM generations WHERE key IN ({marks})", chunk
                ).fetchall()
                found.update((row[0], Generation(row[0], row[1], row[2], row[3], _meta(row[4]))) for row in rows)
            if found:  # a read counts as a use: the least recently used entries go first
                now = time.time()
                try:
                    connection.execute("BEGIN IMMEDIATE")
                    try:
                        uses = [(now, key) for key in found]
                        connection.executemany("UPDATE generations SET used = ? WHERE key = ?", uses)
                    except BaseException:
                        roll_back(connection)
                        raise
                    connection.execute("COMMIT")
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
                    roll_back(connection)
                    self._warn_full(exc)  # the hits are served; their times of use are not kept
            self.hits += len(found)
            self.misses += len(wanted) - len(found)
        return found

    def get(self, key: str) -> Generation | None:
        return self.get_many([key]).get(key)

    def put_many(self, items: Iterable[Generation], replace: bool = False) -> int:
        """Store generations in one transaction; a key already present keeps its first output, unless
        `replace` (an entry regenerated to add what it lacked). Returns how many were written."""
        now = time.time()
        rows = [
            (item.key, item.reader, item.text, float(item.seconds), now, _meta_json(item.meta), now) for item in items
        ]
        if not rows:
            return 0
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        columns = "key, reader, output, seconds, created, meta, used"
        with self._using() as connection:
            written = 0
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    statement = f"{verb} INTO generations ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                    inserted = connection.executemany(statement, rows).rowcount  # (the triggers' rows not counted)
                    failpoint("cache-write")  # tests: die inside the transaction
                except BaseException:
                    roll_back(connection)
                    raise
                connection.execute("COMMIT")
                written = inserted
                self._bound(connection)
            except (OSError, sqlite3.Error) as exc:
                if not is_disk_full(exc):
                    raise
                roll_back(connection)
                self._warn_full(exc)  # `written`: 0, or the rows committed before the bound failed
            return written

    def _warn_full(self, exc: BaseException) -> None:
        """A full disk degrades the cache to a warning (once per cache): answers go on, unstored."""
        if not self.full_disk_warned:
            log.warning("generation cache %s: disk full, generations are not stored (%s)", self.path, exc)
            self.full_disk_warned = True

    def bytes_in_use(self) -> int:
        """The entries' bytes (keys, texts, meta): what the bound holds (the file is somewhat larger)."""
        with self._using() as connection:
            return BOUND.bytes_in_use(connection)

    def _bound(self, connection: sqlite3.Connection) -> None:
        """Past max_bytes, delete the least recently used entries (eor.core.cache_policy)."""
        if deleted := BOUND.evict(connection, self.max_bytes):
            self.evicted += deleted
            log.info(
                "generation cache %s: %d least recently used entries deleted (bound %d bytes)",
                self.where,
                deleted,
                self.max_bytes,
            )

    def __bool__(self) -> bool:
        return True  # an open cache is truthy even when empty (`__len__` would say otherwise)

    def __len__(self) -> int:
        with self._using() as connection:
            return int(connection.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def stats(self) -> CacheStats:
        with self._using() as connection:
            readers = dict(
                connection.execute(
                    "SELECT reader, COUNT(*) FROM generations GROUP BY reader ORDER BY COUNT(*) DESC, reader"
                ).fetchall()
            )
            oldest, newest = connection.execute("SELECT MIN(created), MAX(created) FROM generations").fetchone()
        return CacheStats(
            path=self.where,
            entries=sum(readers.values()),
            bytes=self._bytes_on_disk(),
            readers=readers,
            bytes_in_use=self.bytes_in_use(),
            max_bytes=self.max_bytes,
            evicted=self.evicted,
            hits=self.hits,
            misses=self.misses,
            oldest=oldest,
            newest=newest,
        )

    def clear(self, reader: str | None = None) -> int:
        """Delete every entry, or those of one reader identity; returns how many were deleted. The file
        shrinks unless another process is using it at that moment (its free pages are then reused later)."""
        with self._using() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                if reader is None:
                    deleted = connection.execute("DELETE FROM generations").rowcount
                else:
                    deleted = connection.execute("DELETE FROM generations WHERE reader = ?", (reader,)).rowcount
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            if deleted and self.path is not None:
                self._compact(connection)
        return int(deleted)

    def close(self) -> None:
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def __enter__(self) -> GenerationCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (e.g. sent to a worker process) as its path and bound; the copy opens its own connection."""
        return {"path": self.path, "max_bytes": self.max_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["max_bytes"])  # type: ignore[misc]

    # -- the connection -------------------------------------------------------------------------------

    def _using(self) -> _Guard:
        return _Guard(self)

    def _connect(self) -> sqlite3.Connection:
        """This process's connection, opened (and the file checked or initialised) on first use."""
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        # A connection inherited through fork() must not be used in the child: open a new one.
        self._connection, self._pid = None, os.getpid()
        if self.path is None:
            connection = open_memory()
        else:
            connection = open_file(self.path)
        self._connection = connection
        return connection

    def _bytes_on_disk(self) -> int:
        if self.path is None:
            return 0
        files = (self.path, self.path.with_name(self.path.name + "-wal"), self.path.with_name(self.path.name + "-shm"))
        return sum(file.stat().st_size for file in files if file.exists())

    def _compact(self, connection: sqlite3.Connection) -> None:
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.execute("VACUUM")
        except sqlite3.OperationalError as exc:  # another process holds the file: its pages are reused later
            log.warning("generation cache %s: not compacted now (%s)", self.path, exc)


CacheSetting = str | os.PathLike | GenerationCache | bool | None
"""What `cache=` arguments accept: True (the default file, see `default_cache_path`), a file path, an open
GenerationCache, or False/None (no cache)."""


class _Guard:
    """`with cache._using() as connection:` under the cache's lock; SQLite errors become CacheError."""

    def __init__(self, cache: GenerationCache) -> None:
        self.cache = cache

    def __enter__(self) -> sqlite3.Connection:
        self.cache._lock.acquire()
        try:
            return self.cache._connect()
        except BaseException:
            self.cache._lock.release()
            raise

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, trace: object) -> None:
        self.cache._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise cache_error(self.cache.path, exc) from None


def _meta(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _meta_json(meta: dict[str, Any] | None) -> str | None:
    return None if not meta else json.dumps(meta, separators=(",", ":"), sort_keys=True)


def open_cache(setting: CacheSetting = True) -> GenerationCache | None:
    """The cache a `cache=` argument names (see `CacheSetting`): True -> the default (environment), a path
    -> that file, a GenerationCache -> itself, False/None -> None (caching off)."""
    if isinstance(setting, GenerationCache):
        return setting
    if setting is True:
        return GenerationCache.default()
    if setting is False or setting is None:
        return None
    if isinstance(setting, str | os.PathLike):
        return GenerationCache(Path(setting))
    raise CacheError(f"cache must be True, False, None, a file path or a GenerationCache, not {setting!r}")


def open_cache_or_memory(setting: CacheSetting = True) -> GenerationCache:
    """`open_cache`'s cache, or, where caching is off (False/None, `EOR_GENERATION_CACHE=off`), a fresh one in
    memory for this run only, so a run still generates each distinct prompt once (`eor erag`, `eor utility`,
    and eRAG's and utility's API). Callers that run without any cache when it is off use `open_cache`."""
    opened = open_cache(setting)
    return opened if opened is not None else GenerationCache()


def format_stats(stats: CacheStats, *, limit: int = 20) -> str:
    """`eor cache stats` output: the file, entries, size against the bound, and entries per reader identity."""
    lines = stats.report().lines()
    if stats.oldest is not None and stats.newest is not None:
        lines.append(f"written: {_when(stats.oldest)} .. {_when(stats.newest)}")
    if stats.hits or stats.misses:
        lines.append(f"this process: {stats.hits} hits, {stats.misses} misses")
    if stats.readers:
        lines.append("entries per reader (identity):")
        shown = list(stats.readers.items())[:limit]
        lines += [f"  {count:>9}  {reader}" for reader, count in shown]
        if len(stats.readers) > limit:
            lines.append(f"  ... and {len(stats.readers) - limit} more readers")
    return "\n".join(lines)


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))
