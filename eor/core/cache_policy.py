"""The one policy of eor's caches: where each lives, how large it may grow, what goes first, what is reported.

Where: in eor's cache folder, `eor.core.models.cache_dir()` ($EOR_CACHE, else $XDG_CACHE_HOME/eor, else
~/.cache/eor), unless its owner is given another place:

| cache | default place (elsewhere when named) | kept | module |
|---|---|---|---|
| reader generations | `generations.sqlite` (`--cache`, `EOR_GENERATION_CACHE`) | bounded | eor.runs.generation_cache |
| similarity pair scores | `pair_scores.sqlite` (a voter's `cache_dir`) | bounded | voters.similarity.pair_score_cache |
| web results and pages | `web/` (a web source's `cache_path`) | bounded | retrievers.web.web_cache |
| passage vectors | `vectors.sqlite` | bounded | retrievers.vector_cache |
| retrieval indexes | `indexes/` | never evicted; superseded versions removed | retrievers.index_store |
| packaged models put together | `models/` | never evicted | eor.core.models |
| sha256 stamps of model files | `hashes/` | never evicted | eor.core.models |

Bound: a bounded cache keeps its entries' bytes under `max_bytes`: the size its owner was given (`--cache-max`
for the generation cache), else `EOR_CACHE_MAX_BYTES` (e.g. `500MB`, `4GB`, or a number of bytes), else
DEFAULT_MAX_BYTES (4 GB); each cache is bounded on its own. An SQLite entry's bytes are SQLite's LENGTH of
the values it stores (`BoundedTable`), kept exact by triggers, so every process sees the same sum; a web
entry's bytes are its file's size.

Eviction: after a write that takes a cache past its bound, its least recently used entries (by their last
read or write, stored with them, so every process's use counts) are deleted until the rest hold EVICT_TO of
the bound (`least_recently_used`). Indexes and models are never evicted: rebuilding one costs minutes and
they are few; `eor cache stats` shows their size, and removing a folder rebuilds it on next use. An index built
for a new version of a corpus file supersedes the one of the file's earlier version, which is removed
(retrievers.index_store); the passage vector cache keeps the vectors both versions share, so the new index
encodes only the new passages.

Reported: `eor cache stats` lists every cache of the table at its default place, each with its path,
entries, bytes and bound (`CacheReport`), and the generation cache's entries per reader.

In-process memos: every cache a process keeps in memory is made here, by `memo` or `KeyedMemo`, and listed in
MEMOS (what keys it, what it holds, its bound, how it is cleared). A model loaded in a process stays loaded for
the rest of it, keyed by the loader's arguments, through `memo`: sentence encoders
(`eor.core.models.load_sentence_encoder`: cosine similarity, semantic correctness, dense sources and rerankers
through it), the dense sources' encoders (`retrievers.dense._tower`, by encoder, pooling and length), NLI models
(`voters.similarity.nli._load`), BERTScore scorers (`voters.similarity.bertscore._scorer`) and llama.cpp's model
class with prefix reuse (`eor.readers.llamacpp._chunk_aligned_llama`). A `KeyedMemo` holds what its owner keys:
two by a file's identity (path, size, modification time), model files' digests (`eor.core.models._DIGESTS`)
and opened corpora (`retrievers.corpus._OPENED`, by inode too); the installed packages' entry points, by group
(`eor.core.plugins._LOADED`); and, one per object, a source's documents by query
(`retrievers.base.SourceRetriever._memo`, its `memo_size` newest), a web source's views by their settings
(`retrievers.web.retriever.WebSearchRetriever._views`), a replay's kept prompt tokens by member order
(`eor.runs.costs.PromptReplay._kept`), what a batch of answers computes for every batch taken from it, by what
asked for it (`voters.batch.VoteBatch._computed`), a cascade's out-of-fold step scores by member subset
(`voters.cascade_fit.StepScores._cache`) and semantic correctness's answer embeddings by text
(`eor.core.correctness.semantic.SemanticEquivalence._embeddings`). A process loads few models and opens few files,
and the per-object memos live as long as the training or scoring that made them, so only a source's documents
are ever evicted. (The reader's saved prompt states, eor.readers.llamacpp_states, are bounded by their bytes and
kept apart, for the reader's own scoring.)
"""

from __future__ import annotations

import functools
import inspect
import os
import sqlite3
import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, ParamSpec, TypeVar

from eor.core.errors import CacheError

SIZE_VARIABLE = "EOR_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 * 1024**3  # 4 GB
EVICT_TO = 0.9  # after passing the bound, keep this share of it

P = ParamSpec("P")
T = TypeVar("T")
K = TypeVar("K")


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


def size_bound(given: int | str | None = None) -> int:
    """A cache's bound: `given` when not None, else `EOR_CACHE_MAX_BYTES` when set, else DEFAULT_MAX_BYTES."""
    if given is not None:
        return parse_size(given)
    value = os.environ.get(SIZE_VARIABLE)
    return parse_size(value) if value else DEFAULT_MAX_BYTES


def least_recently_used(entries: Iterable[tuple[K, int]], in_use: int, bound: int) -> list[K]:
    """The keys to evict from a cache whose entries hold `in_use` bytes against its `bound`: the first of
    `entries` ((key, bytes), least recently used first) whose bytes bring it down to EVICT_TO of the bound
    (none when it is there already). Reads no further than it needs."""
    excess = in_use - EVICT_TO * bound
    doomed: list[K] = []
    freed = 0
    for key, size in entries:
        if freed >= excess:
            break
        doomed.append(key)
        freed += size
    return doomed


@dataclass(frozen=True)
class BoundedTable:
    """An SQLite table of cache entries held under a bound: a row's bytes are the LENGTH of its `sized`
    columns, their sum is kept exact in a one-row table `usage` by triggers, and its column `used` holds the
    row's last read or write. The connection is in autocommit mode (`isolation_level=None`), with
    `recursive_triggers` on so that the delete of an `INSERT OR REPLACE` keeps `usage` exact."""

    table: str
    keys: tuple[str, ...]
    sized: tuple[str, ...]

    def entry_bytes(self, row: str) -> str:
        """The SQL expression of the bytes of the row `row` (the table's name, NEW or OLD)."""
        return "(" + " + ".join(f"COALESCE(LENGTH({row}.{column}), 0)" for column in self.sized) + ")"

    def usage_statements(self) -> tuple[str, ...]:
        """The table `usage`, filled from the rows there, and the triggers that keep it exact."""
        total = f"SELECT COALESCE(SUM({self.entry_bytes(self.table)}), 0) FROM {self.table}"
        return (
            "CREATE TABLE IF NOT EXISTS usage (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL)",
            f"INSERT OR IGNORE INTO usage VALUES (0, ({total}))",
            f"CREATE TRIGGER IF NOT EXISTS usage_insert AFTER INSERT ON {self.table} BEGIN "
            f"UPDATE usage SET bytes = bytes + {self.entry_bytes('NEW')} WHERE id = 0; END",
            f"CREATE TRIGGER IF NOT EXISTS usage_delete AFTER DELETE ON {self.table} BEGIN "
            f"UPDATE usage SET bytes = bytes - {self.entry_bytes('OLD')} WHERE id = 0; END",
        )

    def bytes_in_use(self, connection: sqlite3.Connection) -> int:
        row = connection.execute("SELECT bytes FROM usage WHERE id = 0").fetchone()
        return int(row[0]) if row else 0

    def evict(self, connection: sqlite3.Connection, bound: int) -> int:
        """Past `bound` bytes, delete the least recently used rows until the rest hold EVICT_TO of it (each
        round in one transaction; another process evicting at once is harmless); how many were deleted."""
        if self.bytes_in_use(connection) <= bound:
            return 0
        deleted = 0
        while True:
            rows = connection.execute(
                f"SELECT {', '.join(self.keys)}, {self.entry_bytes(self.table)} FROM {self.table} ORDER BY used"
            )
            entries = ((tuple(row[:-1]), int(row[-1])) for row in rows)
            doomed = least_recently_used(entries, self.bytes_in_use(connection), bound)
            rows.close()
            if not doomed:
                return deleted
            matching = " AND ".join(f"{key} = ?" for key in self.keys)
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany(f"DELETE FROM {self.table} WHERE {matching}", doomed)
            except BaseException:
                roll_back(connection)
                raise
            connection.execute("COMMIT")
            deleted += len(doomed)


def roll_back(connection: sqlite3.Connection) -> None:
    """ROLLBACK, unless SQLite already rolled the transaction back (as it does on a full disk)."""
    if connection.in_transaction:
        connection.execute("ROLLBACK")


@dataclass(frozen=True)
class CacheReport:
    """One persistent cache as `eor cache stats` lists it: its name and path, its entries, its size on disk
    and the part of it entries use, and its bound (None: never evicted). `found`: False when nothing was
    stored there yet (looking creates nothing)."""

    name: str
    path: str
    entries: int = 0
    bytes_on_disk: int = 0
    bytes_in_use: int = 0
    max_bytes: int | None = None
    found: bool = True

    @classmethod
    def kept(cls, name: str, folder: Path) -> CacheReport:
        """A folder that is never evicted (models, hashes), each of its files an entry."""
        if not folder.is_dir():
            return cls(name, str(folder), found=False)
        sizes = [size for file in folder.rglob("*") if (size := _file_size(file)) is not None]
        return cls(name, str(folder), len(sizes), sum(sizes), sum(sizes))

    def lines(self) -> list[str]:
        """Its lines in `eor cache stats`: name and path, entries, size (and bound)."""
        if not self.found:
            return [f"{self.name}: {self.path}", "entries: 0 (no file yet)"]
        size = f"size on disk: {format_size(self.bytes_on_disk)}"
        if self.max_bytes is None:
            size += " (never evicted; removed, it is made again when next needed)"
        else:
            share = 100 * self.bytes_in_use / self.max_bytes
            size += (
                f"; in use {format_size(self.bytes_in_use)} of a bound of {format_size(self.max_bytes)}"
                f" ({share:.0f}%; least recently used entries go first)"
            )
        return [f"{self.name}: {self.path}", f"entries: {self.entries}", size]


def _file_size(file: Path) -> int | None:
    """A file's size; None for a folder, or a file removed meanwhile (by an eviction, a build)."""
    try:
        return file.stat().st_size if file.is_file() else None
    except FileNotFoundError:
        return None


def format_size(count: float) -> str:
    """Bytes as `eor cache stats` prints them: `512 B`, `160.0 KB`, `4.0 GB` (powers of 1024)."""
    for unit in ("B", "KB", "MB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GB"


class Memo(Generic[P, T]):
    """A loader whose results are kept for the rest of the process, one per set of arguments (bound to its
    signature, defaults applied: `f("a")` and `f("a", device="cpu")` are one load). Thread-safe: the loads
    of one memo run one at a time, so two threads asking for the same model load it once. A load that
    raises keeps nothing."""

    def __init__(self, load: Callable[P, T]) -> None:
        self._load = load
        self._signature = inspect.signature(load)
        self._loaded: dict[tuple[Hashable, ...], T] = {}
        self._lock = threading.RLock()
        functools.update_wrapper(self, load)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T:
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key = tuple(bound.arguments.values())
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = self._load(*bound.args, **bound.kwargs)
            return self._loaded[key]


def memo(load: Callable[P, T]) -> Memo[P, T]:
    """Decorate a loader of models so that each is loaded once per process (see the module's docstring)."""
    return Memo(load)


class KeyedMemo(Generic[K, T]):
    """Values kept by a key their owner computes (a file's identity, an entry point group, a query), for the
    life of the memo: the process for a module's, its object's for one per instance; `keep` with a `bound`
    drops the oldest entry first when that many are kept. Thread-safe: each read or write holds one lock
    shared by every KeyedMemo, never while a value is made (so making one may use other memos), and a memo
    holds no lock of its own, so it copies and pickles with its owner."""

    _guard = threading.Lock()

    def __init__(self) -> None:
        self._kept: dict[K, T] = {}

    def get(self, key: K) -> T | None:
        with self._guard:
            return self._kept.get(key)

    def keep(self, key: K, value: T, bound: int | None = None) -> T:
        """Keep `value` under `key` (replacing what was there), after dropping the oldest entry when `bound`
        or more are kept; `value`."""
        with self._guard:
            if bound is not None and len(self._kept) >= bound:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = value
        return value

    def clear(self) -> None:
        with self._guard:
            self._kept.clear()


@dataclass(frozen=True)
class MemoEntry:
    """One in-process memo: its name (`module.NAME`, a `@memo` loader's `module.function`, or
    `module.Class.attribute` for one per instance), what keys it, what it holds, its bound, how it is cleared."""

    name: str
    keyed_by: str
    holds: str
    bound: str = "none: never evicted"
    cleared: str = "never: kept for the rest of the process"


#: every in-process memo (tests/test_architecture.py: each made by `memo` or `KeyedMemo`, each made listed)
MEMOS = (
    MemoEntry("eor.core.models.load_sentence_encoder", "model name, device", "a SentenceTransformer"),
    MemoEntry("retrievers.dense._tower", "encoder, pooling, max length", "a dense source's encoder"),
    MemoEntry("voters.similarity.nli._load", "model, device", "an NLI model's tokenizer and network"),
    MemoEntry("voters.similarity.bertscore._scorer", "model location, layers, device", "a BERTScorer"),
    MemoEntry("eor.readers.llamacpp._chunk_aligned_llama", "nothing (one entry)", "llama_cpp.Llama with prefix reuse"),
    MemoEntry(
        "eor.core.models._DIGESTS",
        "resolved path, size, modification time (ns)",
        "a model file's sha256",
        cleared="never (tests clear it)",
    ),
    MemoEntry(
        "retrievers.corpus._OPENED",
        "resolved path, size, modification time (ns), inode",
        "an opened corpus (its file descriptor and memory-mapped offsets)",
    ),
    MemoEntry("eor.core.plugins._LOADED", "entry point group", "the objects of its entry points that loaded"),
    MemoEntry(
        "retrievers.base.SourceRetriever._memo",
        "query",
        "a source's documents",
        bound="the source's `memo_size` entries, the oldest dropped first",
        cleared="with its source (a web source's views start empty)",
    ),
    MemoEntry(
        "retrievers.web.retriever.WebSearchRetriever._views",
        "the view's settings",
        "a copy of the web source with them",
        cleared="with its source (a view's own views start empty)",
    ),
    MemoEntry(
        "eor.runs.costs.PromptReplay._kept",
        "the member before (or None), the member",
        "per question, the prompt tokens kept",
        cleared="with its replay",
    ),
    MemoEntry(
        "voters.batch.VoteBatch._computed",
        "what was computed and with which settings (similarity metrics, blocks, correctness)",
        "the whole batch's arrays, shared by every batch taken from it",
        cleared="with its batch",
    ),
    MemoEntry(
        "voters.cascade_fit.StepScores._cache",
        "a subset of members",
        "its selectors' out-of-fold scores over the training rows",
        cleared="with the cascade's fit",
    ),
    MemoEntry(
        "eor.core.correctness.semantic.SemanticEquivalence._embeddings",
        "a normalised answer text",
        "its embedding",
        cleared="with its correctness function",
    ),
)
