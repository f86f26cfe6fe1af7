"""The worker's drain (SIGTERM, eor.server.worker.EnsembleWorker.drain) with a stand-in ensemble whose answer
takes a known time: what fits in the grace is answered, the rest is refused at once, nothing is left waiting;
timings derived from what the stand-in measures."""

from __future__ import annotations

import threading
import time

import pytest

from eor.core.data import make_question
from eor.server.settings import ServerSettings
from eor.server.worker import READY, EnsembleWorker, ShuttingDownError

SECONDS = 0.2  # what one answer of the stand-in takes


class _Answered:
    def __init__(self, question: str) -> None:
        self.question = question


class StandIn:
    """An ensemble whose answers take SECONDS per question; the first waits until `release` is set."""

    members = ["A"]
    reader = None
    config = None

    def __init__(self, fail: bool = False) -> None:
        self.release = threading.Event()
        self.fail = fail

    def answer_batch(self, questions, **_):
        self.release.wait(30)
        time.sleep(SECONDS * len(questions))
        if self.fail:
            from eor.core.errors import ReaderError

            raise ReaderError("the reader is down")
        return [_Answered(q.question) for q in questions]


def _worker(grace: float, max_batch: int = 1, fail: bool = False) -> tuple[EnsembleWorker, StandIn]:
    ensemble = StandIn(fail)
    worker = EnsembleWorker(lambda: ensemble, ServerSettings(shutdown_grace=grace, max_batch=max_batch))
    worker.start()
    deadline = time.monotonic() + 30
    while worker.state != READY:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return worker, ensemble


def _until(condition, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def _outcomes(futures, timeout: float = 30) -> list[str]:
    out = []
    for future in futures:
        try:
            future.result(timeout)
            out.append("answered")
        except ShuttingDownError:
            out.append("refused")
        except Exception as exc:  # the stand-in's own failure
            out.append(type(exc).__name__)
    return out


def test_grace_zero_refuses_everything_queued_and_finishes_what_runs() -> None:
    worker, ensemble = _worker(grace=0)
    futures = [worker.submit(make_question(f"q{i}")) for i in range(4)]
    _until(lambda: worker.waiting == 3)  # the first is taken and waits for `release`; three are queued
    worker.drain()
    with pytest.raises(ShuttingDownError):
        worker.submit(make_question("late"))  # nothing new once draining
    ensemble.release.set()
    assert _outcomes(futures) == ["answered", "refused", "refused", "refused"]
    worker.stop()


@pytest.mark.parametrize("max_batch", [1, 3])
def test_what_fits_at_the_measured_time_is_answered_and_the_rest_refused(max_batch: int) -> None:
    worker, ensemble = _worker(grace=60, max_batch=max_batch)
    ensemble.release.set()
    started = time.monotonic()
    worker.submit(make_question("first")).result(30)  # measured: the worker's seconds per question
    measured = time.monotonic() - started
    assert worker.seconds_per_question is not None
    ensemble.release.clear()
    futures = [worker.submit(make_question(f"q{i}")) for i in range(8)]
    _until(lambda: worker.waiting <= 8 - 1)  # a batch is taken and waits for `release`
    worker.settings = ServerSettings(shutdown_grace=2.5 * measured, max_batch=max_batch)  # about two answers
    worker.drain()
    drained = time.monotonic()
    ensemble.release.set()
    outcomes = _outcomes(futures)
    took = time.monotonic() - drained
    answered = outcomes.count("answered")
    assert set(outcomes) <= {"answered", "refused"} and "refused" in outcomes, outcomes
    assert 1 <= answered <= 1 + max_batch + 2, outcomes  # the batch in flight, then what the grace holds
    assert took < 2.5 * measured + (max_batch + 1) * measured + 1.0, (took, measured)
    worker.stop()


def test_failures_are_measured_too() -> None:
    worker, ensemble = _worker(grace=60, fail=True)
    ensemble.release.set()
    assert _outcomes([worker.submit(make_question("q"))]) == ["ReaderError"]
    assert worker.seconds_per_question is not None and worker.seconds_per_question >= SECONDS * 0.9
    worker.stop()
