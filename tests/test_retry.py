"""Retries with backoff (eor.core.retry) through real HTTP servers on 127.0.0.1 that fail a set number of times:
the search backends and the page fetcher survive 429 (honouring Retry-After), 5xx and refused connections,
and give up with the project's error after the last try."""

from __future__ import annotations

import email.utils
import http.server
import json
import socket
import threading
import time

import pytest

from eor.core.errors import ConfigError, RetrieverError
from eor.core.retry import RetryPolicy, retry_after_seconds, send_with_retries
from retrievers.web.backends import make_backend
from retrievers.web.fetch import PageFetcher
from retrievers.web.guard import UrlGuard

FAST = {"attempts": 3, "base_delay": 0.01, "max_delay": 0.05}
ONE_HIT = json.dumps({"organic": [{"link": "https://a.example/", "title": "A"}]}).encode()


class Flaky(http.server.BaseHTTPRequestHandler):
    """Answers `status` (with `headers`) to the first `failures` requests, then `body` with 200."""

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        server = self.server
        server.times.append(time.monotonic())
        failing = len(server.times) <= server.failures
        status, body = (server.status, b"try later") if failing else (200, server.body)
        self.send_response(status)
        for name, value in (server.headers if failing else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", server.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def flaky():
    servers = []

    def start(failures: int, status: int = 503, headers=None, body=None, content_type="application/json"):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
        server.failures, server.status, server.headers = failures, status, dict(headers or {})
        server.body = body if body is not None else ONE_HIT
        server.content_type, server.times = content_type, []
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def serper_key(monkeypatch):
    monkeypatch.setenv("SERPER_API_KEY", "test-key")


def test_retry_after_in_seconds_and_as_a_date() -> None:
    class Response:
        def __init__(self, value):
            self.headers = {} if value is None else {"Retry-After": value}

    assert retry_after_seconds(Response("7")) == 7.0
    now = 1_700_000_000.0
    assert retry_after_seconds(Response(email.utils.formatdate(now + 30, usegmt=True)), now=now) == pytest.approx(30)
    assert retry_after_seconds(Response(email.utils.formatdate(now - 30, usegmt=True)), now=now) == 0.0
    assert retry_after_seconds(Response("soon")) is None and retry_after_seconds(Response(None)) is None


def test_policies_from_config_and_bad_values() -> None:
    assert RetryPolicy.of(5) == RetryPolicy(attempts=5)
    assert RetryPolicy.of({"attempts": 2, "deadline": 9}).deadline == 9
    for bad in (0, -1, True, "3", {"tries": 3}, {"base_delay": -1}):
        with pytest.raises(ConfigError):
            RetryPolicy.of(bad)


def test_a_search_api_that_fails_twice_is_retried(flaky, serper_key) -> None:
    server, url = flaky(failures=2, status=503)
    backend = make_backend("serper", base_url=url, retries=FAST)
    hits = backend.search("lighthouse")
    assert [hit.url for hit in hits] == ["https://a.example/"] and len(server.times) == 3


def test_429_waits_as_long_as_retry_after_asks(flaky, serper_key) -> None:
    server, url = flaky(failures=1, status=429, headers={"Retry-After": "1"})
    backend = make_backend("serper", base_url=url, retries={"attempts": 2, "base_delay": 0.01, "max_delay": 5})
    assert len(backend.search("lighthouse")) == 1
    first, second = server.times
    assert 0.95 <= second - first < 3.0  # the server's 1 s, not the 0.01 s backoff


def test_after_the_last_try_the_status_is_reported(flaky, serper_key) -> None:
    server, url = flaky(failures=99, status=500)
    backend = make_backend("serper", base_url=url, retries=FAST)
    with pytest.raises(RetrieverError, match=r"search backend 'serper' answered HTTP 500: try later"):
        backend.search("lighthouse")
    assert len(server.times) == 3
    server, url = flaky(failures=99, status=404)  # not a status worth retrying: asked once
    with pytest.raises(RetrieverError, match="HTTP 404"):
        make_backend("searxng", base_url=url, retries=FAST).search("lighthouse")
    assert len(server.times) == 1


def test_malformed_json_is_an_error_not_a_retry(flaky) -> None:
    server, url = flaky(failures=0, body=b"{not json", content_type="application/json")
    with pytest.raises(RetrieverError, match="did not answer JSON"):
        make_backend("searxng", base_url=url, retries=FAST).search("lighthouse")
    assert len(server.times) == 1


def test_a_refused_connection_is_retried_then_reported(serper_key) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    import requests

    calls = []

    def counting_send():
        calls.append(1)
        return requests.get(f"http://127.0.0.1:{port}/", timeout=1)

    with pytest.raises(requests.ConnectionError):
        send_with_retries(counting_send, RetryPolicy(**FAST), what="test")
    assert len(calls) == 3
    with pytest.raises(RetrieverError, match=r"request to http://127\.0\.0\.1:\d+/search failed \(ConnectionError"):
        make_backend("serper", base_url=f"http://127.0.0.1:{port}", retries=FAST).search("lighthouse")


def test_the_deadline_stops_retrying() -> None:
    class Response:
        status_code = 503
        headers: dict = {}

    calls = []
    started = time.monotonic()
    response = send_with_retries(
        lambda: calls.append(1) or Response(),
        RetryPolicy(attempts=100, base_delay=0.05, max_delay=0.05, deadline=0.3),
        what="test",
    )
    assert response.status_code == 503 and 3 <= len(calls) < 20 and time.monotonic() - started < 1.0


def test_a_page_behind_a_flaky_gateway_is_fetched(flaky) -> None:
    page = b"<html><head><title>Bell Rock</title></head><body><p>A lighthouse.</p></body></html>"
    server, url = flaky(failures=2, status=502, body=page, content_type="text/html")
    fetcher = PageFetcher(UrlGuard.from_config(allowed_hosts=["127.0.0.1"]), timeout=2, retries=FAST)
    fetched = fetcher.fetch(f"{url}/bell-rock")
    assert "A lighthouse." in fetched.body and len(server.times) == 3


# -- the OpenAI-compatible reader --------------------------------------------------------------------------------

COMPLETION = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).encode()


def _reader(url: str, **retries):
    from eor.readers.openai_compat import OpenAIReader

    return OpenAIReader("m", base_url=f"{url}/v1", retries={**FAST, **retries}, timeout=5)


def test_the_openai_reader_retries_503_and_429_with_retry_after(flaky) -> None:
    server, url = flaky(2, status=503, body=COMPLETION)
    assert _reader(url).generate(["capital of france?"]) == ["Paris"]
    assert len(server.times) == 3
    server, url = flaky(1, status=429, headers={"Retry-After": "1"}, body=COMPLETION)
    assert _reader(url, max_delay=5).generate(["capital of france?"]) == ["Paris"]
    assert server.times[1] - server.times[0] >= 0.95  # waited as asked, not the 0.01 s backoff


def test_the_openai_reader_reports_the_last_status_after_the_last_try(flaky) -> None:
    from eor.core.errors import ReaderError

    server, url = flaky(100, status=500, body=COMPLETION)
    with pytest.raises(ReaderError, match="500"):
        _reader(url).generate(["capital of france?"])
    assert len(server.times) == 3
    server, url = flaky(100, status=400, body=COMPLETION)  # a bad request is not worth repeating
    with pytest.raises(ReaderError, match="400"):
        _reader(url).generate(["capital of france?"])
    assert len(server.times) == 1


def test_the_openai_reader_retries_a_refused_connection() -> None:
    from eor.core.errors import ReaderError

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ReaderError, match="Connection"):
        _reader(f"http://127.0.0.1:{port}").generate(["capital of france?"])
    assert time.monotonic() - started < 5


def test_an_empty_output_leaves_its_member_out_of_the_vote(tmp_path, monkeypatch, isolated_cache) -> None:
    """The reader's server answers nothing to ReFree's prompt of this question: ReFree is left out (an empty
    answer would agree with any other empty one), BM25@1 answers, the vote goes on."""
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from tests.conftest import DEMO
    from tests.webserver import chat_server

    server = chat_server("reader-key")
    monkeypatch.setenv("EOR_TEST_KEY", "reader-key")
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "reader": {
                    "model": "m",
                    "backend": "openai",
                    "base_url": f"{server.url}/v1",
                    "api_key_env": "EOR_TEST_KEY",
                },
                "corpus": {"path": str(DEMO / "corpus.jsonl")},
                "members": ["ReFree", "BM25@1"],
                "voter": {"metrics": ["em", "f1"]},
            }
        )
    )
    try:
        result = Ensemble.from_config(load_config(config)).answer("the silent lighthouse keeper", lazy=False)
    finally:
        server.stop()
    assert list(result.members) == ["BM25@1"] and result.member == "BM25@1"
    assert result.degraded == {"ReFree": "generation failed: ReaderError: the reader's output was empty"}
