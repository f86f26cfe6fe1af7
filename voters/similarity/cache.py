"""A disk cache of pair scores: one SQLite file in a folder chosen by the caller.

Rows are keyed by the metric's cache key (its name and score-changing parameters) and the pair as scored
(symmetric metrics store one canonical order). Re-running a fit or a vote on the same answers reads the
scores back instead of calling the model again. SQLite keeps concurrent writers from corrupting the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

FILE_NAME = "pair_scores.sqlite"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS scores (metric TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, "
    "score REAL NOT NULL, PRIMARY KEY (metric, a, b)) WITHOUT ROWID"
)


class PairScoreCache:
    """Pair scores stored in `folder/pair_scores.sqlite` (the folder is created when needed)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).expanduser()
        self.path = self.folder / FILE_NAME

    def _connect(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute(_SCHEMA)
        return connection

    def get_many(self, metric: str, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """The cached scores of those `pairs` that are in the cache."""
        if not pairs:
            return {}
        connection = self._connect()
        try:
            connection.execute("CREATE TEMP TABLE wanted (a TEXT NOT NULL, b TEXT NOT NULL)")
            connection.executemany("INSERT INTO wanted VALUES (?, ?)", pairs)
            rows = connection.execute(
                "SELECT w.a, w.b, s.score FROM wanted AS w JOIN scores AS s "
                "ON s.metric = ? AND s.a = w.a AND s.b = w.b",
                (metric,),
            ).fetchall()
        finally:
            connection.close()
        return {(a, b): float(score) for a, b, score in rows}

    def put_many(self, metric: str, items: Iterable[tuple[tuple[str, str], float]]) -> None:
        rows = [(metric, a, b, float(score)) for (a, b), score in items]
        if not rows:
            return
        connection = self._connect()
        try:
            with connection:
                connection.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?)", rows)
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


def as_cache(cache: PairScoreCache | str | Path | None) -> PairScoreCache | None:
    """`cache` as a PairScoreCache: a folder path becomes one, None stays None (no caching)."""
    if cache is None or isinstance(cache, PairScoreCache):
        return cache
    return PairScoreCache(cache)
