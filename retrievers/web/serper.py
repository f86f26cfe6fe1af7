"""Serper (google.serper.dev), the paper's Google search: `POST {base_url}/search` with `{"q", "num"}`
and the key in the `X-API-KEY` header; results are the response's `organic` list."""

from __future__ import annotations

from typing import Any

from eor.core.errors import ConfigError, RetrieverError
from eor.core.retry import RetryPolicy, send_with_retries
from retrievers.web.search import (
    SearchHit,
    hits_from,
    json_response,
    request_failed,
    secret_from_env,
)

DEFAULT_BASE_URL = "https://google.serper.dev"


class SerperBackend:
    """Google results through Serper; `options` adds request fields such as `gl` (country), `hl` (language)."""

    PARAMETERS = ("base_url", "api_key_env", "num", "timeout", "options", "retries")

    def __init__(
        self,
        base_url: str | None = None,
        api_key_env: str | None = None,
        num: int = 10,
        timeout: float = 15.0,
        options: dict[str, Any] | None = None,
        retries: Any = None,
    ) -> None:
        self.retries = RetryPolicy.of(retries if retries is not None else RetryPolicy())
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.api_key_env = api_key_env or "SERPER_API_KEY"
        self.num = int(num)
        self.timeout = float(timeout)
        self.options = dict(options or {})
        if {"q", "num"} & set(self.options):
            raise ConfigError("serper options may not set 'q' or 'num' (use the query and num_results)")

    def __repr__(self) -> str:
        return f"SerperBackend(base_url={self.base_url!r}, api_key_env={self.api_key_env!r}, num={self.num})"

    def identity(self) -> dict[str, Any]:
        return {"backend": "serper", "base_url": self.base_url, "num": self.num, "options": self.options}

    def search(self, query: str) -> list[SearchHit]:
        import requests

        key = secret_from_env(self.api_key_env, "serper")
        url = f"{self.base_url}/search"
        try:
            response = send_with_retries(
                lambda: requests.post(
                    url,
                    json={"q": query, "num": self.num, **self.options},
                    headers={"X-API-KEY": key, "Content-Type": "application/json"},
                    timeout=self.timeout,
                ),
                self.retries,
                what=f"serper search {url}",
            )
        except requests.RequestException as exc:
            raise request_failed("serper", url, exc, key) from None
        if response.status_code in (401, 403):
            raise RetrieverError(
                f"search backend 'serper' rejected the API key in {self.api_key_env} (HTTP {response.status_code})"
            )
        data = json_response(response, "serper", key)
        organic = data.get("organic") if isinstance(data, dict) else None
        return hits_from(organic, url="link", snippet="snippet", limit=self.num)
