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


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`eor ARGS` in a process of its own; `timeout`: a guard against a hang, not a speed check (a command that
    answers many questions passes one that grows with them)."""
    environment = {**os.environ, **(env or {})}
    return subprocess.run([*EOR, *args], capture_output=True, text=True, env=environment, timeout=timeout)


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
        "given_by",
        "sources",
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
    from eor.core.answers import normalize_answer

    same = [
        n for n, m in result["members"].items() if normalize_answer(m["answer"]) == normalize_answer(result["answer"])
    ]
    assert result["given_by"][0] == result["member"] and sorted(result["given_by"]) == sorted(same)
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
    # records another pool made (another model file, reader or corpus) are never resumed by this one
    pool = json.loads((out / "pool.json").read_text())
    (out / "pool.json").write_text(json.dumps({**pool, "reader": "llama.cpp:another.gguf@sha256:0123456789abcdef"}))
    assert main(["run", "--config", str(config), "--data", str(data), "--out", str(out), "--limit", "6"]) == 1
    assert (out / "records.jsonl").read_text().splitlines() == lines  # nothing answered, nothing lost


def test_run_refuses_a_folder_of_another_config(tmp_path, isolated_cache) -> None:
    out = tmp_path / "run"
    data = write_jsonl(tmp_path / "q.jsonl", [{"question": "who painted the mona lisa"}])
    assert main(["run", "--config", str(small_config(tmp_path)), "--data", str(data), "--out", str(out)]) == 0
    other = small_config(tmp_path, members="[ReFree, BM25@2]")
    result = run_cli("run", "--config", str(other), "--data", str(data), "--out", str(out))
    assert result.returncode == 1 and "holds a run of a different config" in result.stderr
    assert len((out / "records.jsonl").read_text().splitlines()) == 1  # nothing lost
    longer = small_config(tmp_path, options="context_tokens: 1024")  # what differs is named
    result = run_cli("run", "--config", str(longer), "--data", str(data), "--out", str(out))
    assert result.returncode == 1 and "(it differs in reader.llama_cpp.context_tokens); choose" in result.stderr


def test_a_run_begun_before_an_upgrade_resumes(tmp_path) -> None:
    """A field a newer eor added, with its default, is not a change of config; any real change is."""
    from eor.commands.run_identity import same_run_config
    from eor.core.config import load_config

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
    assert main(["ask", question, "--config", config, "--members", "BM25@1,Wiki@1", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "\nWhy:\n  chosen:    by the vote (EoR eq. 7): " in out and "  agreement: " in out
    assert "the vote's account of each member" not in out  # the raw account only with --explain full
    assert main(["ask", question, "--config", config, "--members", "BM25@1", "--explain", "full"]) == 0
    assert "the vote's account of each member:" in capsys.readouterr().out
    assert main(["ask", question, "--config", config, "--members", "Nope,BM25@1"]) == 1
    assert "unknown member(s) 'Nope'; available: ReFree, BM25@1" in capsys.readouterr().err


def _command_parsers(parser, prefix: str = "eor"):
    """(name, parser) of every command and sub-command under `parser`."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _command_parsers(sub, f"{prefix} {name}")


def test_every_option_of_every_command_says_what_it_does() -> None:
    from eor.cli import build_parser

    commands = dict(_command_parsers(build_parser()))
    assert len(commands) >= 19  # 16 commands, cache's and records' actions
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in commands.items()
        for action in parser._actions
        if not action.help and action.dest != "action"
    ]
    assert missing == []
    text = {name: parser.format_help() for name, parser in commands.items()}
    assert "only the first N passages" in text["eor import-corpus"]
    assert "only the first N questions" in text["eor import-questions"]
    assert "records.jsonl[.gz]" in text["eor bench"]
    assert all("eor run" not in text[name].split("--shard-batches")[1][:80] for name in ("eor erag", "eor utility"))


def test_version_is_the_package_version() -> None:
    import tomllib

    version = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["version"]
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"eor {version}"


def test_models_says_what_is_installed_and_where(capsys) -> None:
    from eor.core.models import PACKAGED_MODELS, resolve_model

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name, model in PACKAGED_MODELS.items():
        block = out.split(name, 1)[1]
        state, path = model.status()
        assert (f"{state}: {path}" if path is not None else state) in block.split("install:")[0]
    if PACKAGED_MODELS["smollm2-135m"].status()[0] == "ready":  # used where pip put it: the path the reader loads
        assert f"ready: {resolve_model('smollm2-135m')}" in out
    assert "python -m llama_cpp.server --model PATH" in out


def test_a_model_without_its_packages_is_not_installed(monkeypatch) -> None:
    from eor.core import models

    missing = models.PackagedModel("nothing", "gguf", ("no-such-distribution-eor",), "absent", lambda: Path("/x"))
    assert missing.status() == ("not installed", None)
    cache = Path("/nonexistent-eor-cache")
    monkeypatch.setenv("EOR_CACHE", str(cache))
    state, path = models.PACKAGED_MODELS["qwen2.5-0.5b"].status()
    if state != "not installed":  # its six packages are there: it is joined into the cache on first use
        assert (state, path) == ("assembled on first use", cache / "models" / models.QWEN_FILE)


def test_train_and_bench_warn_on_few_questions(tmp_path, caplog) -> None:
    """5 questions: both commands still work, and warn (a line on stderr) how little the figures can tell."""
    import gzip

    root = Path(__file__).parent.parent
    with gzip.open(root / "docs/records/nq-train.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines = handle.readlines()
    header, records = lines[0], lines[1:]
    few = tmp_path / "few.jsonl"
    few.write_text(header + "".join(records[:5]), encoding="utf-8")
    config = ["--config", str(root / "configs/nq-offline.yaml")]
    weights = tmp_path / "w.json"
    assert main(["train", str(few), "--voter", "paper", "--restarts", "0", *config, "--out", str(weights)]) == 0
    assert "training and cross-validation on 5 questions only" in caplog.text and "±44 points" in caplog.text
    caplog.clear()
    assert main(["bench", str(few), *config, "--weights", str(weights), "--out", str(tmp_path / "r")]) == 0
    assert "a benchmark on 5 questions only" in caplog.text
    caplog.clear()
    many = tmp_path / "many.jsonl"
    many.write_text(header + "".join(records[:100]), encoding="utf-8")
    assert main(["bench", str(many), *config, "--out", str(tmp_path / "r2"), "--resamples", "10"]) == 0
    assert "questions only" not in caplog.text


def test_a_reader_that_is_down_is_named_once_with_its_address(tmp_path, monkeypatch, caplog, capsys) -> None:
    """Nothing listens on the port: one error line names the address and the cause once, for every member."""
    from tests.llama_server import free_port

    monkeypatch.setenv("EOR_TEST_KEY", "k")
    url = f"http://127.0.0.1:{free_port()}/v1"
    options = f"backend: openai, openai: {{base_url: '{url}', api_key_env: EOR_TEST_KEY, retries: 2}}"
    config = small_config(tmp_path, model="m", options=options, members="[ReFree, BM25@1, BM25@2]")
    assert main(["ask", "who wrote hamlet", "--config", str(config), "--no-cache"]) == 1
    # a BM25 index built on the way (when no earlier test built the demo corpus's) shows its progress bar first
    err = "\n".join(line for line in capsys.readouterr().err.split("\n") if "\r" not in line)
    assert err.count("\n") == 1 and err.count(url) == 1 and "Connection refused" in err
    assert "ReFree, BM25@1, BM25@2: generation failed" in err
    assert "left out of the vote" not in caplog.text  # the error says it; no warning per member before it
