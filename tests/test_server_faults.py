"""`eor serve` under faults, as a real process on 127.0.0.1: a full queue answers 429 with Retry-After, and
SIGTERM with requests in flight drains them (every accepted request is answered) before the process exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.conftest import DEMO, ROOT
from tests.test_server import free_port

EOR = [sys.executable, "-m", "eor.cli"]


def _config(folder: Path) -> Path:
    path = folder / "faults.yaml"
    path.write_text(f"""
name: faults
reader: {{model: smollm2-135m, max_tokens: 8, context_tokens: 2048}}
corpus: {{path: {DEMO / "corpus.jsonl"}}}
sources:
  Slow: {{type: langchain, params: {{class: "tests.faulty_sources:Slow", seconds: 1.5}}}}
members: [ReFree, Slow@1]
voter: {{metrics: [em, f1]}}
""")
    return path


@pytest.fixture
def server(tmp_path):
    """Start `eor serve` with extra arguments; yields (base URL, process, log path)."""
    started = []

    def start(*args: str):
        port = free_port()
        log = tmp_path / f"server-{port}.log"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "EOR_CACHE": str(tmp_path / "cache"),
        }
        with log.open("w") as sink:
            process = subprocess.Popen(
                [
                    *EOR,
                    "serve",
                    "--config",
                    str(_config(tmp_path)),
                    "--port",
                    str(port),
                    "--max-batch",
                    "1",
                    "--no-cache",
                    "--all-members",
                    *args,
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
            )
        started.append(process)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    return base, process, log
            except requests.ConnectionError:
                pass
            assert process.poll() is None, log.read_text()[-2000:]
            time.sleep(0.2)
        raise RuntimeError("the server did not get ready")

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def _ask(base: str, question: str) -> requests.Response:
    return requests.post(f"{base}/v1/answer", json={"question": question}, timeout=120)


QUESTIONS = [
    "who painted the mona lisa",
    "where is the eiffel tower",
    "who wrote hamlet",
    "what is the capital of peru",
    "who discovered penicillin",
    "how tall is mount everest",
]


def test_a_full_queue_answers_429_with_retry_after(server):
    base, _, _ = server("--max-queue", "2")
    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        responses = list(pool.map(lambda q: _ask(base, q), QUESTIONS))
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {200, 429}, statuses  # nothing else, no 5xx
    assert statuses.count(200) >= 2 and statuses.count(429) >= 1, statuses
    for response in responses:
        if response.status_code == 429:
            assert response.headers["Retry-After"] == "5"
            assert response.json()["error"]["type"] == "too_many_requests"
        else:
            assert response.json()["answer"]


def _until_waiting(base: str, questions: int, timeout: float = 120.0) -> None:
    """Poll /healthz until `questions` are queued (what the server says, not a guess of how long it takes)."""
    deadline = time.monotonic() + timeout
    while requests.get(f"{base}/healthz", timeout=10).json().get("waiting", 0) < questions:
        assert time.monotonic() < deadline, f"fewer than {questions} questions queued after {timeout} s"
        time.sleep(0.05)


def test_sigterm_drains_the_requests_in_flight(server):
    base, process, log = server("--shutdown-grace", "600")  # ample on any machine: every question fits
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(_ask, base, q) for q in QUESTIONS[:3]]
        _until_waiting(base, 2)  # at least two accepted and queued (each answer takes at least 1.5 s)
        process.send_signal(signal.SIGTERM)
        responses = [future.result() for future in futures]
    # every accepted question is answered; one that reached the server only after SIGTERM (the third may, on a
    # loaded machine: two can be queued before the worker takes one) is refused at the door, never accepted
    answered = [r for r in responses if r.status_code == 200]
    assert len(answered) >= 2 and all(r.json()["answer"] for r in answered), [r.text[-300:] for r in responses]
    for refused in (r for r in responses if r.status_code != 200):
        assert refused.status_code == 503, refused.text[-300:]
        assert refused.json()["error"]["message"] == (
            "the server is shutting down; try again shortly (another instance may answer)"
        ), refused.text[-300:]
    # uvicorn finishes its shutdown, then lets the signal end the process (the usual exit status of SIGTERM)
    assert process.wait(60) in (0, -signal.SIGTERM), log.read_text()[-2000:]
    assert "Application shutdown complete" in log.read_text()
    with pytest.raises(requests.ConnectionError):  # gone: nothing new is accepted
        _ask(base, QUESTIONS[3])
    assert "Traceback" not in log.read_text()
    json.dumps([r.json() for r in responses])


def test_sigterm_answers_what_fits_in_the_grace_and_503s_the_rest(server):
    """A grace shorter than the queue takes: the questions that fit at the measured answer time are answered,
    the others get 503 with Retry-After at once; none is cancelled (a 500) or left waiting."""
    grace = 2.0
    base, process, log = server("--shutdown-grace", str(grace))
    started = time.monotonic()
    assert _ask(base, QUESTIONS[0]).status_code == 200
    answer_seconds = time.monotonic() - started  # this machine's answer time, as the server measured it too
    count = 3 + int(grace // answer_seconds) + 1  # more than the grace holds, whatever the machine's speed
    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(_ask, base, QUESTIONS[i % len(QUESTIONS)] + "?" * i) for i in range(count)]
        _until_waiting(base, count - 1)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        responses = [future.result() for future in futures]
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 503} and 200 in statuses and 503 in statuses, statuses
    for response in responses:
        if response.status_code == 503:
            assert response.headers["Retry-After"] == "5"
            assert response.json()["error"]["type"] == "shutting_down"
        else:
            assert response.json()["answer"]
    # the question in flight, then those that fit: done within the grace plus one answer (the one in flight)
    assert time.monotonic() - signalled < grace + 3 * answer_seconds + 5, statuses
    assert process.wait(60) in (0, -signal.SIGTERM), log.read_text()[-2000:]
    assert "Traceback" not in log.read_text() and "shutting down:" in log.read_text()
