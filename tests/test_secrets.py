"""Secrets are kept: recognisable keys are planted in the environment (a web-search key, a reader key, a wrong
reader key, the server's bearer key), every command that handles them runs against servers on 127.0.0.1 that
are careless with keys (they repeat a rejected key in their error pages), and everything those commands leave
or say is scanned for the keys: logs, records, `config.json`, `generation.json`, the generation cache, bench
reports, error messages and every HTTP response of `eor serve`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.webserver import ECHO_QUERY, chat_server, page_server, serper_server

EOR = [sys.executable, "-m", "eor.cli"]
SEARCH_KEY = "planted-search-key-5b0e2a9d7c41"
READER_KEY = "sk-planted-reader-key-93f7c1e06a2b"
WRONG_READER_KEY = "sk-planted-wrong-key-1c8d4e7f0b35"
SERVER_KEY = "planted-bearer-key-6e2f9a4c1d07"
KEYS = (SEARCH_KEY, READER_KEY, WRONG_READER_KEY, SERVER_KEY)
QUESTIONS = ["bell rock lighthouse", ECHO_QUERY, "caledonian canal"]


@pytest.fixture(scope="module")
def servers():
    pages = page_server()
    rows = [
        (f"{pages.url}/lighthouse.html", "Bell Rock Lighthouse", "oldest"),
        (f"{pages.url}/canal.html", "Caledonian Canal", "canal"),
    ]
    search = serper_server(SEARCH_KEY, {QUESTIONS[0]: rows, QUESTIONS[2]: rows[::-1]})
    chat = chat_server(READER_KEY)
    yield search, chat
    for server in (pages, search, chat):
        server.stop()


def _config(folder: Path, search, chat, key_variable: str = "EOR_TEST_READER_KEY") -> Path:
    path = folder / f"config-{key_variable}.yaml"
    path.write_text(
        json.dumps(
            {  # JSON is YAML
                "name": "secrets",
                "reader": {
                    "model": "m",
                    "backend": "openai",
                    "base_url": f"{chat.url}/v1",
                    "api_key_env": key_variable,
                    "max_tokens": 8,
                    "retries": 1,
                },
                "sources": {
                    "SE": {
                        "type": "web",
                        "params": {
                            "backend": "serper",
                            "base_url": search.url,
                            "api_key_env": "EOR_TEST_SEARCH_KEY",
                            "allowed_hosts": ["127.0.0.1"],
                            "timeout": 2,
                            "cache_path": str(folder / "web-cache"),
                            "retries": 1,
                        },
                    }
                },
                "members": ["ReFree", "SE@1"],
                "voter": {"metrics": ["em", "f1"]},
            }
        )
    )
    return path


def _environment(folder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "EOR_TEST_SEARCH_KEY": SEARCH_KEY,
        "EOR_TEST_READER_KEY": READER_KEY,
        "EOR_TEST_WRONG_KEY": WRONG_READER_KEY,
        "EOR_TEST_SERVER_KEY": SERVER_KEY,
        "EOR_CACHE": str(folder / "eor-cache"),
        "EOR_GENERATION_CACHE": str(folder / "generations.sqlite"),
    }


def _eor(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*EOR, *args], capture_output=True, text=True, env=_environment(folder), timeout=600)


def _leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [key for key in KEYS if key.encode() in data]


def _scan_tree(folder: Path) -> dict[str, list[str]]:
    return {
        str(path.relative_to(folder)): found
        for path in sorted(folder.rglob("*"))
        if path.is_file() and (found := _leaks(path.read_bytes()))
    }


def test_no_key_in_logs_records_cache_reports_or_errors(servers, tmp_path):
    search, chat = servers
    config = _config(tmp_path, search, chat)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": q, "answers": ["x"]}) + "\n" for q in QUESTIONS))

    ran = _eor(tmp_path, "run", "--config", str(config), "--data", str(questions), "--out", str(tmp_path / "run"))
    assert ran.returncode == 0, ran.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert records[0]["members"]["SE@1"]["passages"], "the web member must have searched with the key"
    echo = next(r for r in records if r["question"] == ECHO_QUERY)
    assert "SE@1" in echo["degraded"]  # the careless search server failed, repeating the key in its error page

    good = tmp_path / "answered.jsonl"  # bench needs every member on every question: the two without a fault
    good.write_text("".join(json.dumps({"question": q, "answers": ["x"]}) + "\n" for q in QUESTIONS if q != ECHO_QUERY))
    again = _eor(tmp_path, "run", "--config", str(config), "--data", str(good), "--out", str(tmp_path / "run-2"))
    assert again.returncode == 0, again.stderr[-2000:]
    bench = _eor(tmp_path, "bench", str(tmp_path / "run-2"), "--out", str(tmp_path / "report"))
    assert bench.returncode == 0, bench.stderr[-2000:]
    wrong_config = _config(tmp_path, search, chat, "EOR_TEST_WRONG_KEY")
    wrong = _eor(tmp_path, "ask", QUESTIONS[0], "--config", str(wrong_config), "--no-cache")  # ask the server
    assert "401" in wrong.stdout + wrong.stderr  # the reader's server refused the key (and repeated it)

    assert _leaks(ran.stdout + ran.stderr) == []
    assert _leaks(again.stdout + again.stderr + bench.stdout + bench.stderr) == []
    assert _leaks(wrong.stdout + wrong.stderr) == []
    assert _scan_tree(tmp_path) == {}  # records, config.json, generation.json, caches, report files


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_no_key_in_any_response_of_the_server(servers, tmp_path):
    search, chat = servers
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("w") as sink:
        server = subprocess.Popen(
            [
                *EOR,
                "serve",
                "--config",
                str(_config(tmp_path, search, chat)),
                "--port",
                str(port),
                "--api-key-env",
                "EOR_TEST_SERVER_KEY",
                "--log-level",
                "debug",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=_environment(tmp_path),
        )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        good = {"Authorization": f"Bearer {SERVER_KEY}"}
        exchanges = [
            requests.get(f"{base}/healthz", timeout=10),
            requests.get(f"{base}/v1/models", headers=good, timeout=10),
            requests.get(f"{base}/v1/models", timeout=10),
            requests.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {SERVER_KEY[:-1]}"}, timeout=10),
            requests.post(f"{base}/v1/answer", json={"question": QUESTIONS[0]}, headers=good, timeout=120),
            requests.post(f"{base}/v1/answer", json={"question": ECHO_QUERY}, headers=good, timeout=120),
            requests.post(f"{base}/v1/answer", data=b"{not json", headers=good, timeout=10),
            requests.post(f"{base}/v1/answer", json={"question": QUESTIONS[0]}, timeout=10),
            requests.post(
                f"{base}/v1/chat/completions",
                headers=good,
                timeout=120,
                json={"model": "eor", "messages": [{"role": "user", "content": QUESTIONS[2]}]},
            ),
            requests.get(f"{base}/openapi.json", timeout=10),
        ]
        statuses = [response.status_code for response in exchanges]
        assert statuses[:5] == [200, 200, 401, 401, 200] and statuses[7] == 401, statuses
        for response in exchanges:
            assert _leaks(response.content) == [], response.url
            assert _leaks(json.dumps(dict(response.headers))) == [], response.url
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert _leaks(log.read_bytes()) == []
