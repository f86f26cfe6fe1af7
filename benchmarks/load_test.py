"""Load test of `eor serve`: start the server on 127.0.0.1, run N concurrent clients for T seconds, report.

Each client sends `POST /v1/answer` (or `/v1/chat/completions` with --endpoint chat) with the demo questions
in turn (client c starts at question c, so concurrent clients ask different questions), waits for the answer
and sends the next one, until T seconds have passed; requests already sent are waited for (each bounded by
--request-timeout). Reported: completed requests per second over the whole run, latency percentiles of the
successful requests, and the errors by kind (4xx, 5xx, connection failures), plus how many answers named
degraded members. The server's output goes to a log file beside the JSON results.

    python -m benchmarks.load_test [--config configs/default.yaml] [--clients 8] [--duration 60]
        [--endpoint answer|chat] [--members ReFree,BM25@3] [--out runs/load-test] [-- SERVE ARGS ...]

Arguments after `--` go to `eor serve` unchanged (e.g. `-- --member-timeout 30 --max-batch 4`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import requests

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Sample:
    client: int
    started: float
    seconds: float
    status: int  # 0: no HTTP response (connection error or client timeout)
    degraded: bool = False
    error: str = ""
    question: str = ""
    degraded_members: list[str] | None = None  # the members a 200 answer names as left out of its vote


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def load_questions(path: Path) -> list[str]:
    questions = [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]
    if not questions:
        raise SystemExit(f"no questions in {path}")
    return questions


def start_server(args: argparse.Namespace, port: int, log: Path) -> tuple[subprocess.Popen, float]:
    command = [
        sys.executable,
        "-m",
        "eor.cli",
        "serve",
        "--config",
        str(args.config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        *args.serve_args,
    ]
    if args.weights:
        command += ["--weights", str(args.weights)]
    print("$", shlex.join(command), flush=True)
    handle = log.open("w")
    server = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT)
    started = time.perf_counter()
    deadline = started + args.startup_timeout
    while time.perf_counter() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with code {server.returncode}; see {log}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return server, time.perf_counter() - started
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    stop_server(server)
    raise SystemExit(f"the server was not ready within {args.startup_timeout} s; see {log}")


def stop_server(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def client_loop(
    number: int, url: str, args: argparse.Namespace, questions: list[str], end: float, samples: list[Sample]
) -> None:
    session = requests.Session()
    members = args.members.split(",") if args.members else None
    index = number
    while time.perf_counter() < end:
        question = questions[index % len(questions)]
        index += 1
        body: dict[str, Any]
        if args.endpoint == "chat":
            path, body = "/v1/chat/completions", {"model": "eor", "messages": [{"role": "user", "content": question}]}
        else:
            path, body = "/v1/answer", {"question": question}
        if members:
            body["members"] = members
        tick = time.perf_counter()
        try:
            response = session.post(url + path, json=body, timeout=args.request_timeout)
        except requests.RequestException as exc:
            samples.append(Sample(number, tick, time.perf_counter() - tick, 0, error=type(exc).__name__))
            continue
        seconds = time.perf_counter() - tick
        sample = Sample(number, tick, seconds, response.status_code, question=question)
        if response.status_code == 200:
            data = response.json()
            sample.degraded_members = list((data.get("eor", data)).get("degraded") or [])
            sample.degraded = bool(sample.degraded_members)
        else:
            sample.error = response.text[:300]
        samples.append(sample)


def summarise(samples: list[Sample], wall: float, args: argparse.Namespace, load_seconds: float) -> dict:
    ok = [s.seconds for s in samples if s.status == 200]
    percentiles = {f"p{q}": round(float(np.percentile(ok, q)), 2) if ok else None for q in (50, 95, 99)}
    return {
        "config": str(args.config),
        "endpoint": args.endpoint,
        "members": args.members or "all",
        "clients": args.clients,
        "duration_s": args.duration,
        "wall_s": round(wall, 1),
        "load_s": round(load_seconds, 1),
        "requests": len(samples),
        "ok": len(ok),
        "requests_per_s": round(len(ok) / wall, 3) if wall else 0.0,
        "latency_s": {
            **percentiles,
            "mean": round(float(np.mean(ok)), 2) if ok else None,
            "max": round(max(ok), 2) if ok else None,
        },
        "errors": {
            "4xx": sum(400 <= s.status < 500 for s in samples),
            "5xx": sum(s.status >= 500 for s in samples),
            "connection": sum(s.status == 0 for s in samples),
        },
        "degraded_answers": sum(s.degraded for s in samples),
        "error_examples": sorted({f"{s.status}: {s.error}" for s in samples if s.status != 200})[:5],
        "serve_args": args.serve_args,
    }


def markdown(summary: dict) -> str:
    latency = summary["latency_s"]
    errors = summary["errors"]
    return "\n".join(
        [
            "| clients | duration | requests (ok) | requests/s | p50 | p95 | p99 | max | 4xx | 5xx | conn. "
            "| degraded |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {summary['clients']} | {summary['duration_s']} s (wall {summary['wall_s']} s) | {summary['requests']} "
            f"({summary['ok']}) | {summary['requests_per_s']} | {latency['p50']} s | {latency['p95']} s | "
            f"{latency['p99']} s | {latency['max']} s | {errors['4xx']} | {errors['5xx']} | {errors['connection']} | "
            f"{summary['degraded_answers']} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    serve_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--weights", type=Path)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds during which requests start (60)")
    parser.add_argument("--endpoint", choices=["answer", "chat"], default="answer")
    parser.add_argument("--members", help="comma-separated member subset per request (default: all)")
    parser.add_argument("--questions", type=Path, default=ROOT / "eor" / "demo" / "questions.jsonl")
    parser.add_argument("--request-timeout", type=float, default=900.0, help="client-side limit per request")
    parser.add_argument("--startup-timeout", type=float, default=900.0, help="limit on loading the models")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "load-test", help="folder for results")
    args = parser.parse_args(argv)
    args.serve_args = serve_args
    if args.clients < 1 or not 0 < args.duration <= 3600:
        parser.error("need --clients >= 1 and 0 < --duration <= 3600")
    questions = load_questions(args.questions)
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server, load_seconds = start_server(args, port, args.out / "server.log")
    print(f"server ready after {load_seconds:.1f} s; {args.clients} clients for {args.duration:g} s", flush=True)
    samples: list[Sample] = []
    try:
        begin = time.perf_counter()
        end = begin + args.duration
        threads = [
            threading.Thread(target=client_loop, args=(c, f"http://127.0.0.1:{port}", args, questions, end, samples))
            for c in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - begin
    finally:
        stop_server(server)
    summary = summarise(samples, wall, args, load_seconds)
    summary["machine"] = {"cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2)}
    (args.out / "load_test.json").write_text(json.dumps(summary, indent=2))
    (args.out / "samples.jsonl").write_text("".join(json.dumps(s.__dict__) + "\n" for s in samples))
    print(json.dumps(summary, indent=2))
    print(markdown(summary))
    return 1 if summary["errors"]["5xx"] or summary["errors"]["connection"] else 0


if __name__ == "__main__":
    sys.exit(main())
