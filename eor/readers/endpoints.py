"""Replicas of one OpenAI-compatible server (vLLM, llama.cpp's server, ...): requests spread over them.

Each request goes to the healthy endpoint with the fewest requests in flight (ties: in turn),
never more than `concurrency` at once per endpoint. An endpoint that refuses a connection, times out or
answers 502/503/504 is marked down: no request goes to it until a health check (`GET {base_url}/models`,
in the background) answers again, tried after a cool-down that doubles on every failed check (up to
`max_cooldown`). The request
that met the failure is retried by the caller's retry policy (eor.core.retry), on another endpoint. When every
endpoint is down, a request waits for the first one back, at most `max_wait` seconds. A single endpoint is
never marked down: there is no other to send to, and the retry policy alone decides.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eor.core.errors import ConfigError, ReaderError

log = logging.getLogger(__name__)


@dataclass
class Endpoint:
    url: str
    client: Any
    in_flight: int = 0
    down_since: float | None = None  # None: healthy
    check_at: float = 0.0  # down: when the next health check may run
    cooldown: float = 0.0
    served: int = 0  # requests answered
    failures: int = 0
    checking: bool = field(default=False, repr=False)


class EndpointPool:
    """`acquire()` an endpoint for one request, `release(endpoint, failed)` after it. `check(endpoint)` is the
    health check: True when the endpoint answers (default: the client's `models.list()`)."""

    def __init__(
        self,
        urls: Sequence[str],
        make_client: Callable[[str], Any],
        concurrency: int,
        *,
        cooldown: float = 1.0,
        max_cooldown: float = 30.0,
        max_wait: float = 120.0,
        check: Callable[[Endpoint], bool] | None = None,
    ) -> None:
        urls = [str(url).rstrip("/") for url in urls]
        if not urls or len(set(urls)) != len(urls):
            raise ConfigError(f"reader.openai.base_url: give one or more distinct URLs, got {list(urls)}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"reader.openai.concurrency must be a positive integer, got {concurrency!r}")
        self.endpoints = [Endpoint(url, make_client(url)) for url in urls]
        self.concurrency = concurrency
        self.first_cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.max_wait = max_wait
        self._check = check or _models_answer
        self._changed = threading.Condition()
        self._turn = 0

    def acquire(self) -> Endpoint:
        give_up = time.monotonic() + self.max_wait
        with self._changed:
            while True:
                self._start_due_checks()
                endpoint = self._least_loaded()
                if endpoint is not None:
                    endpoint.in_flight += 1
                    return endpoint
                left = give_up - time.monotonic()
                if left <= 0:
                    raise ReaderError(f"no reader endpoint answered for {self.max_wait:.0f} s: {self._urls()}")
                self._changed.wait(timeout=min(self._seconds_to_next_check(), left))

    def release(self, endpoint: Endpoint, failed: bool) -> None:
        with self._changed:
            endpoint.in_flight -= 1
            if failed:
                endpoint.failures += 1
                if endpoint.down_since is None and len(self.endpoints) > 1:
                    endpoint.down_since = time.monotonic()
                    endpoint.cooldown = self.first_cooldown
                    endpoint.check_at = endpoint.down_since + endpoint.cooldown
                    log.warning("reader endpoint %s is down; requests go to the others", endpoint.url)
            else:
                endpoint.served += 1
            self._changed.notify_all()

    def status(self) -> list[dict[str, Any]]:
        """Per endpoint: url, healthy, requests answered, failures, in flight."""
        with self._changed:
            return [
                {
                    "url": e.url,
                    "healthy": e.down_since is None,
                    "served": e.served,
                    "failures": e.failures,
                    "in_flight": e.in_flight,
                }
                for e in self.endpoints
            ]

    # -- inside the lock (but _run_check) -----------------------------------------------------------------------

    def _urls(self) -> str:
        return ", ".join(e.url for e in self.endpoints)

    def _least_loaded(self) -> Endpoint | None:
        n = len(self.endpoints)
        free = [i for i, e in enumerate(self.endpoints) if e.down_since is None and e.in_flight < self.concurrency]
        if not free:
            return None
        best = min(free, key=lambda i: (self.endpoints[i].in_flight, (i - self._turn) % n))
        self._turn = best + 1
        return self.endpoints[best]

    def _start_due_checks(self) -> None:
        """A health check in the background for each down endpoint whose cool-down is over."""
        now = time.monotonic()
        for endpoint in self.endpoints:
            if endpoint.down_since is not None and not endpoint.checking and endpoint.check_at <= now:
                endpoint.checking = True
                threading.Thread(target=self._run_check, args=(endpoint,), daemon=True).start()

    def _seconds_to_next_check(self) -> float:
        waiting = [e.check_at for e in self.endpoints if e.down_since is not None and not e.checking]
        return max(0.01, min(waiting) - time.monotonic()) if waiting else 1.0

    def _after_check(self, endpoint: Endpoint, healthy: bool) -> None:
        if healthy:
            assert endpoint.down_since is not None  # a check runs only while its endpoint is down
            log.warning("reader endpoint %s is back after %.1f s", endpoint.url, time.monotonic() - endpoint.down_since)
            endpoint.down_since = None
        else:
            endpoint.cooldown = min(2 * endpoint.cooldown, self.max_cooldown)
            endpoint.check_at = time.monotonic() + endpoint.cooldown
        self._changed.notify_all()

    def _run_check(self, endpoint: Endpoint) -> None:
        try:
            healthy = bool(self._check(endpoint))
        except Exception:  # any failure of the check means: still down
            healthy = False
        with self._changed:
            endpoint.checking = False
            self._after_check(endpoint, healthy)


def _models_answer(endpoint: Endpoint) -> bool:
    """The server answers `GET /models` (any answer below 500 means it is up)."""
    import openai

    try:
        endpoint.client.with_options(timeout=5.0, max_retries=0).models.list()
    except openai.APIStatusError as error:
        return error.status_code < 500
    return True
