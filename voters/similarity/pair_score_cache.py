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

import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from eor.core.cache_policy import BoundedTable
from eor.core.models import cache_dir
from eor.core.sqlite_cache import SqliteCache, write

FILE_NAME = "pair_scores.sqlite"
SCHEMA_VERSION = 1  # 1: `used` (last read or write) and `usage` (the scores' bytes), for the size bound

_BOUND = BoundedTable("scores", keys=("metric", "a", "b"), sized=("metric", "a", "b"))
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS scores (metric TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, "
    "score REAL NOT NULL, used REAL NOT NULL DEFAULT 0, PRIMARY KEY (metric, a, b)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS scores_by_use ON scores (used)",
    *_BOUND.usage_statements(),
)


class PairScoreCache(SqliteCache):
    """Pair scores stored in `folder/pair_scores.sqlite` (default folder: eor's cache folder; created when
    needed), held under `max_bytes` (see the module)."""

    FILE_NAME = FILE_NAME
    NAME = "pair-score cache"
    BOUND = _BOUND
    SCHEMA = _SCHEMA
    SCHEMA_VERSION = SCHEMA_VERSION

    def __init__(self, folder: str | Path | None = None, max_bytes: int | str | None = None):
        super().__init__(cache_dir() if folder is None else Path(folder).expanduser(), max_bytes)

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
                write(connection, "UPDATE scores SET used = ? WHERE metric = ? AND a = ? AND b = ?", uses)
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
            self._store(
                connection, "INSERT OR REPLACE INTO scores (metric, a, b, score, used) VALUES (?, ?, ?, ?, ?)", rows
            )
        finally:
            connection.close()

    def _upgrade(self, connection: sqlite3.Connection) -> None:
        """A file of schema 0 (no `used`) gets the column; its scores count as used least recently."""
        columns = {row[1] for row in connection.execute("PRAGMA table_info(scores)")}
        if columns and "used" not in columns:
            connection.execute("ALTER TABLE scores ADD COLUMN used REAL NOT NULL DEFAULT 0")


def as_cache(cache: PairScoreCache | str | Path | None) -> PairScoreCache | None:
    """`cache` as a PairScoreCache: a folder path becomes one, None stays None (no caching)."""
    if cache is None or isinstance(cache, PairScoreCache):
        return cache
    return PairScoreCache(cache)
