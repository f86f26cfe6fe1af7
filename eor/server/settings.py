"""Server settings: where to listen, the optional API key, request limits and timeouts."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from eor.core.data import MAX_QUESTION_CHARS
from eor.core.errors import ConfigError, MissingSecretError

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServerSettings:
    """Everything `eor serve` can be told besides the ensemble config.

    host, port: where to listen (loopback unless told otherwise).
    api_key: when set, every /v1 request needs `Authorization: Bearer <api_key>`.
    max_body_bytes: larger request bodies get 413.
    max_question_chars: longer questions get 422 (at most eor.core.data.MAX_QUESTION_CHARS).
    max_members: most members one request may name (None: as many as the pool has).
    member_timeout: seconds per question a member's retrieval may take before it is left out of the vote
        (None: no limit).
    request_timeout: seconds a request may wait for its answer, queueing included, before a 504.
    max_batch: most queued questions answered together in one ensemble batch (None: 1 for a llama.cpp
        reader, which runs prompts one by one, so a batch only makes its first question wait for its last;
        the config's batch_size for batching backends).
    max_queue: most questions waiting; more get 429 with Retry-After (try again later).
    shutdown_grace: on SIGTERM, seconds the accepted questions have to be answered: each queued question
        whose measured answer time still fits is answered, the others get 503 with Retry-After (none is
        cancelled); the default fits Kubernetes' 30 s termination grace period.
    lazy: run members cheapest first and stop once the rest cannot change the answer (eor.pipeline.ensemble); False
        runs every member.
    reports: a folder whose benchmark reports (every folder under it with a report.md) the page lists.
    allow_unauthenticated: serve an address other than the loopback without an API key (refused otherwise).
    """

    host: str = LOOPBACK
    port: int = 8000
    api_key: str | None = field(default=None, repr=False)
    max_body_bytes: int = 64 * 1024
    max_question_chars: int = MAX_QUESTION_CHARS
    max_members: int | None = None
    member_timeout: float | None = 60.0
    request_timeout: float = 600.0
    max_batch: int | None = None
    max_queue: int = 64
    shutdown_grace: float = 25.0
    lazy: bool = True
    allow_unauthenticated: bool = False
    reports: Path | None = None

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_question_chars", "max_batch", "max_queue"):
            value = getattr(self, name)
            if value is None and name == "max_batch":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"server setting {name} must be a positive integer, got {value!r}")
        if self.max_question_chars > MAX_QUESTION_CHARS:
            raise ConfigError(f"max_question_chars can be at most {MAX_QUESTION_CHARS}, got {self.max_question_chars}")
        if self.max_members is not None and (not isinstance(self.max_members, int) or self.max_members < 1):
            raise ConfigError(f"max_members must be a positive integer or None, got {self.max_members!r}")
        for name in ("member_timeout", "request_timeout", "shutdown_grace"):
            value = getattr(self, name)
            if value is None and name == "member_timeout":
                continue
            least = 0 if name == "shutdown_grace" else math.ulp(0.0)  # a grace may be 0; a timeout may not
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < least
            ):
                kind = "a number of seconds ≥ 0" if least == 0 else "a positive number of seconds"
                raise ConfigError(f"{name} must be {kind}, got {value!r}")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be between 0 and 65535, got {self.port!r}")
        if self.api_key is not None and not self.api_key.strip():
            raise ConfigError("the API key is empty")
        if self.reports is not None and not Path(self.reports).is_dir():
            raise ConfigError(f"reports: {self.reports} is not a folder")


def api_key_from_env(variable: str) -> str:
    """The API key held by environment variable `variable` (never logged or echoed)."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise MissingSecretError(
            f"the API key comes from environment variable {variable}, which is not set: export {variable}=<key> "
            "or drop --api-key-env to serve without a key"
        )
    return value
