"""Loopback HTTP servers for the web-search tests: a page server (the HTML pages in `web_fixtures/` plus
redirects, slow, trickling, oversize, binary and missing responses), a Serper-compatible search API that
checks the `X-API-KEY` header, and a SearXNG-compatible JSON search endpoint.

Each server listens on 127.0.0.1 on a free port in a daemon thread and logs the requests it got.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parent / "web_fixtures"
OVERSIZE_BYTES = 2_500_000  # over the fetcher's default 2 MB cap
SLOW_SECONDS = 3.0  # well past the tests' 1 s timeout
ECHO_QUERY = "echo the key"


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server on 127.0.0.1 that records `(method, path)` of every request."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0, **state: Any) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.requests: list[tuple[str, str]] = []
        self.state = state
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)

    def paths(self) -> list[str]:
        return [path for _, path in self.requests]

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up early (byte cap, timeouts) are expected here


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self) -> None:
        self.server.requests.append((self.command, self.path))

    def _send(self, status: int, body: bytes, content_type: str | None, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")


class PageHandler(_Handler):
    """The pages: `/<fixture file>` and the special paths in `ROUTES`."""

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self._record()
        path = urlsplit(self.path).path
        for prefix, route in ROUTES.items():
            if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
                route(self, path)
                return
        file = FIXTURES / path.lstrip("/")
        if path.count("/") == 1 and file.is_file():
            kind = "text/plain; charset=utf-8" if file.suffix == ".txt" else "text/html; charset=utf-8"
            self._send(200, file.read_bytes(), kind)
        else:
            self._send(404, b"<html><head><title>Not found</title></head><body>Not found</body></html>", "text/html")

    def redirect(self, location: str, status: int = 302) -> None:
        self._send(status, b"", "text/html", {"Location": location})

    def slow(self, path: str) -> None:
        time.sleep(SLOW_SECONDS)
        self._send(200, (FIXTURES / "canal.html").read_bytes(), "text/html")

    def trickle(self, path: str) -> None:
        """Headers at once, then one byte every 0.2 s: each read is quick, the whole page is not."""
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "40")
        self.end_headers()
        for _ in range(40):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(0.2)

    def oversize(self, path: str, *, declare_length: bool) -> None:
        paragraph = b"<p>" + b"lighthouse keeper " * 50 + b"</p>\n"
        count = OVERSIZE_BYTES // len(paragraph) + 1
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        if declare_length:
            self.send_header("Content-Length", str(len(paragraph) * count + 26))
        self.end_headers()
        self.wfile.write(b"<html><body>")
        for _ in range(count):
            self.wfile.write(paragraph)
        self.wfile.write(b"</body></html>")

    def bomb(self, path: str) -> None:
        """A decompression bomb: 250 KB of gzip that inflates to BOMB_BYTES of HTML."""
        self._send(200, _bomb(), "text/html", {"Content-Encoding": "gzip"})


BOMB_BYTES = 256_000_000


@functools.cache
def _bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    block = b"<p>" + b"a" * 1_048_570 + b"</p>"
    parts = [packer.compress(b"<html><body>")]
    parts += [packer.compress(block) for _ in range(BOMB_BYTES // len(block))]
    return b"".join([*parts, packer.compress(b"</body></html>"), packer.flush()])


ROUTES: dict[str, Callable[[PageHandler, str], None]] = {
    "/redirect": lambda h, p: h.redirect("/canal.html"),
    "/redirect-absolute": lambda h, p: h.redirect(f"{h.server.url}/tides.html", 301),
    "/redirect-private": lambda h, p: h.redirect("http://10.0.0.1/"),
    "/redirect-file": lambda h, p: h.redirect("file:///etc/passwd"),
    "/loop/": lambda h, p: h.redirect(f"/loop/{int(p.rsplit('/', 1)[1] or 0) + 1}"),
    "/slow": PageHandler.slow,
    "/trickle": PageHandler.trickle,
    "/big": lambda h, p: h.oversize(p, declare_length=True),
    "/big-stream": lambda h, p: h.oversize(p, declare_length=False),
    "/bomb": PageHandler.bomb,
    "/download": lambda h, p: h._send(200, b"\x00\x01binary\x02" * 100, "application/octet-stream"),
    "/logo.png": lambda h, p: h._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png"),
    "/untyped": lambda h, p: h._send(200, (FIXTURES / "canal.html").read_bytes(), None),
}


class SerperHandler(_Handler):
    """`POST /search` like google.serper.dev: `{"q", "num"}` in, `{"organic": [...]}` out.

    State: `api_key` (the one accepted key) and `results` (query -> list of (url, title, snippet)); the
    query `ECHO_QUERY` gets an HTTP 500 whose body repeats the key.
    """

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self._record()
        if urlsplit(self.path).path != "/search":
            self._json(404, {"message": "Not found"})
            return
        if self.headers.get("X-API-KEY") != self.server.state["api_key"]:
            self._json(403, {"message": "Unauthorized.", "statusCode": 403})
            return
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        self.server.state.setdefault("payloads", []).append(payload)
        if payload.get("q") == ECHO_QUERY:  # a careless server that repeats the key in its error page
            self._send(500, f"internal error (key {self.headers.get('X-API-KEY')})".encode(), "text/plain")
            return
        rows = self.server.state["results"].get(payload.get("q"), [])[: int(payload.get("num", 10))]
        organic = [
            {"title": title, "link": url, "snippet": snippet, "position": rank}
            for rank, (url, title, snippet) in enumerate(rows, start=1)
        ]
        self._json(200, {"searchParameters": {"q": payload.get("q"), "type": "search"}, "organic": organic})


class SearxngHandler(_Handler):
    """`GET /search?q=...&format=json` like a SearXNG instance with the json format enabled."""

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self._record()
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if parts.path != "/search":
            self._json(404, {"error": "not found"})
            return
        if query.get("format") != ["json"]:
            self._send(403, b"Forbidden", "text/plain")
            return
        rows = self.server.state["results"].get(query.get("q", [""])[0], [])
        results = [
            {"url": url, "title": title, "content": snippet, "engine": "stub", "score": 1.0 / rank}
            for rank, (url, title, snippet) in enumerate(rows, start=1)
        ]
        self._json(200, {"query": query.get("q", [""])[0], "number_of_results": len(results), "results": results})


class ChatHandler(_Handler):
    """`POST /v1/chat/completions` like an OpenAI-compatible server that needs `Authorization: Bearer <key>`.

    State: `api_key`. The answer repeats the user's message's last words; it is empty for a question with
    "silent" asked without passages. A careless server: a request with another key gets a 401 whose body
    repeats the key it was sent.
    """

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self._record()
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "test"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self._record()
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        given = self.headers.get("Authorization", "")
        if given != f"Bearer {self.server.state['api_key']}":
            self._json(401, {"error": {"message": f"invalid key in '{given}'", "type": "invalid_request_error"}})
            return
        message = str(payload["messages"][-1]["content"])
        words = [] if "silent" in message and "Assuming" not in message else message.split()[-2:]  # empty output
        self._json(
            200,
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": payload.get("model", "m"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": " ".join(words)}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            },
        )


def chat_server(api_key: str, port: int = 0) -> LoopbackServer:
    return LoopbackServer(ChatHandler, port, api_key=api_key).start()


def page_server() -> LoopbackServer:
    return LoopbackServer(PageHandler).start()


def serper_server(api_key: str, results: dict[str, list[tuple[str, str, str]]]) -> LoopbackServer:
    return LoopbackServer(SerperHandler, api_key=api_key, results=results).start()


def searxng_server(results: dict[str, list[tuple[str, str, str]]]) -> LoopbackServer:
    return LoopbackServer(SearxngHandler, results=results).start()
