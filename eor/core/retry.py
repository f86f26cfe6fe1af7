"""Retries with backoff for network calls (web search, page fetches, the OpenAI-compatible reader), with tenacity.

A call is retried on connection errors, timeouts and the statuses in `RETRY_STATUSES` (429 and the 5xx that
mean "try again"), waiting exponentially longer with jitter (`RetryPolicy.base_delay` doubling up to
`max_delay`), or as long as a `Retry-After` header asks (seconds or an HTTP date; at most `max_delay`). It stops
after `attempts` tries or once `deadline` seconds have passed since the first, whichever comes first. After
the last try, a status is returned to the caller (which reports it) and an exception is raised as it was.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eor.core.errors import ConfigError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """attempts: tries in all (1: no retry); base_delay, max_delay: seconds of the exponential backoff;
    deadline: seconds from the first try after which no new try starts."""

    attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 10.0
    deadline: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ConfigError(f"retries: attempts must be a positive integer, got {self.attempts!r}")
        for name in ("base_delay", "max_delay", "deadline"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"retries: {name} must be a number of seconds ≥ 0, got {value!r}")

    @classmethod
    def of(cls, value: Any) -> RetryPolicy:
        """From a config value: a RetryPolicy, a number of attempts, or a mapping of the fields."""
        if isinstance(value, RetryPolicy):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(attempts=value)
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"attempts", "base_delay", "max_delay", "deadline"})
            if unknown:
                raise ConfigError(f"retries: unknown key(s) {', '.join(unknown)}")
            return cls(**value)
        raise ConfigError(f"retries must be a number of attempts or a mapping, got {value!r}")


class _RetryableStatus(Exception):
    def __init__(self, response: Any) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def retry_after_seconds(response: Any, now: float | None = None) -> float | None:
    """The wait a `Retry-After` header asks for (delta seconds or an HTTP date), None without one."""
    value = (getattr(response, "headers", None) or {}).get("Retry-After")
    if value is None:
        return None
    value = str(value).strip()
    if value.isdigit():
        return float(value)
    try:
        moment = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, moment - (time.time() if now is None else now))


def call_with_retries(
    call: Callable[[], Any],
    policy: RetryPolicy,
    *,
    what: str,
    retryable: Callable[[BaseException], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """`call()`, retried under `policy` while it raises an exception that `retryable` accepts; the wait is the
    one a `Retry-After` header of the exception's `response` asks for, when it has one, else the backoff.
    `what` names the call in the log. Raises the last exception."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay

    def wait(state: Any) -> float:
        error = state.outcome.exception()
        asked = retry_after_seconds(getattr(error, "response", None))
        if asked is not None:
            delay = min(asked, policy.max_delay)
        else:
            backoff = policy.base_delay * 2 ** (state.attempt_number - 1)
            delay = min(policy.max_delay, backoff * (0.5 + 0.5 * _jitter()))
        log.info("%s: %s on try %d; retrying in %.1f s", what, error, state.attempt_number, delay)
        return delay

    retrying = Retrying(
        stop=stop_after_attempt(policy.attempts) | stop_after_delay(policy.deadline),
        wait=wait,
        retry=retry_if_exception(retryable),
        reraise=True,
        sleep=sleep,
    )
    return retrying(call)


def send_with_retries(
    send: Callable[[], Any],
    policy: RetryPolicy,
    *,
    what: str,
    read_timeouts: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """`send()` (an HTTP request returning a `requests` response), retried under `policy`; `what` names the
    call in the log; `read_timeouts=False` does not retry a server that accepted the connection but did not
    answer in time (connection timeouts are still retried). Returns the last response; raises the last
    connection error or timeout."""
    import requests

    def attempt() -> Any:
        response = send()
        if response.status_code in RETRY_STATUSES:
            raise _RetryableStatus(response)
        return response

    errors = (_RetryableStatus, requests.ConnectionError, *((requests.Timeout,) if read_timeouts else ()))
    try:
        return call_with_retries(
            attempt, policy, what=what, retryable=lambda error: isinstance(error, errors), sleep=sleep
        )
    except _RetryableStatus as exc:
        return exc.response


def _jitter() -> float:
    import random

    return random.random()
