"""The search-backend registry (eor.core.registry): the `backend:` of a web source names one. eor's own, Serper
(the paper's Google search) and SearXNG, are registered here; other code adds one with `search_backend`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eor.core.errors import ConfigError
from eor.core.registry import Registry
from retrievers.web.search import BackendFactory, SearchBackend
from retrievers.web.searxng import SearxngBackend
from retrievers.web.serper import SerperBackend

SEARCH_BACKENDS: Registry[BackendFactory] = Registry("search backend")
SEARCH_BACKENDS.register("serper", SerperBackend)
SEARCH_BACKENDS.register("searxng", SearxngBackend)


def search_backend(name: str, *, replace: bool = False) -> Callable[[BackendFactory], BackendFactory]:
    """Register a backend class or factory under `name` (a decorator)."""
    return SEARCH_BACKENDS.add(name, replace=replace)


def available_backends() -> list[str]:
    return sorted(SEARCH_BACKENDS)


def make_backend(name: str, **params: Any) -> SearchBackend:
    """Build the backend registered as `name`; unknown names and parameters fail with the valid ones."""
    if name not in SEARCH_BACKENDS:
        raise ConfigError(f"unknown search backend {name!r}; available: {', '.join(available_backends())}")
    factory = SEARCH_BACKENDS[name]
    valid = getattr(factory, "PARAMETERS", None)
    if valid is not None:
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise ConfigError(
                f"search backend {name!r}: unknown parameter(s) {', '.join(unknown)}; valid: {', '.join(valid)}"
            )
    return factory(**params)
