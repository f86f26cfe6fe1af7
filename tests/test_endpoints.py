"""The OpenAI-compatible reader over several replicas (eor.readers.endpoints): requests spread over them,
a replica that stops is left out, its health check brings it back, and nothing is lost: first against
OpenAI-compatible servers on 127.0.0.1 (tests/webserver.py), then a whole `eor run` against two
llama-cpp-python servers, one stopped mid-run."""

from __future__ import annotations

import threading
import time

import pytest

from eor.core.errors import ConfigError, ReaderError
from eor.readers.endpoints import EndpointPool
from eor.readers.openai_compat import OpenAIReader
from tests.webserver import chat_server

KEY = "replica-key"
FAST = {"attempts": 4, "base_delay": 0.01, "max_delay": 0.05}


@pytest.fixture
def replicas(monkeypatch):
    monkeypatch.setenv("EOR_TEST_REPLICA_KEY", KEY)
    servers = [chat_server(KEY), chat_server(KEY)]
    yield servers
    for server in servers:
        try:
            server.stop()
        except OSError:
            pass


def _reader(servers, concurrency: int = 2) -> OpenAIReader:
    return OpenAIReader(
        "m",
        base_url=[f"{server.url}/v1" for server in servers],
        api_key_env="EOR_TEST_REPLICA_KEY",
        concurrency=concurrency,
        retries=FAST,
        timeout=5,
    )


def _chats(server) -> int:
    return sum(path.endswith("/chat/completions") for path in server.paths())


def test_requests_are_spread_over_the_replicas(replicas) -> None:
    reader = _reader(replicas)
    prompts = [f"say the words number {n}" for n in range(40)]
    assert reader.generate(prompts) == [f"number {n}" for n in range(40)]
    served = [_chats(server) for server in replicas]
    assert sum(served) == 40 and min(served) >= 15, served  # least loaded, ties in turn
    assert [row["served"] for row in reader.endpoints.status()] == served
    assert reader.concurrency == 4  # 2 per replica
    one = OpenAIReader("m", base_url=f"{replicas[0].url}/v1/")
    assert one.identity == f"openai:{replicas[0].url}/v1|model=m|seed=0"  # one server: as before
    a, b = sorted(f"{server.url}/v1" for server in replicas)
    assert reader.identity == f"openai:{a},{b}|model=m|seed=0"  # the same whichever replica answers


def test_a_stopped_replica_is_left_out_and_comes_back(replicas) -> None:
    reader = _reader(replicas)
    reader.endpoints.first_cooldown = 0.2
    port = replicas[0].server_address[1]
    replicas[0].stop()
    prompts = [f"say the words number {n}" for n in range(20)]
    assert reader.generate(prompts) == [f"number {n}" for n in range(20)]  # nothing lost
    first, second = reader.endpoints.status()
    assert not first["healthy"] and first["failures"] >= 1 and first["served"] == 0
    assert second["served"] == 20
    replicas[0] = chat_server(KEY, port)  # the replica is back on its port
    deadline = time.monotonic() + 10
    while not reader.endpoints.status()[0]["healthy"] and time.monotonic() < deadline:
        reader.generate(["say the words health check"])
        time.sleep(0.05)
    assert reader.endpoints.status()[0]["healthy"]
    assert any(path.endswith("/models") for path in replicas[0].paths())  # found by its health check
    reader.generate(prompts)
    assert _chats(replicas[0]) >= 5


def test_when_every_replica_is_down_a_request_fails_after_max_wait(replicas) -> None:
    reader = _reader(replicas)
    reader.endpoints.max_wait = 0.5
    reader.endpoints.first_cooldown = 0.1
    for server in replicas:
        server.stop()
    started = time.monotonic()
    with pytest.raises(ReaderError):
        reader.generate(["say the words anyone there"])
    assert time.monotonic() - started < 5


def test_bounded_concurrency_per_endpoint() -> None:
    gate = threading.Event()
    pool = EndpointPool(["http://a", "http://b"], lambda url: None, concurrency=2)
    held = [pool.acquire() for _ in range(4)]
    assert sorted(e.url for e in held) == ["http://a", "http://a", "http://b", "http://b"]
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire()) or gate.set())
    waiter.start()
    assert not gate.wait(0.2)  # all four slots taken: the fifth waits
    pool.release(held[2], failed=False)
    assert gate.wait(2) and got[0] is held[2]
    waiter.join()


@pytest.mark.parametrize("urls", [[], ["http://a", "http://a/"]])
def test_bad_endpoint_lists(urls) -> None:
    with pytest.raises(ConfigError):
        EndpointPool(urls, lambda url: None, concurrency=1)
    with pytest.raises(ConfigError):
        EndpointPool(["http://a"], lambda url: None, concurrency=0)


# -- a whole run against two llama-cpp-python servers, one stopped mid-run -------------------------------------


def _strip_timings(record: dict) -> dict:
    members = {
        name: {k: v for k, v in out.items() if k not in ("seconds", "tokens")}
        for name, out in record["members"].items()
    }
    return {**{k: v for k, v in record.items() if k not in ("seconds", "members")}, "members": members}


def test_a_run_completes_on_one_server_when_the_other_stops(tmp_path, isolated_cache) -> None:
    import json

    from eor.commands.runner import run
    from eor.runs.records import read_records
    from tests.conftest import DEMO
    from tests.llama_server import LlamaServer

    first, second = LlamaServer(threads=1), LlamaServer(threads=1)
    try:
        first.wait_ready()
        second.wait_ready()

        def config(bases: list[str], name: str):
            path = tmp_path / f"{name}.yaml"
            reader = {"model": "smollm2", "backend": "openai", "max_tokens": 16}
            reader["openai"] = {"base_url": bases, "concurrency": 1, "retries": {"attempts": 5, "base_delay": 0.1}}
            path.write_text(
                json.dumps(
                    {
                        "reader": reader,
                        "corpus": {"path": str(DEMO / "corpus.jsonl")},
                        "members": ["ReFree", "BM25@1", "BM25@2"],
                        "voter": {"metrics": ["em", "f1"]},
                        "batch_size": 2,
                    }
                )
            )
            return path

        questions = DEMO / "questions.jsonl"
        alone = tmp_path / "alone"
        run(config([second.base], "alone"), questions, alone, limit=10, cache=False)

        both = tmp_path / "both"
        done: list[str] = []
        runner = threading.Thread(
            target=lambda: done.append(run(config([first.base, second.base], "both"), questions, both, 10, cache=False))
        )
        runner.start()
        written = both / "records.jsonl"
        deadline = time.monotonic() + 120
        while (not written.exists() or written.read_text().count("\n") < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        at_stop = written.read_text().count("\n")
        first.stop()  # mid-run: requests in flight to it fail and go to the other
        runner.join(timeout=300)
        assert done, "the run did not finish"
        assert 2 <= at_stop < 10, f"the server was stopped after {at_stop} of 10 questions: not mid-run"
        records = read_records(both)
        assert len(records) == 10 and not any(r.degraded for r in records)  # nothing lost
        assert [_strip_timings(r.to_dict()) for r in records] == [
            _strip_timings(r.to_dict()) for r in read_records(alone)
        ]
    finally:
        first.stop()
        second.stop()
