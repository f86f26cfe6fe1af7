"""The command line: answers, runs with resume, and one clear line (no traceback) for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eor.cli import main
from tests.conftest import DEMO, write_jsonl

EOR = [sys.executable, "-m", "eor.cli"]


def small_config(tmp_path: Path, **changes: str) -> Path:
    """SmolLM2 (fast) over the demo corpus with four members."""
    options = changes.get("options", "context_tokens: 2048")
    text = f"""
name: cli-test
reader: {{model: {changes.get("model", "smollm2-135m")}, max_tokens: 8, {options}}}
corpus: {{path: {DEMO / "corpus.jsonl"}}}
members: {changes.get("members", "[ReFree, BM25@1, Wiki@1, BM25@1&Wiki@1]")}
voter: {{metrics: [em, f1]}}
batch_size: 2
"""
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*.yaml')))}.yaml"
    path.write_text(text)
    return path


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*EOR, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600)


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    heavy = "{'torch', 'transformers', 'llama_cpp', 'langchain_core', 'numpy'}"
    code = f"import sys, eor.cli; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    result = run_cli("--help")
    assert result.returncode == 0 and "ask" in result.stdout and "run" in result.stdout


def test_ask_json(tmp_path, isolated_cache, capsys) -> None:
    assert main(["ask", "who painted the mona lisa", "--config", str(small_config(tmp_path)), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {
        "id",
        "question",
        "answer",
        "abstained",
        "probability",
        "member",
        "members",
        "timings",
        "stages",
    }
    assert list(result["members"]) == ["ReFree", "BM25@1", "Wiki@1", "BM25@1&Wiki@1"]  # uniform weights: no skip
    stages = result["stages"]
    assert stages["voting"]["members_run"] == 4 and stages["voting"]["members_skipped"] == 0
    reader = stages["generation"]["reader"]  # what llama.cpp reported for the answer prompts
    assert reader["requests"] == 4 and 1 <= reader["generated"] <= 4  # identical prompts are generated once
    assert reader["prompt_tokens"] > 20 * reader["generated"] and 1 <= reader["generated_tokens"] <= 8 * 4
    assert reader["prompt_seconds"] > 0 and reader["generation_seconds"] > 0
    assert result["answer"] == result["members"][result["member"]]["answer"]
    member = result["members"]["BM25@1&Wiki@1"]
    assert set(member) == {"answer", "passages", "prompt", "seconds", "score", "tokens", "confidence"}
    tokens = member["tokens"]  # generated now (an isolated cache): what its prompt and answer took
    assert tokens["prompt"] + tokens["reused"] > 40 and 1 <= tokens["generated"] <= 8
    assert len(member["passages"]) == 2 and set(member["passages"][0]) == {"id", "title", "text", "score"}
    assert result["members"]["ReFree"]["passages"] == []


def test_run_writes_records_and_resumes(tmp_path, isolated_cache) -> None:
    config, out = small_config(tmp_path), tmp_path / "run"
    data = DEMO / "questions.jsonl"
    assert main(["run", "--config", str(config), "--data", str(data), "--out", str(out), "--limit", "3"]) == 0
    first = (out / "records.jsonl").read_text().splitlines()
    assert len(first) == 3
    record = json.loads(first[0])
    assert {"id", "question", "answers", "members", "vote"} <= set(record)
    assert set(record["members"]["BM25@1"]) - {"tokens", "confidence"} == {"answer", "passages", "prompt", "seconds"}
    assert json.loads((out / "config.json").read_text())["members"][0] == "ReFree"
    # Interrupted mid-write: a torn line; the re-run keeps the finished records and completes the rest.
    with (out / "records.jsonl").open("a") as handle:
        handle.write('{"id": "torn", "ques')
    assert main(["run", "--config", str(config), "--data", str(data), "--out", str(out), "--limit", "5"]) == 0
    lines = (out / "records.jsonl").read_text().splitlines()
    assert lines[:3] == first and len(lines) == 5
    assert len({json.loads(line)["id"] for line in lines}) == 5


def test_run_refuses_a_folder_of_another_config(tmp_path, isolated_cache) -> None:
    out = tmp_path / "run"
    data = write_jsonl(tmp_path / "q.jsonl", [{"question": "who painted the mona lisa"}])
    assert main(["run", "--config", str(small_config(tmp_path)), "--data", str(data), "--out", str(out)]) == 0
    other = small_config(tmp_path, members="[ReFree, BM25@2]")
    result = run_cli("run", "--config", str(other), "--data", str(data), "--out", str(out))
    assert result.returncode == 1 and "holds a run of a different config" in result.stderr
    assert len((out / "records.jsonl").read_text().splitlines()) == 1  # nothing lost


def test_a_run_begun_before_an_upgrade_resumes(tmp_path) -> None:
    """A field a newer eor added, with its default, is not a change of config; any real change is."""
    from eor.config import load_config
    from eor.runner import same_run_config

    resolved = {**load_config(small_config(tmp_path)).to_dict(), "weights": None}
    older = json.loads(json.dumps(resolved))
    del older["voter"]["metric_params"]  # config.json of a run begun before metric_params existed
    assert older != resolved and same_run_config(older, resolved)
    changed = json.loads(json.dumps(older))
    changed["voter"]["pooling"] = "max"
    assert not same_run_config(changed, resolved)
    assert not same_run_config({**older, "weights": "/elsewhere.json"}, resolved)
    assert not same_run_config({**older, "newer_key": 1}, resolved)  # from a newer eor: cannot tell
    assert not same_run_config([], resolved)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("empty-question", "the question is empty"),
        ("missing-config", "config file not found"),
        ("unknown-member", "unknown source(s) Wikki"),
        ("bad-member", "invalid retriever name 'BM25@@1' at position 5"),
        ("unknown-model", "unknown model 'gpt-9'"),
        ("missing-key", "EOR_NO_SUCH_KEY, which is not set"),
        ("malformed-data", "q.jsonl:2: not valid JSON"),
        ("missing-data", "questions file not found"),
    ],
)
def test_errors_are_one_line(tmp_path, case: str, message: str) -> None:
    config = small_config(tmp_path)
    data = write_jsonl(tmp_path / "q.jsonl", [{"question": "a"}, "{broken"])
    args = {
        "empty-question": ["ask", "   ", "--config", str(config)],
        "missing-config": ["ask", "hi", "--config", str(tmp_path / "none.yaml")],
        "unknown-member": ["ask", "hi", "--config", str(small_config(tmp_path, members="[Wikki@3]"))],
        "bad-member": ["ask", "hi", "--config", str(small_config(tmp_path, members="[BM25@@1]"))],
        "unknown-model": ["ask", "hi", "--config", str(small_config(tmp_path, model="gpt-9"))],
        "missing-key": [
            "ask",
            "hi",
            "--config",
            str(
                small_config(
                    tmp_path, model="gpt-4o", options="backend: openai, openai: {api_key_env: EOR_NO_SUCH_KEY}"
                )
            ),
        ],
        "malformed-data": ["run", "--config", str(config), "--data", str(data), "--out", str(tmp_path / "o")],
        "missing-data": [
            "run",
            "--config",
            str(config),
            "--data",
            str(tmp_path / "x"),
            "--out",
            str(tmp_path / "o"),
        ],
    }[case]
    result = run_cli(*args)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("eor: error:")]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_ask_a_subset_of_members_and_why(tmp_path, isolated_cache, capsys) -> None:
    config = str(small_config(tmp_path))
    question = "who painted the mona lisa"
    args = ["ask", question, "--config", config, "--members", "BM25@1, Wiki@1", "--explain", "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["members"]) == ["BM25@1", "Wiki@1"]  # the pool's order
    explanation = result["explanation"]
    assert set(explanation["members"]) == {"BM25@1", "Wiki@1"} and explanation["answer"] == result["answer"]
    assert explanation["members"][result["member"]]["chosen"] is True
    assert main(["ask", question, "--config", config, "--members", "BM25@1", "--explain"]) == 0
    assert "why (the vote's account of each member):" in capsys.readouterr().out
    assert main(["ask", question, "--config", config, "--members", "Nope,BM25@1"]) == 1
    assert "unknown member(s) 'Nope'; available: ReFree, BM25@1" in capsys.readouterr().err
