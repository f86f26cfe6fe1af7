"""The HTTP service of `eor serve`: `POST /v1/answer`, the OpenAI-compatible `POST /v1/chat/completions` and
`GET /v1/models`, `GET /healthz`, and OpenAPI docs at `/docs`.

Modules: `settings` (limits, timeouts, the API key), `worker` (the one thread that owns the ensemble and
answers queued questions in batches), `schemas` (request and response bodies), `http_errors` (JSON errors and
the request body limit), `app` (the FastAPI application), `documents` (the imported files), `reports` (the
benchmark reports), `explorer` (the explorer page's routes; the page's files are in `explorer_page/`),
`serving` (`eor serve`: the config checked, then uvicorn). FastAPI and uvicorn are imported only when an
application is built, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eor.server.settings import ServerSettings, api_key_from_env

__all__ = ["ServerSettings", "api_key_from_env", "create_app", "serve"]

if TYPE_CHECKING:
    from eor.server.app import create_app
    from eor.server.serving import serve


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from eor.server.app import create_app

        return create_app
    if name == "serve":
        from eor.server.serving import serve

        return serve
    raise AttributeError(f"module 'eor.server' has no attribute {name!r}")
