"""Kill -9 at any moment: `eor run` and `eor erag` are killed with SIGKILL at chosen moments (failpoints, see
eor.core.faults: during retrieval, with the reader's outputs not yet stored, inside the cache's transaction, with
half a record line on disk) and at random times, then resumed. Afterwards every question is recorded exactly
once, no line is torn or repeated, the records finished before a kill are unchanged, the records equal those
of an uninterrupted run apart from timings, and the generation cache is readable.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from eor.runs.generation_cache import GenerationCache
from tests.conftest import DEMO

EOR = [sys.executable, "-m", "eor.cli"]
QUESTIONS = 8


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"""
name: kill-test
reader: {{model: smollm2-135m, max_tokens: 8, context_tokens: 2048}}
corpus: {{path: {DEMO / "corpus.jsonl"}}}
members: [ReFree, PK, BM25@1, BM25@2]
voter: {{metrics: [em, f1]}}
prompts: {{parametric_max_tokens: 24}}
batch_size: 2
"""
    )
    return path


def _start(args: list[str], failpoints: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "EOR_FAILPOINTS": failpoints or ""}
    return subprocess.Popen([*EOR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(process: subprocess.Popen) -> tuple[int, str]:
    out, err = process.communicate(timeout=600)
    return process.returncode, out + err


def _run_args(config: Path, out: Path, cache: Path | None) -> list[str]:
    cache_args = ["--cache", str(cache)] if cache else ["--no-cache"]
    return [
        "run",
        "--config",
        str(config),
        "--data",
        str(DEMO / "questions.jsonl"),
        "--limit",
        str(QUESTIONS),
        "--out",
        str(out),
        *cache_args,
    ]


def _finished_lines(out: Path) -> list[str]:
    """The complete lines of records.jsonl (a torn last line excluded)."""
    path = out / "records.jsonl"
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return text[: text.rfind("\n") + 1].splitlines()


def _untimed(line: str) -> dict:
    record = json.loads(line)
    for member in record["members"].values():
        member.pop("seconds", None)
        member.pop("tokens", None)
    return record


def _check_resumed(out: Path, reference: Path, cache: Path) -> None:
    text = (out / "records.jsonl").read_text(encoding="utf-8")
    assert text.endswith("\n")
    lines = text.splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids)) == QUESTIONS  # every question exactly once
    expected = {json.loads(line)["id"]: _untimed(line) for line in _finished_lines(reference)}
    assert {record_id: _untimed(line) for record_id, line in zip(ids, lines, strict=True)} == expected
    stats = GenerationCache(cache).stats()  # opens, reads: the cache survived its kills
    assert stats.entries > 0


def _kill_sequence(args: list[str], out: Path, failpoints: list[str]) -> list[str]:
    """Run `args` once per failpoint (each must die by SIGKILL), checking after each kill that the records
    finished before it are unchanged; returns the outputs of the runs."""
    outputs = []
    for point in failpoints:
        before = _finished_lines(out)
        status, output = _finish(_start(args, point))
        assert status == -signal.SIGKILL, f"{point}: exit {status}\n{output[-2000:]}"
        assert _finished_lines(out)[: len(before)] == before, f"{point}: finished records changed"
        outputs.append(output)
    return outputs


def test_eor_run_killed_at_each_failpoint_resumes_to_the_same_records(tmp_path):
    config = _config(tmp_path)
    reference = tmp_path / "reference"
    status, output = _finish(_start(_run_args(config, reference, None)))
    assert status == 0, output[-2000:]

    out, cache = tmp_path / "killed", tmp_path / "generations.sqlite"
    args = _run_args(config, out, cache)
    points = ["retrieval:3", "generation:2", "cache-write:2", "record-write:3", "retrieval:5", "record-write:1"]
    outputs = _kill_sequence(args, out, points)
    status, output = _finish(_start(args))
    assert status == 0, output[-2000:]
    # The record-write kills left half a line on disk; the next run cut it off and said so.
    assert any("repaired: cut a torn last line" in text for text in [*outputs[4:], output])
    _check_resumed(out, reference, cache)


def test_eor_run_killed_at_random_times_resumes_to_the_same_records(tmp_path):
    config = _config(tmp_path)
    reference = tmp_path / "reference"
    assert _finish(_start(_run_args(config, reference, None)))[0] == 0

    out, cache = tmp_path / "killed", tmp_path / "generations.sqlite"
    args = _run_args(config, out, cache)
    rng = random.Random(20261124)
    kills = 0
    for _ in range(4):
        before = _finished_lines(out)
        process = _start(args)
        time.sleep(rng.uniform(2.0, 9.0))  # start-up (imports, model load) takes a few seconds of these
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        _finish(process)
        assert _finished_lines(out)[: len(before)] == before
    status, output = _finish(_start(args))
    assert status == 0, output[-2000:]
    assert kills >= 1
    _check_resumed(out, reference, cache)


def _scrubbed(value):
    """eRAG's results without measured times."""
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items() if "second" not in k and "time" not in k}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def test_eor_erag_killed_resumes_to_the_same_results(tmp_path):
    config = _config(tmp_path)

    def args(out: Path, cache: Path | None) -> list[str]:
        cache_args = ["--cache", str(cache)] if cache else ["--no-cache"]
        return [
            "erag",
            "--config",
            str(config),
            "--data",
            str(DEMO / "questions.jsonl"),
            "--member",
            "BM25",
            "--k",
            "3",
            "--limit",
            "6",
            "--cost-questions",
            "0",
            "--batch-size",
            "1",  # one question (its 3 documents) per reader call: a cache transaction per question
            "--out",
            str(out),
            *cache_args,
        ]

    reference = tmp_path / "reference"
    status, output = _finish(_start(args(reference, None)))
    assert status == 0, output[-2000:]

    out, cache = tmp_path / "killed", tmp_path / "generations.sqlite"
    for point in ["cache-write:2", "cache-write:3", "cache-write:1"]:  # eRAG labels skip the generation stage
        status, output = _finish(_start(args(out, cache), point))
        assert status == -signal.SIGKILL, f"{point}: exit {status}\n{output[-2000:]}"
        assert not (out / "erag.json").exists()  # nothing half-written: the results come whole at the end
    status, output = _finish(_start(args(out, cache)))
    assert status == 0, output[-2000:]
    assert GenerationCache(cache).stats().entries > 0
    produced = json.loads((out / "erag.json").read_text())
    expected = json.loads((reference / "erag.json").read_text())
    assert _scrubbed(produced["questions"] if "questions" in produced else produced) == _scrubbed(
        expected["questions"] if "questions" in expected else expected
    )
