"""What eor's bounded caches of one SQLite file share (eor.core.cache_policy): the pair-score cache
(voters.similarity.pair_score_cache) and the passage vector cache (retrievers.vector_cache). A subclass names its
file, its table (a `BoundedTable`) and its schema; this class opens the file (creating or upgrading the schema in one
transaction), writes in transactions, evicts past the bound, counts, reports and clears.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import ClassVar

from eor.core.cache_policy import BoundedTable, CacheReport, roll_back, size_bound

log = logging.getLogger(__name__)


class SqliteCache:
    """A bounded cache in `folder/FILE_NAME` (created when needed), held under `max_bytes`."""

    FILE_NAME: ClassVar[str]
    NAME: ClassVar[str]  # as `eor cache stats` names it
    BOUND: ClassVar[BoundedTable]
    SCHEMA: ClassVar[tuple[str, ...]]
    SCHEMA_VERSION: ClassVar[int] = 1

    def __init__(self, folder: Path, max_bytes: int | str | None = None) -> None:
        self.folder = folder
        self.path = self.folder / self.FILE_NAME
        self.max_bytes = size_bound(max_bytes)

    def _connect(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        connection.execute("PRAGMA recursive_triggers = ON")  # REPLACE's delete keeps `usage` exact
        if connection.execute("PRAGMA user_version").fetchone()[0] != self.SCHEMA_VERSION:
            self._initialise(connection)
        return connection

    def _initialise(self, connection: sqlite3.Connection) -> None:
        """Create the schema, or upgrade an older one (`_upgrade`), in one transaction (another process may
        have done it meanwhile)."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            if connection.execute("PRAGMA user_version").fetchone()[0] < self.SCHEMA_VERSION:
                self._upgrade(connection)
                for statement in self.SCHEMA:
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {self.SCHEMA_VERSION}")
        except BaseException:
            roll_back(connection)
            raise
        connection.execute("COMMIT")

    def _upgrade(self, connection: sqlite3.Connection) -> None:
        """Bring a file of an older schema up to date before the schema's statements run (none by default)."""

    def _store(self, connection: sqlite3.Connection, statement: str, rows: list[tuple]) -> None:
        """Write `rows`, then keep the file under its bound (the least recently used entries go first)."""
        write(connection, statement, rows)
        if deleted := self.BOUND.evict(connection, self.max_bytes):
            log.info(
                "%s %s: %d least recently used entries deleted (bound %d bytes)",
                self.NAME,
                self.path,
                deleted,
                self.max_bytes,
            )

    def __len__(self) -> int:
        if not self.path.exists():
            return 0
        connection = self._connect()
        try:
            return int(connection.execute(f"SELECT COUNT(*) FROM {self.BOUND.table}").fetchone()[0])
        finally:
            connection.close()

    def report(self) -> CacheReport:
        """Its lines in `eor cache stats` (looking creates no file)."""
        if not self.path.exists():
            return CacheReport(self.NAME, str(self.path), max_bytes=self.max_bytes, found=False)
        connection = self._connect()
        try:
            entries = int(connection.execute(f"SELECT COUNT(*) FROM {self.BOUND.table}").fetchone()[0])
            in_use = self.BOUND.bytes_in_use(connection)
        finally:
            connection.close()
        return CacheReport(self.NAME, str(self.path), entries, self.path.stat().st_size, in_use, self.max_bytes)

    def clear(self) -> int:
        """Delete every entry and shrink the file; how many were deleted."""
        if not self.path.exists():
            return 0
        connection = self._connect()
        try:
            deleted = write(connection, f"DELETE FROM {self.BOUND.table}", [()])
            connection.execute("VACUUM")
        finally:
            connection.close()
        return deleted


def write(connection: sqlite3.Connection, statement: str, rows: list[tuple]) -> int:
    """`statement` over `rows` in one transaction; how many rows it changed (not counting triggers' rows)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        changed = connection.executemany(statement, rows).rowcount
    except BaseException:
        roll_back(connection)
        raise
    connection.execute("COMMIT")
    return changed
