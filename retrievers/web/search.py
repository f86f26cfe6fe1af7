"""Search backends: the protocol `search(query) -> list[SearchHit]` and the name -> backend registry.

A backend also describes itself with `identity()`: the plain data that decides its results (backend
name, endpoint, result count, options) and never its API key; the search cache is keyed by it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from eor.core.errors import MissingSecretError, RetrieverError


@dataclass(frozen=True)
class SearchHit:
    """One organic search result; `rank` starts at 1."""

    url: str
    title: str
    snippet: str
    rank: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchHit:
        return cls(url=str(data["url"]), title=str(data["title"]), snippet=str(data["snippet"]), rank=int(data["rank"]))


@runtime_checkable
class SearchBackend(Protocol):
    """What the web-search retriever needs from a search engine."""

    def search(self, query: str) -> list[SearchHit]: ...

    def identity(self) -> dict[str, Any]: ...


BackendFactory = Callable[..., SearchBackend]


def secret_from_env(variable: str, backend: str) -> str:
    """The API key held by environment variable `variable`; MissingSecretError when it is unset."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise MissingSecretError(
            f"search backend {backend!r} needs an API key: set the environment variable {variable} "
            f"(the config's api_key_env names it)"
        )
    return value


def json_response(response: Any, backend: str, secret: str | None = None) -> Any:
    """The JSON body of a search response, or a RetrieverError that says what the server answered."""
    if response.status_code != 200:
        detail = scrub(response.text[:200].strip(), secret)
        raise RetrieverError(f"search backend {backend!r} answered HTTP {response.status_code}: {detail}")
    try:
        return response.json()
    except ValueError:
        raise RetrieverError(f"search backend {backend!r} did not answer JSON") from None


def hits_from(items: Any, url: str, snippet: str, limit: int) -> list[SearchHit]:
    """The first `limit` results of a backend's result list, ranked from 1: the entries that are objects with
    a non-empty `url` field (the name differs per engine), their `title` and `snippet` fields as text."""
    hits: list[SearchHit] = []
    for item in items if isinstance(items, list) else []:
        if len(hits) == limit:
            break
        if isinstance(item, dict) and item.get(url):
            title, text = str(item.get("title") or ""), str(item.get(snippet) or "")
            hits.append(SearchHit(url=str(item[url]), title=title, snippet=text, rank=len(hits) + 1))
    return hits


def request_failed(backend: str, url: str, exc: Exception, secret: str | None = None) -> RetrieverError:
    """A RetrieverError for a search request that got no answer (connection refused, timeout, ...)."""
    detail = scrub(str(exc), secret)[:300]
    return RetrieverError(f"search backend {backend!r}: request to {url} failed ({type(exc).__name__}: {detail})")


def scrub(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` masked, so a server that echoes the key cannot leak it."""
    return text.replace(secret, "***") if secret else text
