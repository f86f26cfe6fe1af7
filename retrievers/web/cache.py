"""The web cache: search results and fetched pages as JSON files under `cache_dir()/web/`, so that a
benchmark over web search re-runs exactly and without HTTP requests.

Search results are keyed by the backend's identity (name, endpoint, result count, options) and the
query; pages by URL and the fetch policy (guard, byte cap, redirects, content types), so a page refused
under one policy is not served under another.  Failed fetches are stored too (a re-run skips the same
pages).  Files hold no secrets: identities exclude API keys.  `refresh=True` ignores what was on disk
before this cache object was made (entries it writes itself are reused, so sources sharing it fetch once).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from eor.atomic import write_text_atomically
from eor.models import cache_dir

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1


class WebCache:
    """JSON files `search/<aa>/<sha256>.json` and `pages/<aa>/<sha256>.json` under `root`."""

    def __init__(self, root: str | Path | None = None, *, refresh: bool = False, enabled: bool = True) -> None:
        if root is None:
            root = cache_dir() / "web"
        self.root = Path(root).expanduser()
        self.refresh = refresh
        self.enabled = enabled
        self._written: set[Path] = set()
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
        return record

    def _write(self, kind: str, key: dict[str, Any], content: dict[str, Any]) -> None:
        if not self.enabled:
            return
        path = self.path(kind, key)
        stored_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        record = {"version": FORMAT_VERSION, "key": key, "stored_at": stored_at, **content}
        write_text_atomically(path, json.dumps(record, ensure_ascii=False, indent=1))
        with self._lock:
            self._written.add(path)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
