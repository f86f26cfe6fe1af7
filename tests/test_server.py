"""The HTTP API on a real uvicorn server on 127.0.0.1: the official openai client, degraded members, bad
requests, concurrency, and a bounded schemathesis run; server mechanics (loading, timeouts, internal errors)
with stand-in ensembles through Starlette's test client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from eor.core.config import load_config
from eor.server import ServerSettings
from tests.test_server_api import server_test_config

KEY = "test-key-123"
AUTH = {"Authorization": f"Bearer {KEY}"}
MEMBERS = ["ReFree", "BM25@1", "Boom", "Sloth"]
FAST = ["ReFree"]  # one short prompt: requests that only need some answer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LiveServer:
    """uvicorn serving an app on a thread; `url` once it listens."""

    def __init__(self, app) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def wait_ready(self, seconds: float = 120) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            response = requests.get(f"{self.url}/healthz", timeout=10)
            if response.status_code == 200:
                return response.json()
            assert response.status_code == 503 and response.json()["status"] == "loading"
            time.sleep(0.2)
        raise RuntimeError("the ensemble did not load")


@pytest.fixture(scope="module")
def live(smollm2, tmp_path_factory):
    """The real server: SmolLM2 over the demo corpus; Boom always fails and Sloth hangs for 30 s."""
    from eor.pipeline.ensemble import Ensemble
    from eor.server import create_app

    folder = tmp_path_factory.mktemp("server")
    previous = os.environ.get("EOR_CACHE")
    os.environ["EOR_CACHE"] = str(folder / "cache")
    config = load_config(server_test_config(folder, MEMBERS))
    settings = ServerSettings(
        api_key=KEY, member_timeout=2.0, request_timeout=300.0, max_question_chars=300, max_members=3
    )

    def loader() -> Ensemble:
        ensemble = Ensemble(config, reader=smollm2)
        ensemble.retrievers["BM25@1"].batch(["warm up"])  # the index is built outside any timeout
        return ensemble

    try:
        with LiveServer(create_app(config, settings, loader=loader)) as server:
            server.wait_ready()
            yield server
    finally:
        if previous is None:
            os.environ.pop("EOR_CACHE", None)
        else:
            os.environ["EOR_CACHE"] = previous


def post(live, path: str, body, headers: dict | None = None, **kwargs) -> requests.Response:
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    sent = {"Content-Type": "application/json", **AUTH, **(headers or {})}
    return requests.post(f"{live.url}{path}", data=data, headers=sent, timeout=300, **kwargs)


def test_health_and_models(live) -> None:
    health = requests.get(f"{live.url}/healthz", timeout=10).json()
    assert health["status"] == "ok" and health["members"] == MEMBERS
    assert health["models"] == ["eor", "server-test"]
    assert health["max_batch"] == 1  # llama.cpp runs prompts one by one: no batching by default
    models = requests.get(f"{live.url}/v1/models", headers=AUTH, timeout=10).json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["eor", "server-test"]
    docs = requests.get(f"{live.url}/openapi.json", timeout=10).json()
    assert {"/v1/answer", "/v1/chat/completions", "/v1/models", "/healthz"} <= set(docs["paths"])


def test_a_failing_and_a_hanging_member_leave_the_vote_to_the_others(live) -> None:
    response = post(live, "/v1/answer", {"question": "who painted the mona lisa", "explain": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] == ["Boom", "Sloth"]
    assert body["degraded_reasons"] == {
        "Boom": "retrieval failed: ValueError: index offline",
        "Sloth": "retrieval timed out after 2 s",
    }
    assert list(body["members"]) == ["ReFree", "BM25@1"]
    assert body["member"] in body["members"] and body["answer"] == body["members"][body["member"]]["answer"]
    assert set(body["members"]["BM25@1"]) - {"tokens", "confidence"} == {"answer", "seconds", "score"}  # no passages
    assert body["explanation"]["degraded"] == body["degraded_reasons"]
    assert set(body["explanation"]["members"]) == {"ReFree", "BM25@1"}


def test_the_official_openai_client(live) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{live.url}/v1", api_key=KEY, max_retries=0, timeout=300)
    completion = client.chat.completions.create(
        model="eor",
        messages=[
            {"role": "system", "content": "You answer questions."},
            {"role": "user", "content": "who was the first president of the united states"},
        ],
    )
    answer = completion.choices[0].message.content
    details = completion.model_extra["eor"]
    assert answer and answer == details["answer"] and completion.choices[0].message.role == "assistant"
    assert details["question"] == "who was the first president of the united states"
    assert set(details["members"]) == {"ReFree", "BM25@1"} and set(details["degraded"]) == {"Boom", "Sloth"}
    counts = [member["tokens"] for member in details["members"].values()]
    assert all(counts), "llama.cpp counts every member's tokens"
    usage = completion.usage  # OpenAI's usage, summed from the members' counts
    assert usage.prompt_tokens == sum(c["prompt"] + c["reused"] for c in counts) > 0
    assert usage.completion_tokens == sum(c["generated"] for c in counts) > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens == sum(c["reused"] for c in counts)

    stream = client.chat.completions.create(
        model="server-test",
        messages=[{"role": "user", "content": [{"type": "text", "text": "what is the capital of france"}]}],
        stream=True,
        extra_body={"members": FAST, "return_passages": True},
    )
    chunks = list(stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert text and chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model_extra["eor"]["members"]["ReFree"]["passages"] == []


def test_passages_on_request(live) -> None:
    body = post(
        live, "/v1/answer", {"question": "who painted the mona lisa", "members": ["BM25@1"], "return_passages": True}
    ).json()
    member = body["members"]["BM25@1"]
    assert len(member["passages"]) == 1 and set(member["passages"][0]) == {"id", "title", "text", "score"}
    assert member["prompt"].startswith("Assuming the following paragraphs are true:")
    assert body["degraded"] == [] and body["degraded_reasons"] == {}


def test_concurrent_requests_each_get_their_own_answer(live) -> None:
    questions = ["who painted the mona lisa", "what is the capital of france", "who wrote hamlet"]
    with ThreadPoolExecutor(len(questions)) as pool:
        responses = list(pool.map(lambda q: post(live, "/v1/answer", {"question": q, "members": FAST}), questions))
    assert [r.status_code for r in responses] == [200] * len(questions)
    assert [r.json()["question"] for r in responses] == questions
    assert len({r.json()["id"] for r in responses}) == len(questions)


@pytest.mark.parametrize(
    ("case", "status", "kind", "message"),
    [
        ("missing question", 422, "invalid_request", "question: Field required"),
        ("empty question", 422, "invalid_request", "question: String should have at least 1 character"),
        ("blank question", 422, "invalid_request", "question: the question is empty"),
        ("1 MB question", 413, "request_too_large", "larger than the limit of 65536 bytes"),
        ("long question", 422, "invalid_request", "question: 301 characters; the limit is 300"),
        ("unknown member", 422, "invalid_request", "unknown member(s) 'Wikki'; available: ReFree, BM25@1"),
        ("too many members", 422, "invalid_request", "members: 4 named; the limit is 3 per request"),
        ("unknown field", 422, "invalid_request", "questoin: Extra inputs are not permitted"),
        ("wrong key", 401, "unauthorized", "missing or wrong API key"),
        ("no key", 401, "unauthorized", "send the header 'Authorization: Bearer <key>'"),
        ("broken JSON", 400, "invalid_json", "not valid JSON"),
        ("not an object", 422, "invalid_request", "must be a JSON object"),
        ("unknown model", 404, "model_not_found", "unknown model 'gpt-4'; available: eor, server-test"),
        ("no user message", 422, "invalid_request", "there is no message with role 'user'"),
        ("no such endpoint", 404, "not_found", "no such endpoint: POST /v1/nothing"),
        ("wrong method", 405, "method_not_allowed", "Method Not Allowed"),
    ],
)
def test_bad_requests_get_clear_4xx(live, case: str, status: int, kind: str, message: str) -> None:
    question = {"question": "who painted the mona lisa"}
    chat = {"model": "eor", "messages": [{"role": "user", "content": "hi"}]}
    request = {
        "missing question": ("/v1/answer", {"members": FAST}, None),
        "empty question": ("/v1/answer", {"question": ""}, None),
        "blank question": ("/v1/answer", {"question": " \n\t "}, None),
        "1 MB question": ("/v1/answer", {"question": "why " * 262144}, None),
        "long question": ("/v1/answer", {"question": "w" * 301}, None),
        "unknown member": ("/v1/answer", {**question, "members": ["ReFree", "Wikki"]}, None),
        "too many members": ("/v1/answer", {**question, "members": MEMBERS}, None),
        "unknown field": ("/v1/answer", {"questoin": "who?"}, None),
        "wrong key": ("/v1/answer", question, {"Authorization": "Bearer nope"}),
        "no key": ("/v1/answer", question, {"Authorization": ""}),
        "broken JSON": ("/v1/answer", '{"question": ', None),
        "not an object": ("/v1/answer", '["who painted the mona lisa"]', None),
        "unknown model": ("/v1/chat/completions", {**chat, "model": "gpt-4"}, None),
        "no user message": ("/v1/chat/completions", {**chat, "messages": [{"role": "system", "content": "x"}]}, None),
        "no such endpoint": ("/v1/nothing", question, None),
        "wrong method": ("/healthz", question, None),
    }[case]
    path, body, headers = request
    response = post(live, path, body, headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["type"] == kind and message in error["message"], error
    assert "Traceback" not in response.text
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("with_key", [True, False], ids=["with-key", "without-key"])
def test_schemathesis_finds_no_server_error(smollm2, tmp_path, isolated_cache, with_key: bool) -> None:
    """A bounded property-based run over every operation of the OpenAPI spec: no response may be a 5xx,
    with the bearer key and without it (every /v1 request then gets 401, never an error of the server).

    Its own server with the one fast member (ReFree) and short questions, so the generated questions that
    reach the reader stay cheap; about 200 requests in all."""
    from eor.pipeline.ensemble import Ensemble
    from eor.server import create_app

    config = load_config(server_test_config(tmp_path, ["ReFree"]))
    settings = ServerSettings(api_key=KEY, member_timeout=2.0, request_timeout=300.0, max_question_chars=80)
    app = create_app(config, settings, loader=lambda: Ensemble(config, reader=smollm2))
    with LiveServer(app) as server:
        server.wait_ready()
        command = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "4",
            "--workers",
            "1",
            "--seed",
            "7",
            "--generation-database",
            "none",
            "--request-timeout",
            "300",
            "--no-color",
            "--suppress-health-check",
            "all",
            *(["--header", f"Authorization: Bearer {KEY}"] if with_key else []),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout, result.stdout[-2000:]
    (tmp_path / "schemathesis.txt").write_text(result.stdout)


# -- server mechanics with stand-in ensembles (no model needed) ------------------------------------------


class StandIn:
    """Just enough of an Ensemble for the server: answers `answer` after `delay` seconds, or raises `error`."""

    members = ["A", "B"]

    def __init__(self, delay: float = 0.0, error: BaseException | None = None) -> None:
        self.delay = delay
        self.error = error
        self.asked: list[str] = []

    def select(self, members):
        return list(members or self.members)

    def answer_batch(self, questions, members=None, member_timeout=None, lazy=False, risk=None):
        self.asked += [q.question for q in questions]
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return [
            SimpleNamespace(
                answer="answer",
                to_dict=lambda q=q: {
                    "id": q.id,
                    "question": q.question,
                    "answer": "answer",
                    "member": "A",
                    "members": {},
                    "timings": {},
                },
            )
            for q in questions
        ]


def stand_in_client(tmp_path, loader, **settings):
    from fastapi.testclient import TestClient

    from eor.server import create_app

    config = load_config(server_test_config(tmp_path, ["ReFree"]))
    return TestClient(create_app(config, ServerSettings(**settings), loader=loader), raise_server_exceptions=False)


def test_healthz_is_503_until_the_models_are_loaded(tmp_path) -> None:
    loaded = threading.Event()

    def loader():
        loaded.wait(30)
        return StandIn()

    with stand_in_client(tmp_path, loader) as client:
        response = client.get("/healthz")
        assert response.status_code == 503 and response.json()["status"] == "loading"
        answer = client.post("/v1/answer", json={"question": "who?"})
        assert answer.status_code == 503 and answer.json()["error"]["type"] == "not_ready"
        assert answer.headers["retry-after"] == "5"
        loaded.set()
        deadline = time.monotonic() + 10
        while client.get("/healthz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.get("/healthz").json()["status"] == "ok"
        assert client.post("/v1/answer", json={"question": "who?"}).json()["answer"] == "answer"


def test_a_load_failure_is_reported(tmp_path) -> None:
    from eor.core.errors import ConfigError

    def loader():
        raise ConfigError("source 'Wiki': the index is missing; run eor index")

    with stand_in_client(tmp_path, loader) as client:
        deadline = time.monotonic() + 10
        while client.get("/healthz").json()["status"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.02)
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["error"]["type"] == "load_failed"
        assert "the index is missing" in health.json()["error"]["message"]


def test_a_request_past_its_timeout_gets_504(tmp_path) -> None:
    with stand_in_client(tmp_path, lambda: StandIn(delay=1.0), request_timeout=0.2) as client:
        while client.get("/healthz").status_code != 200:
            time.sleep(0.02)
        response = client.post("/v1/answer", json={"question": "who?"})
        assert response.status_code == 504
        assert response.json()["error"] == {
            "type": "timeout",
            "message": "no answer within the request timeout of 0.2 s; try again, or ask for fewer members",
        }


def test_a_client_that_hangs_up_takes_its_question_out_of_the_queue(tmp_path) -> None:
    from eor.server import create_app

    stand_in = StandIn(delay=3.0)
    config = load_config(server_test_config(tmp_path, ["ReFree"]))
    app = create_app(config, ServerSettings(max_batch=1), loader=lambda: stand_in)
    with LiveServer(app) as server:
        server.wait_ready(10)
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(requests.post, f"{server.url}/v1/answer", json={"question": "first"}, timeout=30)
            time.sleep(0.3)
            with pytest.raises(requests.ReadTimeout):  # gives up while "first" is answered; "second" waits
                requests.post(f"{server.url}/v1/answer", json={"question": "second"}, timeout=0.5)
            time.sleep(3.0)  # the server notices within a second, before 'first' is done
            third = requests.post(f"{server.url}/v1/answer", json={"question": "third"}, timeout=30)
            assert first.result().status_code == 200 and third.status_code == 200
    assert stand_in.asked == ["first", "third"]


def test_an_internal_error_is_a_500_without_details(tmp_path) -> None:
    secret = RuntimeError("/home/someone/private/path exploded")
    with stand_in_client(tmp_path, lambda: StandIn(error=secret)) as client:
        while client.get("/healthz").status_code != 200:
            time.sleep(0.02)
        response = client.post("/v1/answer", json={"question": "who?"})
        assert response.status_code == 500
        assert response.json()["error"]["type"] == "internal_error"
        assert "private" not in response.text and "Traceback" not in response.text


def test_serve_refuses_a_missing_key_variable_in_one_line(tmp_path) -> None:
    config = server_test_config(tmp_path, ["ReFree"])
    env = {key: value for key, value in os.environ.items() if key != "EOR_NO_SUCH_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "eor.cli", "serve", "--config", str(config), "--api-key-env", "EOR_NO_SUCH_KEY"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "eor: error: the API key comes from environment variable EOR_NO_SUCH_KEY, which is not set: "
        "export EOR_NO_SUCH_KEY=<key> or drop --api-key-env to serve without a key"
    ]
