"""The FastAPI application: answer, OpenAI-compatible chat completions and models, health, docs, and the
explorer page with its reports (eor.server.explorer).

`create_app(config, settings, loader=...)` builds it; the models load on a worker thread started by the
lifespan hook, so the server answers /healthz (503 "loading") at once and 200 once they are ready.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

import eor
from eor.core.config import EnsembleConfig
from eor.core.data import Question, make_question
from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.pipeline import validation
from eor.pipeline.ensemble import Ensemble
from eor.server.documents import DocumentFolder, add_document_route
from eor.server.explorer import add_explorer
from eor.server.http_errors import ApiError, BodyLimit, install_error_handlers
from eor.server.schemas import (
    AnswerRequest,
    AnswerResponse,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    ErrorBody,
    Health,
    ModelList,
)
from eor.server.settings import ServerSettings
from eor.server.worker import READY, Answered, EnsembleWorker

log = logging.getLogger(__name__)

DEFAULT_MODEL = "eor"
#: how often a waiting request checks whether its client is still connected (seconds).
DISCONNECT_POLL_SECONDS = 1.0
# Module level: FastAPI reads the (postponed) annotations of dependencies in this module's namespace.
BEARER = HTTPBearer(auto_error=False, description="the key of --api-key-env, when the server has one")


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody} for code in codes}


def create_app(
    config: EnsembleConfig,
    settings: ServerSettings | None = None,
    *,
    loader: Callable[[], Any] | None = None,
    on_load_error: Callable[[BaseException], None] | None = None,
) -> FastAPI:
    """The application serving the ensemble that `loader()` builds (default: `Ensemble(config)`, the config
    validated here); a caller's `loader` comes with a config its own door validated (`eor serve`'s)."""
    settings = settings or ServerSettings()
    worker = EnsembleWorker(loader or _default_loader(config), settings, on_load_error)
    models = list(dict.fromkeys([DEFAULT_MODEL, config.name]))
    app = FastAPI(
        title="eor",
        version=eor.__version__,
        summary="Ensemble of Retrievers question answering",
        description=(
            "Several retrievers feed one reader LLM; a voter picks the best-supported answer. "
            "`POST /v1/answer` returns every member's answer and the vote; `POST /v1/chat/completions` speaks "
            "OpenAI's protocol. A member that fails or runs late is left out of the vote and named in "
            '`degraded`. Errors are `{"error": {"type", "message"}}`.'
        ),
        lifespan=_lifespan(worker),
    )
    app.state.worker = worker
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    _document_limits(app, config, settings)
    v1 = [Depends(_authoriser(settings))]
    add_explorer(app, settings, v1)
    add_document_route(app, DocumentFolder.of(config), v1)
    _add_answer_routes(app, worker, settings, models, v1, config.voter.risk)
    _add_model_routes(app, models, v1)
    _add_health_route(app, worker, models)
    return app


def _default_loader(config: EnsembleConfig) -> Callable[[], Any]:
    """`Ensemble(config)`, built on the worker thread; the config is validated now, `create_app` its door
    (eor.pipeline.validation), so a mistake fails `create_app` rather than every request."""
    validation.validate(config)

    def load() -> Any:
        return Ensemble(config, validated=True)

    return load


def _lifespan(worker: EnsembleWorker) -> Callable[[FastAPI], Any]:
    """The worker thread runs while the application does."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:
            worker.stop()

    return lifespan


def _authoriser(settings: ServerSettings) -> Callable[..., Any]:
    """The dependency that checks the bearer key of a /v1 request (when the server has one)."""

    async def authorised(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]) -> None:
        if settings.api_key is None:
            return
        given = credentials.credentials.encode() if credentials is not None else b""
        if not hmac.compare_digest(given, settings.api_key.encode()):
            raise ApiError(
                401,
                "unauthorized",
                "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                {"WWW-Authenticate": "Bearer"},
            )

    return authorised


async def _answered(
    worker: EnsembleWorker,
    settings: ServerSettings,
    request: Request,
    question: str,
    members: list[str] | None,
    explain: bool = False,
    risk: float | None = None,
    default_risk: float | None = None,
) -> Answered:
    """Queue the question and wait for its answer: 504 past the request timeout; a client that hangs up
    while its question waits takes the question out of the queue."""
    item = _question(question, settings)
    if worker.state == READY:
        _check_members(worker.ensemble, members, settings)
        risk = default_risk if risk is None else risk
        if risk is not None:  # 422 before the question queues
            worker.ensemble.check_risk(risk, every_member=not settings.lazy or members is not None)
    waiting = asyncio.wrap_future(worker.submit(item, members, explain, risk))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.request_timeout
    while (remaining := deadline - loop.time()) > 0:
        done, _ = await asyncio.wait({waiting}, timeout=min(remaining, DISCONNECT_POLL_SECONDS))
        if done:
            return waiting.result()
        if await request.is_disconnected():
            waiting.cancel()
            raise ApiError(499, "client_closed_request", "the client closed the connection")
    waiting.cancel()  # dropped if still queued
    raise ApiError(
        504,
        "timeout",
        f"no answer within the request timeout of {settings.request_timeout:g} s; try again, or ask for fewer members",
    )


def _add_answer_routes(
    app: FastAPI,
    worker: EnsembleWorker,
    settings: ServerSettings,
    models: list[str],
    v1: list[Any],
    default_risk: float | None,
) -> None:
    """The answer and chat routes; `default_risk`: the config's `voter.risk`, for requests without a risk."""

    @app.post(
        "/v1/answer",
        response_model=AnswerResponse,
        responses=_errors(401, 413, 422, 429, 503, 504),
        dependencies=v1,
        tags=["answer"],
        summary="Answer a question with the ensemble",
    )
    async def answer(body: AnswerRequest, request: Request) -> JSONResponse:
        result = await _answered(
            worker, settings, request, body.question, body.members, body.explain, body.risk, default_risk
        )
        return JSONResponse(_result_body(result, body.return_passages))

    @app.post(
        "/v1/chat/completions",
        response_model=ChatResponse,
        responses=_errors(401, 404, 413, 422, 429, 503, 504),
        dependencies=v1,
        tags=["openai"],
        summary="OpenAI-compatible chat completion: the last user message is the question",
    )
    async def chat(body: ChatRequest, request: Request) -> Any:
        if body.model not in models:
            raise ApiError(404, "model_not_found", f"unknown model {body.model!r}; available: {', '.join(models)}")
        question = _last_user_message(body.messages)
        result = await _answered(
            worker, settings, request, question, body.members, risk=body.risk, default_risk=default_risk
        )
        completion = _completion(body.model, result, body.return_passages)
        if body.stream:
            return StreamingResponse(_stream(completion), media_type="text/event-stream")
        return JSONResponse(completion)


def _completion(model: str, result: Answered, passages: bool) -> dict[str, Any]:
    """OpenAI's chat completion object holding the chosen answer, with eor's whole result under `eor` (its
    `probability`, and where eor abstained `abstained` and `abstention`)."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": _content(result.result)}, "finish_reason": "stop"}
        ],
        "usage": _usage(result.result),
        "eor": _result_body(result, passages),
    }


def _usage(result: Any) -> dict[str, Any] | None:
    """OpenAI's `usage`: the reader's tokens summed over the members that ran, from their counts (prompt
    tokens in all, those kept from an earlier prompt as `cached_tokens`; generated as completion tokens);
    None when a member's counts are unknown (a document it generated was read from the cache; some servers
    give none), since a partial sum would pass for the total."""
    counted = [output.tokens for output in result.members.values()]
    if not counted or any(tokens is None for tokens in counted):  # a partial sum would pass for the total
        return None
    prompt = sum(tokens["prompt"] + tokens.get("reused", 0) for tokens in counted)
    generated = sum(tokens["generated"] for tokens in counted)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": generated,
        "total_tokens": prompt + generated,
        "prompt_tokens_details": {"cached_tokens": sum(tokens.get("reused", 0) for tokens in counted)},
    }


def _content(result: Any) -> str:
    """The assistant's message: the answer, or "I don't know." where eor abstained (`eor.pipeline.abstention`
    says why)."""
    return "I don't know." if result.abstained else result.answer


def _add_model_routes(app: FastAPI, models: list[str], v1: list[Any]) -> None:
    started = int(time.time())

    @app.get("/v1/models", response_model=ModelList, responses=_errors(401), dependencies=v1, tags=["openai"])
    async def list_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": name, "object": "model", "created": started, "owned_by": "eor"} for name in models],
        }


def _add_health_route(app: FastAPI, worker: EnsembleWorker, models: list[str]) -> None:
    @app.get(
        "/healthz",
        response_model=Health,
        responses={503: {"model": Health, "description": "loading, draining, failed or stopped"}},
        tags=["health"],
        summary="200 once the models are loaded, 503 before",
    )
    async def health() -> JSONResponse:
        body: dict[str, Any] = {"status": "ok" if worker.state == READY else worker.state, "models": models}
        if worker.state == READY:
            body.update(members=worker.ensemble.members, waiting=worker.waiting, max_batch=worker.max_batch)
            return JSONResponse(body)
        kind = {"loading": "not_ready", "failed": "load_failed", "draining": "shutting_down"}.get(
            worker.state, "stopped"
        )
        body["error"] = {"type": kind, "message": worker.not_ready_message()}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "5"})


def _document_limits(app: FastAPI, config: EnsembleConfig, settings: ServerSettings) -> None:
    """Write this server's own limits into its OpenAPI document: question length, the member names."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()
        schemas = document.get("components", {}).get("schemas", {})
        question = schemas.get("AnswerRequest", {}).get("properties", {}).get("question")
        if question is not None:
            question.update(maxLength=settings.max_question_chars, pattern=r"\S")
        most = min(len(config.members), settings.max_members or len(config.members))
        if "AnswerRequest" in schemas:
            example = {"question": "who painted the mona lisa", "members": list(config.members[: min(2, most)])}
            schemas["AnswerRequest"]["examples"] = [example]
        for name in ("AnswerRequest", "ChatRequest"):
            members = schemas.get(name, {}).get("properties", {}).get("members")
            for option in (members or {}).get("anyOf", []):
                if option.get("type") == "array":
                    option.update(items={"type": "string", "enum": list(config.members)}, maxItems=most)
                    option["uniqueItems"] = True
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _question(text: str, settings: ServerSettings) -> Question:
    if len(text) > settings.max_question_chars:
        raise InputError(f"question: {len(text)} characters; the limit is {settings.max_question_chars}")
    return make_question(text)


def _check_members(ensemble: Any, members: list[str] | None, settings: ServerSettings) -> None:
    if members is None:
        return
    if settings.max_members is not None and len(members) > settings.max_members:
        raise InputError(f"members: {len(members)} named; the limit is {settings.max_members} per request")
    ensemble.select(members)


def _last_user_message(messages: list[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            content = message.content
            if isinstance(content, list):
                content = " ".join(part.text for part in content if part.type == "text" and part.text)
            if not content or not content.strip():
                raise InputError("messages: the last user message is empty")
            return content
    raise InputError("messages: there is no message with role 'user' (its content is the question)")


def _result_body(answered: Answered, passages: bool) -> dict[str, Any]:
    body = json_ready(answered.result.to_dict())
    for output in body["members"].values():
        if not passages:
            output.pop("passages", None)
            output.pop("prompt", None)
    body.setdefault("degraded", [])
    body.setdefault("degraded_reasons", {})
    body.setdefault("skipped", [])
    if answered.explanation is not None:
        body["explanation"] = json_ready(answered.explanation)
    return body


async def _stream(body: dict[str, Any]) -> AsyncIterator[str]:
    """The completion as OpenAI's server-sent events: the answer in one chunk, then the stop."""
    base = {key: body[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    content = body["choices"][0]["message"]["content"]
    delta = {"role": "assistant", "content": content}
    first = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    last = {
        **base,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": body["usage"],
        "eor": body["eor"],
    }
    for chunk in (first, last):
        yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"
