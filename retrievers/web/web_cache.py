"""The web cache: search results and fetched pages as JSON files under `cache_dir()/web/`, so that a
benchmark over web search re-runs exactly and without HTTP requests.

Search results are keyed by the backend's identity (name, endpoint, result count, options) and the
query; pages by URL and the fetch policy (guard, byte cap, redirects, content types), so a page refused
under one policy is not served under another.  Failed fetches are stored too (a re-run skips the same
pages).  Files hold no secrets: identities exclude API keys.  `refresh=True` ignores what was on disk
before this cache object was made (entries it writes itself are reused, so sources sharing it fetch once).

Bounded as every cache is (eor.core.cache_policy): an entry's bytes are its file's size, and its last use (read
or write) is its file's modification time (a read touches the file).  The files are scanned at this object's
first write, and their total then grows with its writes; once that total passes `max_bytes` (else
`EOR_CACHE_MAX_BYTES`, else 4 GB), a new scan (other processes' writes included) decides, and the least
recently used files are deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from eor.core.atomic import write_text_atomically
from eor.core.cache_policy import CacheReport, least_recently_used, size_bound
from eor.core.models import cache_dir

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
KINDS = ("search", "pages")


class _Entry(NamedTuple):
    path: Path
    size: int
    used: float  # the file's modification time: its last read or write


class WebCache:
    """JSON files `search/<aa>/<sha256>.json` and `pages/<aa>/<sha256>.json` under `root` (default
    `cache_dir()/web`), held under `max_bytes` (see the module)."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        refresh: bool = False,
        enabled: bool = True,
        max_bytes: int | str | None = None,
    ) -> None:
        if root is None:
            root = cache_dir() / "web"
        self.root = Path(root).expanduser()
        self.refresh = refresh
        self.enabled = enabled
        self.max_bytes = size_bound(max_bytes)
        self._written: set[Path] = set()
        self._in_use: int | None = None  # the files' bytes as far as this object knows (None: not scanned)
        self._lock = threading.Lock()

    def get_search(self, identity: dict[str, Any], query: str) -> list[dict[str, Any]] | None:
        record = self._read("search", {"identity": identity, "query": query})
        return None if record is None else list(record["hits"])

    def put_search(self, identity: dict[str, Any], query: str, hits: list[dict[str, Any]]) -> None:
        self._write("search", {"identity": identity, "query": query}, {"hits": hits})

    def get_page(self, url: str, policy: dict[str, Any]) -> dict[str, Any] | None:
        record = self._read("pages", {"url": url, "policy": policy})
        return None if record is None else dict(record["page"])

    def put_page(self, url: str, policy: dict[str, Any], page: dict[str, Any]) -> None:
        self._write("pages", {"url": url, "policy": policy}, {"page": page})

    def path(self, kind: str, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(_canonical(key).encode()).hexdigest()
        return self.root / kind / digest[:2] / f"{digest}.json"

    def _read(self, kind: str, key: dict[str, Any]) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        path = self.path(kind, key)
        if self.refresh:
            with self._lock:
                if path not in self._written:
                    return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable web cache file %s: %s", path, exc)
            return None
        if not isinstance(record, dict) or record.get("version") != FORMAT_VERSION:
            return None
        if _canonical(record.get("key")) != _canonical(key):
            return None  # (vanishingly unlikely) a hash collision
        _touch(path)
        return record

    def _write(self, kind: str, key: dict[str, Any], content: dict[str, Any]) -> None:
        if not self.enabled:
            return
        path = self.path(kind, key)
        stored_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        record = {"version": FORMAT_VERSION, "key": key, "stored_at": stored_at, **content}
        text = json.dumps(record, ensure_ascii=False, indent=1)
        write_text_atomically(path, text)
        with self._lock:
            self._written.add(path)
            self._bound(len(text.encode("utf-8")))

    def _bound(self, written: int) -> None:
        """Count a write of `written` bytes; on the first write, or once past max_bytes, scan the files, and
        past max_bytes still, delete the least recently used until the rest hold EVICT_TO of it."""
        if self._in_use is not None and self._in_use + written <= self.max_bytes:
            self._in_use += written
            return
        entries = sorted(self._entries(), key=lambda entry: entry.used)
        self._in_use = sum(entry.size for entry in entries)
        if self._in_use <= self.max_bytes:
            return
        doomed = least_recently_used(((entry, entry.size) for entry in entries), self._in_use, self.max_bytes)
        for entry in doomed:
            entry.path.unlink(missing_ok=True)
            self._in_use -= entry.size
        logger.info(
            "web cache %s: %d least recently used files deleted (bound %d bytes)",
            self.root,
            len(doomed),
            self.max_bytes,
        )

    def _entries(self) -> list[_Entry]:
        found = []
        for kind in KINDS:
            for path in (self.root / kind).glob("*/*.json"):
                try:
                    info = path.stat()
                except FileNotFoundError:  # deleted meanwhile (another process's eviction)
                    continue
                found.append(_Entry(path, info.st_size, info.st_mtime))
        return found

    def report(self) -> CacheReport:
        """Its lines in `eor cache stats` (looking creates nothing)."""
        if not self.root.is_dir():
            return CacheReport("web cache", str(self.root), max_bytes=self.max_bytes, found=False)
        entries = self._entries()
        total = sum(entry.size for entry in entries)
        return CacheReport("web cache", str(self.root), len(entries), total, total, self.max_bytes)

    def clear(self) -> int:
        """Delete every entry; how many were deleted."""
        with self._lock:
            entries = self._entries()
            for entry in entries:
                entry.path.unlink(missing_ok=True)
            self._in_use = 0
        return len(entries)


def _touch(path: Path) -> None:
    """Note a read as the file's last use; a cache on a read-only disk is read as it is."""
    try:
        os.utime(path)
    except OSError:
        pass


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
