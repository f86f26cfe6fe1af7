"""SearXNG, the self-hostable metasearch engine: `GET {base_url}/search?q=...&format=json` (the instance
must enable the json format); results are the response's `results` list (`url`, `title`, `content`)."""

from __future__ import annotations

from typing import Any

from eor.core.errors import ConfigError
from eor.core.retry import RetryPolicy, send_with_retries
from retrievers.web.search import SearchHit, hits_from, json_response, request_failed

DEFAULT_BASE_URL = "http://127.0.0.1:8888"


class SearxngBackend:
    """Results of a SearXNG instance; `options` adds query parameters such as `language`, `categories`."""

    PARAMETERS = ("base_url", "num", "timeout", "options", "retries")

    def __init__(
        self,
        base_url: str | None = None,
        num: int = 10,
        timeout: float = 15.0,
        options: dict[str, Any] | None = None,
        retries: Any = None,
    ) -> None:
        self.retries = RetryPolicy.of(retries if retries is not None else RetryPolicy())
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.num = int(num)
        self.timeout = float(timeout)
        self.options = {str(key): str(value) for key, value in (options or {}).items()}
        if {"q", "format"} & set(self.options):
            raise ConfigError("searxng options may not set 'q' or 'format'")

    def __repr__(self) -> str:
        return f"SearxngBackend(base_url={self.base_url!r}, num={self.num})"

    def identity(self) -> dict[str, Any]:
        return {"backend": "searxng", "base_url": self.base_url, "num": self.num, "options": self.options}

    def search(self, query: str) -> list[SearchHit]:
        import requests

        url = f"{self.base_url}/search"
        try:
            response = send_with_retries(
                lambda: requests.get(url, params={"q": query, "format": "json", **self.options}, timeout=self.timeout),
                self.retries,
                what=f"searxng search {url}",
            )
        except requests.RequestException as exc:
            raise request_failed("searxng", url, exc) from None
        data = json_response(response, "searxng")
        results = data.get("results") if isinstance(data, dict) else None
        return hits_from(results, url="url", snippet="content", limit=self.num)
