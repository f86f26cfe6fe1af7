"""The one persistent cache of reader generations, shared by every command (`eor run`, `ask`, `serve`, `erag`,
`utility`) and every process: an SQLite file, by default `$EOR_CACHE/generations.sqlite`.

An entry's key is the sha256 of a canonical JSON object {reader identity, exact prompt, generation parameters
(max_tokens)}; the reader identity changes whenever the reader's outputs could (backend, model file hash,
context size, library version; see each reader's `identity`). An entry holds the output text, the seconds
its generation took, when it was made, and (schema 2) what the reader reported of it: token counts and the
reader's confidence (eor.confidence), as JSON in `meta`. Identical prompts are therefore generated once, across
members, questions, commands and runs. A schema-1 file is upgraded in place when opened (its entries keep no
meta; a caller that wants confidence regenerates such an entry once, eor.stages.generation).

Size bound: the entries' bytes (keys, texts, meta; kept exactly by triggers in a one-row table `usage`)
stay under `max_bytes` (default DEFAULT_MAX_BYTES, or `EOR_CACHE_MAX_BYTES`, e.g. `500MB`): after a write
that passes it, the least recently used entries (by their last read or write, `used`) are deleted until
they hold a tenth less, so a long `eor serve` cannot fill a disk. Freed pages are reused by later writes
(`eor cache clear` also shrinks the file).

Safety: the file is in WAL mode, every batch of puts is one transaction (`INSERT OR IGNORE`, so concurrent
processes that generate the same prompt both succeed and keep the first output), and a process killed in the
middle of a write leaves whole entries only (SQLite rolls the torn transaction back on the next open).
Writers wait up to `BUSY_TIMEOUT_S` for each other.

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

from eor.errors import CacheError, is_disk_full
from eor.faults import failpoint
from eor.models import cache_dir

log = logging.getLogger(__name__)

CACHE_FILE = "generations.sqlite"
ENV_VARIABLE = "EOR_GENERATION_CACHE"
SIZE_VARIABLE = "EOR_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 * 1024**3  # 4 GB
EVICT_TO = 0.9  # after passing the bound, keep this share of it
OFF_VALUES = frozenset({"off", "0", "false", "no", "none", ""})
BUSY_TIMEOUT_S = 30.0
APPLICATION_ID = 0x454F5247  # "EORG": marks the SQLite file as an eor generation cache
SCHEMA_VERSION = 2  # 2: `meta` (token counts, confidence) and `used` (last read or write, for the size bound)
_CHUNK = 500  # keys per SELECT ... IN (...), well under SQLite's limit on bound parameters

_SCHEMA: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, reader TEXT NOT NULL, output TEXT NOT NULL, "
    "seconds REAL NOT NULL, created REAL NOT NULL, meta TEXT, used REAL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS generations_by_reader ON generations (reader)",
    "CREATE INDEX IF NOT EXISTS generations_by_use ON generations (used)",
)
_ENTRY_BYTES = "(LENGTH({row}.key) + LENGTH({row}.reader) + LENGTH({row}.output) + COALESCE(LENGTH({row}.meta), 0))"
# The entries' bytes, kept by triggers: one row, exact, shared by every process (the bound's measure).
_USAGE = (
    "CREATE TABLE IF NOT EXISTS usage (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO usage VALUES (0, (SELECT COALESCE(SUM("
    + _ENTRY_BYTES.format(row="generations")
    + "), 0) FROM generations))",
    "CREATE TRIGGER IF NOT EXISTS usage_insert AFTER INSERT ON generations BEGIN "
    "UPDATE usage SET bytes = bytes + " + _ENTRY_BYTES.format(row="NEW") + " WHERE id = 0; END",
    "CREATE TRIGGER IF NOT EXISTS usage_delete AFTER DELETE ON generations BEGIN "
    "UPDATE usage SET bytes = bytes - " + _ENTRY_BYTES.format(row="OLD") + " WHERE id = 0; END",
)
_SCHEMA += _USAGE
_UPGRADES = {  # from schema version N to N + 1
    1: (
        "ALTER TABLE generations ADD COLUMN meta TEXT",
        "ALTER TABLE generations ADD COLUMN used REAL",
        "UPDATE generations SET used = created",
        "CREATE INDEX IF NOT EXISTS generations_by_use ON generations (used)",
        *_USAGE,
    ),
}


def default_cache_path() -> Path | None:
    """`$EOR_GENERATION_CACHE` when set (None when it says `off`), else `<eor cache folder>/generations.sqlite`."""
    value = os.environ.get(ENV_VARIABLE)
    if value is None:
        return cache_dir() / CACHE_FILE
    if value.strip().lower() in OFF_VALUES:
        return None
    return Path(value).expanduser()


def parse_size(text: str | int) -> int:
    """Bytes from `4GB`, `500MB`, `800kB` or a plain number (powers of 1024)."""
    if isinstance(text, int):
        value = text
    else:
        clean = str(text).strip().upper().removesuffix("B").removesuffix("I")
        factor = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}.get(clean[-1:], 1)
        number = clean[:-1] if factor > 1 else clean
        try:
            value = int(float(number) * factor)
        except ValueError:
            raise CacheError(f"a cache size is a number of bytes or e.g. 500MB or 4GB, not {text!r}") from None
    if value <= 0:
        raise CacheError(f"a cache size must be positive, not {text!r}")
    return value


def default_max_bytes() -> int:
    """`EOR_CACHE_MAX_BYTES` when set, else DEFAULT_MAX_BYTES."""
    value = os.environ.get(SIZE_VARIABLE)
    return parse_size(value) if value else DEFAULT_MAX_BYTES


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


class GenerationCache:
    """Generations by key in an SQLite file (`path`), or in memory when `path` is None (nothing persists).

    Thread-safe (one connection per process, behind a lock) and fork-safe (a child process opens its own
    connection). A file that is not an eor generation cache raises CacheError when opened.
    """

    def __init__(self, path: str | Path | None = None, max_bytes: int | str | None = None) -> None:
        self.path = None if path is None else Path(path).expanduser()
        self.max_bytes = default_max_bytes() if max_bytes is None else parse_size(max_bytes)
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
                        _roll_back(connection)
                        raise
                    connection.execute("COMMIT")
                except sqlite3.Error as exc:
                    if not is_disk_full(exc):
                        raise
                    _roll_back(connection)
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
            before, written = connection.total_changes, 0
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    connection.executemany(f"{verb} INTO generations ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                    failpoint("cache-write")  # tests: die inside the transaction
                except BaseException:
                    _roll_back(connection)
                    raise
                connection.execute("COMMIT")
                written = connection.total_changes - before
                self._bound(connection)
            except (OSError, sqlite3.Error) as exc:
                if not is_disk_full(exc):
                    raise
                _roll_back(connection)
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
            return _bytes_in_use(connection)

    def _bound(self, connection: sqlite3.Connection) -> None:
        """Delete the least recently used entries while the pages in use pass max_bytes, down to EVICT_TO of
        it: as many entries, in order of last use, as hold the excess."""
        if _bytes_in_use(connection) <= self.max_bytes:
            return
        target = EVICT_TO * self.max_bytes
        while (excess := _bytes_in_use(connection) - target) > 0:
            rows = connection.execute(
                f"SELECT key, {_ENTRY_BYTES.format(row='generations')} FROM generations ORDER BY used, created"
            )
            doomed, freed = [], 0
            for key, size in rows:
                doomed.append(key)
                freed += size
                if freed >= excess:
                    break
            rows.close()
            if not doomed:
                return
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany("DELETE FROM generations WHERE key = ?", [(key,) for key in doomed])
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            self.evicted += len(doomed)
            log.info("generation cache %s: %d least recently used entries deleted (bound %d bytes)", self.where,
                     len(doomed), self.max_bytes)  # fmt: skip

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
        """Pickled (e.g. sent to a worker process) as its path; the copy opens its own connection."""
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]

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
            connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA recursive_triggers = ON")
            for statement in _SCHEMA:
                connection.execute(statement)
        else:
            connection = _open_file(self.path)
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
            raise _cache_error(self.cache.path, exc) from None


def _open_file(path: Path) -> sqlite3.Connection:
    """Open (creating when new) an eor generation cache file; anything else raises CacheError."""
    if path.is_dir():
        raise CacheError(f"generation cache {path} is a folder; give a file path (e.g. {path / CACHE_FILE})")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise _cache_error(path, exc) from None
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _check_or_initialise(connection, path)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable across process crashes
        connection.execute("PRAGMA recursive_triggers = ON")  # REPLACE's delete keeps `usage` exact
    except sqlite3.Error as exc:
        connection.close()
        raise _cache_error(path, exc) from None
    except CacheError:
        connection.close()
        raise
    return connection


def _check_or_initialise(connection: sqlite3.Connection, path: Path) -> None:
    application_id = connection.execute("PRAGMA application_id").fetchone()[0]  # reads the header
    if application_id == APPLICATION_ID:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise CacheError(
                f"generation cache {path} was written by a newer eor (schema {version}); upgrade eor or use "
                "another file (--cache FILE, or EOR_GENERATION_CACHE)"
            )
        if version < SCHEMA_VERSION:
            _upgrade(connection)
        return
    connection.execute("BEGIN IMMEDIATE")  # one process initialises; the others wait, then see it done
    try:
        application_id = connection.execute("PRAGMA application_id").fetchone()[0]
        tables = connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
        if application_id != APPLICATION_ID and tables:
            raise CacheError(
                f"{path} is an SQLite database but not an eor generation cache; choose another file "
                "(--cache FILE, or EOR_GENERATION_CACHE) or remove it"
            )
        if application_id != APPLICATION_ID:
            for statement in _SCHEMA:  # not executescript(), which would commit the open transaction
                connection.execute(statement)
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _bytes_in_use(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT bytes FROM usage WHERE id = 0").fetchone()
    return int(row[0]) if row else 0


def _upgrade(connection: sqlite3.Connection) -> None:
    """Bring an older schema up to SCHEMA_VERSION in one transaction (another process may have done it)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        while version < SCHEMA_VERSION:
            for statement in _UPGRADES[version]:
                connection.execute(statement)
            version += 1
        connection.execute(f"PRAGMA user_version = {version}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


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


def _cache_error(path: Path | None, exc: BaseException) -> CacheError:
    where = path if path is not None else "the in-memory generation cache"
    message = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in message or "malformed" in message):
        return CacheError(
            f"{where} is not a valid eor generation cache ({message}); remove it (it only holds cached "
            "generations) or choose another file with --cache FILE / EOR_GENERATION_CACHE"
        )
    if "locked" in message or "busy" in message:
        return CacheError(
            f"generation cache {where} stayed locked by another process for {BUSY_TIMEOUT_S:g} s ({message}); "
            "retry, or use another file (--cache FILE) or --no-cache"
        )
    return CacheError(
        f"generation cache {where} cannot be used ({type(exc).__name__}: {message}); check that it is a writable "
        "file, or choose another with --cache FILE / EOR_GENERATION_CACHE, or run with --no-cache"
    )


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


def format_stats(stats: CacheStats, *, limit: int = 20) -> str:
    """`eor cache stats` output: the file, entries, size, and entries per reader identity."""
    lines = [
        f"generation cache: {stats.path}",
        f"entries: {stats.entries}",
        f"size on disk: {_size(stats.bytes)}; in use {_size(stats.bytes_in_use)} of a bound of {_size(stats.max_bytes)}"
        f" ({100 * stats.bytes_in_use / stats.max_bytes:.0f}%; least recently used entries go first)",
    ]
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


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"  # pragma: no cover - the loop always returns


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def _roll_back(connection: sqlite3.Connection) -> None:
    """ROLLBACK, unless SQLite already rolled the transaction back (as it does on a full disk)."""
    if connection.in_transaction:
        connection.execute("ROLLBACK")
