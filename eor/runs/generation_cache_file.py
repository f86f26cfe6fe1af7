"""The generation cache's SQLite file (eor.runs.generation_cache): its schema and versions, opening it (checked,
initialised or upgraded) and the errors it raises.

A file is an eor generation cache when its header's application id is APPLICATION_ID; its `user_version` is
the schema's version. A new file is initialised by one process while the others wait; a file of an older
schema is upgraded in place in one transaction, one of a newer schema (a newer eor) is refused. Opened files
are in WAL mode (with `synchronous = NORMAL`: durable across process crashes), wait up to BUSY_TIMEOUT_S for
another process's write, and keep the entries' bytes exact under the size bound (`BOUND`, eor.core.cache_policy).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from eor.core.cache_policy import BoundedTable
from eor.core.errors import CacheError

CACHE_FILE = "generations.sqlite"
BUSY_TIMEOUT_S = 30.0
APPLICATION_ID = 0x454F5247  # "EORG": marks the SQLite file as an eor generation cache
SCHEMA_VERSION = 2  # 2: `meta` (token counts, confidence) and `used` (last read or write, for the size bound)

#: an entry's bytes, their sum and the eviction of the least recently used (eor.core.cache_policy)
BOUND = BoundedTable("generations", keys=("key",), sized=("key", "reader", "output", "meta"))
SCHEMA: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, reader TEXT NOT NULL, output TEXT NOT NULL, "
    "seconds REAL NOT NULL, created REAL NOT NULL, meta TEXT, used REAL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS generations_by_reader ON generations (reader)",
    "CREATE INDEX IF NOT EXISTS generations_by_use ON generations (used)",
    *BOUND.usage_statements(),
)
_UPGRADES = {  # from schema version N to N + 1
    1: (
        "ALTER TABLE generations ADD COLUMN meta TEXT",
        "ALTER TABLE generations ADD COLUMN used REAL",
        "UPDATE generations SET used = created",
        "CREATE INDEX IF NOT EXISTS generations_by_use ON generations (used)",
        *BOUND.usage_statements(),
    ),
}


def open_file(path: Path) -> sqlite3.Connection:
    """Open (creating when new) an eor generation cache file; anything else raises CacheError."""
    if path.is_dir():
        raise CacheError(f"generation cache {path} is a folder; give a file path (e.g. {path / CACHE_FILE})")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise cache_error(path, exc) from None
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _check_or_initialise(connection, path)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable across process crashes
        connection.execute("PRAGMA recursive_triggers = ON")  # REPLACE's delete keeps `usage` exact
    except sqlite3.Error as exc:
        connection.close()
        raise cache_error(path, exc) from None
    except CacheError:
        connection.close()
        raise
    return connection


def open_memory() -> sqlite3.Connection:
    """A fresh in-memory generation cache (nothing persists)."""
    connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA recursive_triggers = ON")
    for statement in SCHEMA:
        connection.execute(statement)
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
            for statement in SCHEMA:  # not executescript(), which would commit the open transaction
                connection.execute(statement)
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


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


def cache_error(path: Path | None, exc: BaseException) -> CacheError:
    """The project's error for an SQLite failure on the cache at `path` (None: in memory), saying what to do."""
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
