"""Page fetching over HTTP(S) with `requests`: per-request timeout, byte cap, content-type check, and
redirects followed by hand (at most `max_redirects`) so that the URL guard checks every hop.

`fetch(url)` raises on any failure; `fetch_many(urls)` fetches concurrently in a bounded thread pool and
returns each URL's page or error, so one bad page never fails a query.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, overload
from urllib.parse import urljoin

from eor.core.errors import RetrieverError
from eor.core.retry import RetryPolicy, send_with_retries
from retrievers.web.guard import UrlGuard

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
DEFAULT_USER_AGENT = "eor-web-search/0.1 (+https://github.com/; question answering research)"
_CHUNK_BYTES = 65536
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_HTML_START = re.compile(rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)", re.IGNORECASE | re.DOTALL)

T = TypeVar("T")
R = TypeVar("R")


class PageFetchError(RetrieverError):
    """A page could not be fetched: network error, timeout, HTTP error, wrong content type, too large."""


@dataclass(frozen=True)
class FetchedPage:
    """A fetched response body: `final_url` is where the redirects ended; `body` is decoded text."""

    url: str
    final_url: str
    content_type: str
    body: str


class PageFetcher:
    """Fetches pages that the guard allows; thread-safe (every fetch uses its own session)."""

    def __init__(
        self,
        guard: UrlGuard,
        *,
        timeout: float = 10.0,
        max_bytes: int = 2_000_000,
        max_redirects: int = 5,
        workers: int = 8,
        content_types: Iterable[str] = TEXT_TYPES,
        user_agent: str = DEFAULT_USER_AGENT,
        retries: Any = None,
    ) -> None:
        """retries: attempts per hop, or an eor.core.retry.RetryPolicy mapping (default 3 attempts, 60 s)."""
        self.guard = guard
        self.retries = RetryPolicy.of(retries if retries is not None else RetryPolicy())
        self.timeout = float(timeout)
        self.max_bytes = int(max_bytes)
        self.max_redirects = int(max_redirects)
        self.workers = int(workers)
        self.content_types = tuple(content_types)
        self.user_agent = user_agent

    def policy(self) -> dict[str, Any]:
        """What decides which pages come back (guard, caps): part of the page cache's key."""
        return {
            **self.guard.policy(),
            "max_bytes": self.max_bytes,
            "max_redirects": self.max_redirects,
            "content_types": sorted(self.content_types),
        }

    def fetch(self, url: str) -> FetchedPage:
        """The page at `url`; UrlRefusedError for a refused URL or hop, PageFetchError for other failures."""
        import requests

        current, previous = url, None
        headers = {"User-Agent": self.user_agent, "Accept": ", ".join(self.content_types)}
        for _ in range(self.max_redirects + 1):
            address = self.guard.check(current, via=previous)
            started = time.monotonic()
            # Each hop connects to the address its check returned: the name is not resolved again.
            with pinned_session(address) as session:
                get = partial(
                    session.get, current, headers=headers, stream=True, allow_redirects=False, timeout=self.timeout
                )
                try:
                    response = send_with_retries(
                        get,
                        self.retries,
                        what=f"fetch {current}",
                        read_timeouts=False,  # a page that did not answer in time is one of many: not asked again
                    )
                except requests.Timeout:
                    raise PageFetchError(f"cannot fetch {current}: no answer within {self.timeout:g} s") from None
                except requests.RequestException as exc:
                    raise PageFetchError(f"cannot fetch {current}: {type(exc).__name__}") from None
                with response:
                    if response.status_code in REDIRECT_CODES:
                        location = response.headers.get("Location")
                        if not location:
                            raise PageFetchError(f"cannot fetch {current}: redirect without a Location header")
                        current, previous = urljoin(current, location), current
                        continue
                    return self._page(url, current, response, started)
        raise PageFetchError(f"cannot fetch {url}: more than {self.max_redirects} redirects")

    @overload
    def fetch_many(self, urls: list[str]) -> dict[str, FetchedPage | Exception]: ...
    @overload
    def fetch_many(self, urls: list[str], fetch: Callable[[str], T]) -> dict[str, T | Exception]: ...
    def fetch_many(self, urls: list[str], fetch: Callable[[str], Any] | None = None) -> dict[str, Any]:
        """Each URL's result (or the exception it raised), fetched by at most `workers` threads."""
        return map_concurrently(fetch or self.fetch, urls, self.workers)

    def _page(self, url: str, final_url: str, response: Any, started: float) -> FetchedPage:
        if not 200 <= response.status_code < 300:
            raise PageFetchError(f"cannot fetch {final_url}: HTTP {response.status_code}")
        header = response.headers.get("Content-Type", "")
        content_type = header.split(";", 1)[0].strip().lower()
        if content_type and content_type not in self.content_types:
            raise PageFetchError(
                f"cannot fetch {final_url}: content type {content_type} is not one of {', '.join(self.content_types)}"
            )
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            raise PageFetchError(f"cannot fetch {final_url}: {length} bytes is over the {self.max_bytes}-byte cap")
        raw = self._read(final_url, response, started)
        if not content_type:
            if not _HTML_START.match(raw[:4096]):
                raise PageFetchError(f"cannot fetch {final_url}: no content type and the body is not HTML")
            content_type = "text/html"
        return FetchedPage(url=url, final_url=final_url, content_type=content_type, body=_decode(raw, header))

    def _read(self, url: str, response: Any, started: float) -> bytes:
        """The body, read with `read1` so that a server trickling bytes still meets the deadline."""
        from urllib3.exceptions import HTTPError as Urllib3Error
        from urllib3.exceptions import ReadTimeoutError

        parts, size = [], 0
        try:
            while chunk := response.raw.read1(_CHUNK_BYTES, decode_content=True):
                size += len(chunk)
                if size > self.max_bytes:
                    raise PageFetchError(f"cannot fetch {url}: the page is over the {self.max_bytes}-byte cap")
                if time.monotonic() - started > self.timeout:
                    raise PageFetchError(f"cannot fetch {url}: not complete within {self.timeout:g} s")
                parts.append(chunk)
        except (ReadTimeoutError, TimeoutError):
            raise PageFetchError(f"cannot fetch {url}: no answer within {self.timeout:g} s") from None
        except (Urllib3Error, OSError) as exc:
            raise PageFetchError(f"cannot fetch {url}: {type(exc).__name__} while reading the body") from None
        return b"".join(parts)


def pinned_session(address: Any) -> Any:
    """A requests session whose connections go to `address` (an IP address) whatever the URL's host name
    resolves to at connection time; the Host header, TLS SNI and certificate check keep the name. None: a
    plain session."""
    import requests

    session = requests.Session()
    if address is not None:
        session.trust_env = False  # no proxy from the environment: it would resolve the name itself
        adapter = _pinned_adapter(str(address))
        session.mount("http://", adapter)
        session.mount("https://", adapter)
    return session


def _pinned_adapter(address: str) -> Any:
    """A requests transport adapter whose connections (HTTP and HTTPS) go to `address`: urllib3 connects to
    a connection's `_dns_host`, and sends `host` (the name) as Host header, TLS SNI and certificate name."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class PinnedHTTPConnection(HTTPConnection):
        def _new_conn(self):  # noqa: ANN202 - urllib3's socket
            self._dns_host = address
            return super()._new_conn()

    class PinnedHTTPSConnection(HTTPSConnection):
        def _new_conn(self):  # noqa: ANN202
            self._dns_host = address
            return super()._new_conn()

    class PinnedHTTPPool(HTTPConnectionPool):
        ConnectionCls = PinnedHTTPConnection

    class PinnedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = PinnedHTTPSConnection

    class PinnedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": PinnedHTTPPool, "https": PinnedHTTPSPool}

    return PinnedAdapter()


def map_concurrently(function: Callable[[T], R], items: list[T], workers: int) -> dict[T, R | Exception]:
    """`function` over distinct `items` in a bounded thread pool; an item's exception becomes its result."""
    unique = list(dict.fromkeys(items))
    if not unique:
        return {}

    def safe(item: T) -> R | Exception:
        try:
            return function(item)
        except Exception as exc:  # noqa: BLE001 - returned to the caller, which decides what to raise
            return exc

    if len(unique) == 1 or workers <= 1:
        return {item: safe(item) for item in unique}
    with ThreadPoolExecutor(max_workers=min(workers, len(unique)), thread_name_prefix="eor-web") as pool:
        return dict(zip(unique, pool.map(safe, unique), strict=True))


def _decode(raw: bytes, content_type_header: str) -> str:
    charset = None
    match = re.search(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", content_type_header, re.IGNORECASE)
    if match:
        charset = match.group(1)
    elif meta := _META_CHARSET.search(raw[:4096]):
        charset = meta.group(1).decode("ascii", "replace")
    try:
        return raw.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")
