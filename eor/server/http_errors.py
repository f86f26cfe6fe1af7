"""Every error the API returns is JSON `{"error": {"type", "message"}}` with a fitting status code and no
stack trace; the request body limit (413) lives here too, ahead of all parsing."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eor.core.errors import (
    ConfigError,
    EorError,
    InputError,
    MissingSecretError,
    ModelNotFoundError,
    NotFittedError,
    ReaderError,
    RetrieverError,
)
from eor.server.worker import BusyError, NotReadyError, ShuttingDownError

log = logging.getLogger(__name__)

#: the error type of each EorError class, with its status code (the first matching class wins).
EOR_ERRORS: list[tuple[type[EorError], int, str]] = [
    (InputError, 422, "invalid_request"),
    (ShuttingDownError, 503, "shutting_down"),
    (NotReadyError, 503, "not_ready"),
    (BusyError, 429, "too_many_requests"),
    (ReaderError, 503, "members_failed"),
    (RetrieverError, 503, "members_failed"),
    (ConfigError, 500, "server_error"),
    (ModelNotFoundError, 500, "server_error"),
    (MissingSecretError, 500, "server_error"),
    (NotFittedError, 500, "server_error"),
]
STATUS_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "request_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
}


class ApiError(Exception):
    """An error response: status code, type and message (plus headers such as Retry-After)."""

    def __init__(self, status: int, type: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.headers = headers


def error_response(status: int, type: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"type": type, "message": message}}, status_code=status, headers=headers)


def from_eor_error(exc: EorError) -> ApiError:
    for cls, status, kind in EOR_ERRORS:
        if isinstance(exc, cls):
            message = str(exc) if status < 500 else str(exc).splitlines()[0]
            headers = {"Retry-After": "5"} if status in (429, 503) else None
            return ApiError(status, kind, message, headers)
    return ApiError(500, "server_error", str(exc).splitlines()[0])


def validation_message(errors: list[dict[str, Any]]) -> tuple[int, str, str]:
    """(status, type, message) for FastAPI's request validation errors: the first three, one line."""
    if any(error.get("type") == "json_invalid" for error in errors):
        return 400, "invalid_json", "the request body is not valid JSON"
    parts = []
    for error in errors[:3]:
        location = [str(part) for part in error.get("loc", ()) if part != "body"]
        if not location and error.get("type") in ("missing", "model_attributes_type", "dict_type"):
            parts.append("the request body must be a JSON object (Content-Type: application/json)")
            continue
        message = str(error.get("msg", "invalid value"))
        parts.append(f"{'.'.join(location)}: {message}" if location else message)
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return 422, "invalid_request", "; ".join(parts) + more


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.type, exc.message, exc.headers)

    @app.exception_handler(EorError)
    async def eor_error(request: Request, exc: EorError) -> JSONResponse:
        error = from_eor_error(exc)
        if error.status >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, error.message)
        return error_response(error.status, error.type, error.message, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, kind, message = validation_message(list(exc.errors()))
        return error_response(status, kind, message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = STATUS_TYPES.get(exc.status_code, "server_error" if exc.status_code >= 500 else "bad_request")
        message = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path} (see /docs)"
        return error_response(exc.status_code, kind, message, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal_error", "internal server error; the server log has the details")


class BodyLimit:
    """Answers 413 to a request whose body is larger than `limit` bytes, before any of it is parsed.

    A declared Content-Length over the limit is refused at once; a chunked body is counted as it arrives.
    The body is read whole (it is small) and handed on to the application.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, "request_too_large", f"the request body is larger than the limit of {self.limit} bytes"
        )
        response.headers["Connection"] = "close"
        await response(scope, receive, send)
