"""A disk cache of passage vectors, `vectors.sqlite` in eor's cache folder: a corpus that changed (a folder of
documents imported again, eor.documents) re-encodes only its new or changed passages, and the dense index is
rebuilt from the cache.

A vector is keyed by the encoding settings (encoder, passage prefix, pooling, maximum length, normalisation and
the index version: `settings`, a canonical JSON text) and the sha256 of exactly what was encoded (the title as
encoded, prefix included, and the text: `passage_key`); it is stored as the float32 bytes the encoder gave,
so a vector read back is the one written. No corpus digest is part of the key: the same passage in another
version of a corpus, or in another corpus, is the same vector.

Bounded as every cache is (eor.core.cache_policy): a vector's bytes are its key's and its vector's, and after
a write that takes the file past `max_bytes` (else `EOR_CACHE_MAX_BYTES`, else 4 GB) the least recently read
or written vectors are deleted. SQLite keeps concurrent writers from corrupting the file.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from eor.core.cache_policy import BoundedTable
from eor.core.models import cache_dir
from eor.core.sqlite_cache import SqliteCache, write

#: keys looked up per query (SQLite's host parameters stay well under its limit)
LOOKUP_BATCH = 500

_BOUND = BoundedTable("vectors", keys=("settings", "key"), sized=("key", "vector"))
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors (settings TEXT NOT NULL, key BLOB NOT NULL, vector BLOB NOT NULL, "
    "used REAL NOT NULL DEFAULT 0, PRIMARY KEY (settings, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS vectors_by_use ON vectors (used)",
    *_BOUND.usage_statements(),
)


def passage_key(title: str, text: str) -> bytes:
    """The sha256 of a passage as encoded: its title (prefix included) and its text."""
    return hashlib.sha256(f"{title}\0{text}".encode()).digest()


class VectorCache(SqliteCache):
    """Passage vectors stored in `folder/vectors.sqlite` (default folder: eor's cache folder; created when
    needed), held under `max_bytes` (see the module)."""

    FILE_NAME = "vectors.sqlite"
    NAME = "passage vector cache"
    BOUND = _BOUND
    SCHEMA = _SCHEMA

    def __init__(self, folder: str | Path | None = None, max_bytes: int | str | None = None):
        super().__init__(cache_dir() if folder is None else Path(folder).expanduser(), max_bytes)

    def get_many(self, settings: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors of those `keys` that are in the cache (each read counts as a use)."""
        if not keys:
            return {}
        found: dict[bytes, np.ndarray] = {}
        connection = self._connect()
        try:
            for start in range(0, len(keys), LOOKUP_BATCH):
                batch = list(keys[start : start + LOOKUP_BATCH])
                marks = ", ".join("?" * len(batch))
                rows = connection.execute(
                    f"SELECT key, vector FROM vectors WHERE settings = ? AND key IN ({marks})", (settings, *batch)
                ).fetchall()
                found.update((bytes(key), np.frombuffer(vector, dtype=np.float32)) for key, vector in rows)
            if found:
                now = time.time()
                uses = [(now, settings, key) for key in found]
                write(connection, "UPDATE vectors SET used = ? WHERE settings = ? AND key = ?", uses)
        finally:
            connection.close()
        return found

    def put_many(self, settings: str, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Store vectors (replacing those of the same keys), then keep the file under its bound."""
        now = time.time()
        rows = [(settings, key, np.asarray(vector, dtype=np.float32).tobytes(), now) for key, vector in items]
        if not rows:
            return
        connection = self._connect()
        try:
            self._store(
                connection, "INSERT OR REPLACE INTO vectors (settings, key, vector, used) VALUES (?, ?, ?, ?)", rows
            )
        finally:
            connection.close()
