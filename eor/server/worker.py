"""The one thread that owns the ensemble: it loads the models, then answers queued questions in batches.

llama.cpp is not thread-safe and a small CPU gains nothing from running two batches at once, so every
request goes through this queue. Questions waiting together are answered in one ensemble batch (grouped by
their member selection); each request gets its own `Result` back through its own future, so no request
sees another's data. When a batch fails as a whole (no member left for one of its questions), its
questions are retried one by one, so the failure stays with the question that caused it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from eor.core.data import Question
from eor.core.errors import ConfigError, EorError, InputError
from eor.readers.base import capable
from eor.runs.costs import running_mean
from eor.server.settings import ServerSettings

log = logging.getLogger(__name__)

LOADING, READY, DRAINING, FAILED, STOPPED = "loading", "ready", "draining", "failed", "stopped"


class NotReadyError(EorError):
    """The models are still loading (or failed to load)."""


class BusyError(EorError):
    """Too many questions are waiting."""


class ShuttingDownError(NotReadyError):
    """The server is stopping and this question would not be answered within its shutdown grace."""


@dataclass
class Answered:
    """What a request gets back: its result and, when asked for, the vote's explanation."""

    result: Any
    explanation: dict[str, Any] | None = None


@dataclass
class Job:
    question: Question
    members: tuple[str, ...] | None = None
    explain: bool = False
    risk: float | None = None
    future: Future = field(default_factory=Future)


def default_batch(ensemble: Any) -> int:
    """1 for a reader that runs prompts one by one (llama.cpp: batching only delays the first answers, and a
    question that times out while still queued is dropped instead of computed); the config's batch_size
    for one that `batches` (eor.readers.base.Reader)."""

    if not capable(getattr(ensemble, "reader", None), "batches"):
        return 1
    config = getattr(ensemble, "config", None)
    return max(1, int(getattr(config, "batch_size", 8)))


class EnsembleWorker:
    """Loads the ensemble with `loader` on its own thread, then serves `submit`ted questions."""

    def __init__(
        self,
        loader: Callable[[], Any],
        settings: ServerSettings,
        on_load_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.settings = settings
        self.state = LOADING
        self.error: str | None = None
        self.ensemble: Any = None
        self.max_batch = settings.max_batch or 1
        self._loader = loader
        self._on_load_error = on_load_error
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="eor-ensemble-worker", daemon=True)
        self.seconds_per_question: float | None = None  # measured on the questions answered, a running mean
        self._deadline: float | None = None  # when draining: by when the accepted questions must be answered

    def start(self) -> None:
        self._thread.start()

    def drain(self) -> None:
        """Shutting down (SIGTERM): take no new question; answer each queued one whose measured answer time
        still fits within `shutdown_grace` from now, and give the others ShuttingDownError (a 503 with
        Retry-After) as their turn comes, so that none is left to be cancelled."""
        if self.state in (READY, LOADING):
            self._deadline = time.monotonic() + self.settings.shutdown_grace
            self.state = DRAINING
            expected = "unknown" if self.seconds_per_question is None else f"{self.seconds_per_question:.1f} s"
            log.info(
                "shutting down: %d question(s) waiting, %s per question, %.0f s of grace",
                self.waiting,
                expected,
                self.settings.shutdown_grace,
            )

    def stop(self, wait: float = 2.0) -> None:
        """Stop after the batch in flight; questions still queued are cancelled."""
        self.state = STOPPED
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.future.cancel()
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(wait)

    @property
    def waiting(self) -> int:
        return self._queue.qsize()

    def submit(
        self, question: Question, members: list[str] | None = None, explain: bool = False, risk: float | None = None
    ) -> Future:
        """Queue a question; its future resolves to an `Answered` (or raises the ensemble's error); `risk`: the
        error rate it is answered at (VoteStage.conclude)."""
        if self.state != READY:
            raise (ShuttingDownError if self.state == DRAINING else NotReadyError)(self.not_ready_message())
        if self._queue.qsize() >= self.settings.max_queue:
            raise BusyError(f"{self.settings.max_queue} questions are already waiting; try again shortly")
        job = Job(question, tuple(members) if members is not None else None, explain, risk)
        self._queue.put(job)
        return job.future

    def not_ready_message(self) -> str:
        if self.state == LOADING:
            return "the models are still loading; try again shortly (GET /healthz says when they are ready)"
        if self.state == FAILED:
            return f"the models failed to load: {self.error}"
        return "the server is shutting down; try again shortly (another instance may answer)"

    def _run(self) -> None:
        try:
            self.ensemble = self._loader()
            if not self.settings.lazy:  # every question asks every member: the config's risk must hold so
                _check_risk_of_every_member(self.ensemble)
        except Exception as exc:  # reported through /healthz and the on_load_error callback
            self.state = FAILED
            self.error = str(exc).splitlines()[0] if isinstance(exc, EorError) else f"{type(exc).__name__}: {exc}"
            log.error("loading the ensemble failed: %s", self.error, exc_info=not isinstance(exc, EorError))
            if self._on_load_error is not None:
                self._on_load_error(exc)
            return
        self.max_batch = self.settings.max_batch or default_batch(self.ensemble)
        if self.state == LOADING:
            self.state = READY
            log.info("ensemble ready: %d members, batches of up to %d", len(self.ensemble.members), self.max_batch)
        while True:
            job = self._queue.get()
            if job is None:
                return
            batch = [job]
            while len(batch) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(more)
            # A request that timed out while queued has cancelled its future: skip it.
            live = [job for job in batch if job.future.set_running_or_notify_cancel()]
            groups: dict[tuple[tuple[str, ...] | None, float | None], list[Job]] = {}
            for job in live:
                groups.setdefault((job.members, job.risk), []).append(job)
            for (members, _), jobs in groups.items():
                if fitting := self._within_grace(jobs):  # each group is one call: checked when its turn comes
                    self._answer(fitting, members)

    def _within_grace(self, jobs: list[Job]) -> list[Job]:
        """While draining, the jobs whose answers fit before the deadline at the measured seconds per question
        (before any was measured: one, while any grace is left); the others get ShuttingDownError now."""
        if self._deadline is None:
            return jobs
        left = self._deadline - time.monotonic()
        if left <= 0:
            fitting = 0
        elif self.seconds_per_question is None:
            fitting = 1
        else:
            fitting = int(left // self.seconds_per_question)
        for job in jobs[fitting:]:
            job.future.set_exception(
                ShuttingDownError(
                    f"the server is shutting down: this question would not be answered within its "
                    f"{self.settings.shutdown_grace:g} s of grace; try again shortly"
                )
            )
        return jobs[:fitting]

    def _measured(self, seconds: float, questions: int) -> None:
        self.seconds_per_question = running_mean(self.seconds_per_question, seconds / questions)

    def _answer(self, jobs: list[Job], members: tuple[str, ...] | None) -> None:
        started = time.monotonic()
        try:
            results = self.ensemble.answer_batch(
                [job.question for job in jobs],
                members=list(members) if members is not None else None,
                member_timeout=self.settings.member_timeout,
                lazy=self.settings.lazy,
                risk=jobs[0].risk,
            )
            answered = [
                Answered(result, self.ensemble.explain(result) if job.explain else None)
                for job, result in zip(jobs, results, strict=True)
            ]
        except Exception as exc:
            if len(jobs) > 1:  # keep the failure with the question that caused it
                for job in jobs:
                    self._answer([job], members)
                return
            if not isinstance(exc, EorError):  # a bug: the request gets a 500, the log the traceback
                log.exception("answering a question failed")
            self._measured(time.monotonic() - started, 1)  # a failure takes time too (the shutdown grace)
            jobs[0].future.set_exception(exc)
            return
        self._measured(time.monotonic() - started, len(jobs))
        for job, answer in zip(jobs, answered, strict=True):
            job.future.set_result(answer)


def _check_risk_of_every_member(ensemble: Any) -> None:
    """`eor serve --all-members` asks every member of every question: ConfigError when the config's `voter.risk`
    cannot hold so (a cascade's P(right) is calibrated for the answers it stops at), rather than a 422 on every
    request."""
    risk = ensemble.config.voter.risk
    if risk is None:
        return
    try:
        ensemble.check_risk(risk, every_member=True)
    except InputError as exc:
        raise ConfigError(
            f"voter.risk {risk:g} cannot hold with --all-members ({exc}); serve without one of them"
        ) from None
