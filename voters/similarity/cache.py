"""A disk cache of pair scores: one SQLite file, `pair_scores.sqlite`, in eor's cache folder or in a folder
the caller names (a voter's `cache_dir`).

Rows are keyed by the metric's cache key (its name and score-changing parameters) and the pair as scored
(symmetric metrics store one canonical order). Re-running a fit or a vote on the same answers reads the
scores back instead of calling the model again. SQLite keeps concurrent writers from corrupting the file.

Bounded as every cache is (eor.core.cache_policy): a score's bytes are those of its metric key and its pair, and
after a write that takes the file past `max_bytes` (else `EOR_CACHE_MAX_BYTES`, else 4 GB) the least recently
read or written scores are deleted. A file from before the bound (schema 0) is upgraded when opened; its
scores count as used least recently.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from eor.core.cache_policy import BoundedTable, CacheReport, roll_back, size_bound
from eor.core.models import cache_dir

log = logging.getLogger(__name__)

FILE_NAME = "pair_scores.sqlite"
SCHEMA_VERSION = 1  # 1: `used` (last read or write) and `usage` (the scores' bytes), for the size bound

_BOUND = BoundedTable("scores", keys=("metric", "a", "b"), sized=("metric", "a", "b"))
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS scores (metric TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, "
    "score REAL NOT NULL, used REAL NOT NULL DEFAULT 0, PRIMARY KEY (metric, a, b)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS scores_by_use ON scores (used)",
    *_BOUND.usage_statements(),
)


class PairScoreCache:
    """Pair scores stored in `folder/pair_scores.sqlite` (default folder: eor's cache folder; created when
    needed), held under `max_bytes` (see the module)."""

    def __init__(self, folder: str | Path | None = None, max_bytes: int | str | None = None):
        self.folder = cache_dir() if folder is None else Path(folder).expanduser()
        self.path = self.folder / FILE_NAME
        self.max_bytes = size_bound(max_bytes)

    def _connect(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        connection.execute("PRAGMA recursive_triggers = ON")  # REPLACE's delete keeps `usage` exact
        if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            _initialise(connection)
        return connection

    def get_many(self, metric: str, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """The cached scores of those `pairs` that are in the cache (each read counts as a use)."""
        if not pairs:
            return {}
        connection = self._connect()
        try:
            connection.execute("CREATE TEMP TABLE wanted (a TEXT NOT NULL, b TEXT NOT NULL)")
            connection.execute("BEGIN")
            connection.executemany("INSERT INTO wanted VALUES (?, ?)", pairs)
            rows = connection.execute(
                "SELECT w.a, w.b, s.score FROM wanted AS w JOIN scores AS s "
                "ON s.metric = ? AND s.a = w.a AND s.b = w.b",
                (metric,),
            ).fetchall()
            connection.execute("COMMIT")
            if rows:
                now = time.time()
                uses = [(now, metric, a, b) for a, b, _ in rows]
                _write(connection, "UPDATE scores SET used = ? WHERE metric = ? AND a = ? AND b = ?", uses)
        finally:
            connection.close()
        return {(a, b): float(score) for a, b, score in rows}

    def put_many(self, metric: str, items: Iterable[tuple[tuple[str, str], float]]) -> None:
        """Store scores (replacing those of the same pairs), then keep the file under its bound."""
        now = time.time()
        rows = [(metric, a, b, float(score), now) for (a, b), score in items]
        if not rows:
            return
        connection = self._connect()
        try:
            _write(connection, "INSERT OR REPLACE INTO scores (metric, a, b, score, used) VALUES (?, ?, ?, ?, ?)", rows)
            if deleted := _BOUND.evict(connection, self.max_bytes):
                log.info("pair-score cache %s: %d least recently used scores deleted (bound %d bytes)", self.path,
                         deleted, self.max_bytes)  # fmt: skip
        finally:
            connection.close()

    def __len__(self) -> int:
        if not self.path.exists():
            return 0
        connection = self._connect()
        try:
            return int(connection.execute("SELECT COUNT(*) FROM scores").fetchone()[0])
        finally:
            connection.close()

    def report(self) -> CacheReport:
        """Its lines in `eor cache stats` (looking creates no file)."""
        if not self.path.exists():
            return CacheReport("pair-score cache", str(self.path), max_bytes=self.max_bytes, found=False)
        connection = self._connect()
        try:
            entries = int(connection.execute("SELECT COUNT(*) FROM scores").fetchone()[0])
            in_use = _BOUND.bytes_in_use(connection)
        finally:
            connection.close()
        return CacheReport(
            "pair-score cache", str(self.path), entries, self.path.stat().st_size, in_use, self.max_bytes
        )

    def clear(self) -> int:
        """Delete every score and shrink the file; how many were deleted."""
        if not self.path.exists():
            return 0
        connection = self._connect()
        try:
            deleted = _write(connection, "DELETE FROM scores", [()])
            connection.execute("VACUUM")
        finally:
            connection.close()
        return deleted


def _write(connection: sqlite3.Connection, statement: str, rows: list[tuple]) -> int:
    """`statement` over `rows` in one transaction; how many rows of `scores` it changed."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        changed = connection.executemany(statement, rows).rowcount  # (not counting the triggers' rows)
    except BaseException:
        roll_back(connection)
        raise
    connection.execute("COMMIT")
    return changed


def _initialise(connection: sqlite3.Connection) -> None:
    """Create the schema, or upgrade a file of schema 0 (no `used`), in one transaction (another process may
    have done it meanwhile)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        if connection.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            columns = {row[1] for row in connection.execute("PRAGMA table_info(scores)")}
            if columns and "used" not in columns:
                connection.execute("ALTER TABLE scores ADD COLUMN used REAL NOT NULL DEFAULT 0")
            for statement in _SCHEMA:
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        roll_back(connection)
        raise
    connection.execute("COMMIT")


def as_cache(cache: PairScoreCache | str | Path | None) -> PairScoreCache | None:
    """`cache` as a PairScoreCache: a folder path becomes one, None stays None (no caching)."""
    if cache is None or isinstance(cache, PairScoreCache):
        return cache
    return PairScoreCache(cache)
