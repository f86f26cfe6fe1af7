"""`eor serve`: check the config, then run the application under uvicorn until interrupted."""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from eor.core.errors import ConfigError, EorError
from eor.pipeline.ensemble import Ensemble, config_voter
from eor.pipeline.validation import load_valid_config
from eor.runs.generation_cache import CacheSetting, open_cache
from eor.server.app import create_app
from eor.server.settings import ServerSettings

log = logging.getLogger(__name__)

WARM_UP_QUESTION = "who wrote the odyssey"


def serve(
    config_path: str | Path,
    *,
    weights: str | Path | None = None,
    settings: ServerSettings | None = None,
    log_level: str = "info",
    cache: CacheSetting = True,
) -> None:
    """Serve the ensemble of `config_path`; a config, weights or model that cannot be loaded raises EorError.
    `cache`: the generation cache (see `Ensemble`), opened before the server starts."""

    settings = settings or ServerSettings()
    if settings.api_key is None and not _is_loopback(settings.host) and not settings.allow_unauthenticated:
        raise ConfigError(
            f"refusing to serve {settings.host} without an API key: anyone who can reach it could use the reader; "
            "give one with --api-key-env VAR, or pass --allow-unauthenticated"
        )
    config = load_valid_config(config_path)  # the door: fail before the server starts, not in its log
    generation_cache = open_cache(cache)  # likewise an unusable cache file
    voter = config_voter(config, weights)  # and a bad weights file
    if settings.api_key is None and not _is_loopback(settings.host):
        log.warning(
            "serving on %s without an API key (--allow-unauthenticated): anyone who can reach it can use it",
            settings.host,
        )

    failure: list[BaseException] = []
    server: Any = None

    def stop_on_load_error(exc: BaseException) -> None:
        failure.append(exc)
        if server is not None:
            server.should_exit = True

    def load() -> Ensemble:
        ensemble = Ensemble(config, voter=voter, cache=generation_cache, validated=True)
        warm_up(ensemble, settings)
        return ensemble

    app = create_app(config, settings, loader=load, on_load_error=stop_on_load_error)
    # SIGTERM drains (EnsembleWorker.drain): every accepted request gets its answer if it fits within
    # shutdown_grace at the measured seconds per question, else a 503 with Retry-After. uvicorn's own grace
    # only backs that up (a request waits request_timeout at most): it never cancels a request (a 500).
    listening = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=math.ceil(max(settings.request_timeout, settings.shutdown_grace)),
    )
    server = _DrainingServer(listening, app.state.worker.drain)
    server.run()
    if failure:
        exc = failure[0]
        raise exc if isinstance(exc, EorError) else EorError(f"loading the ensemble failed: {exc}")


class _DrainingServer(uvicorn.Server):
    """uvicorn's server that first tells the worker to drain when a signal asks it to stop."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], None]) -> None:
        super().__init__(config)
        self._drain = drain

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._drain()
        super().handle_exit(sig, frame)


def warm_up(ensemble: Any, settings: ServerSettings) -> None:
    """Answer one question before reporting ready: encoders and indexes load on first use, and llama.cpp's
    first call is slow, so without this the first client would pay for all of it."""
    started = time.perf_counter()
    try:
        result = ensemble.answer(WARM_UP_QUESTION, member_timeout=settings.member_timeout, lazy=False)  # all load
    except EorError as exc:
        log.warning("the warm-up question failed (%s); serving anyway", str(exc).splitlines()[0])
        return
    degraded = f"; left out: {', '.join(result.degraded)}" if result.degraded else ""
    log.info("warm-up question answered in %.1f s%s", time.perf_counter() - started, degraded)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
