"""Mistakes are caught before any work: each bad option or config fails with one error line before records
are read, a corpus or index opened or a model loaded. What a command did is read from the files it opened
(Python's audit events), not from how long it took, so the tests hold on a slow machine too."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from eor.cli import main
from tests.conftest import DEMO, ROOT

RECORDS = str(ROOT / "docs" / "records" / "nq-train.jsonl.gz")


def config(tmp_path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


GOOD = f"corpus: {{path: {DEMO / 'corpus.jsonl'}}}\nmembers: [ReFree, BM25@1]\n"

#: what a file opened by work names: records, the corpus, an index, model weights (code is not work)
WORK = ("nq-train.jsonl.gz", "corpus.jsonl", ".gguf", ".safetensors", "pytorch_model.bin", f"{os.sep}indexes{os.sep}")
CODE = (".py", ".pyc", ".so")

_opened: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and args and isinstance(args[0], str | bytes | os.PathLike):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # process-wide and permanent: it records only inside `no_work`


@contextmanager
def no_work() -> Iterator[None]:
    """Fail if the block opens a file of WORK."""
    global _opened
    _opened = []
    try:
        yield
        work = [path for path in _opened if any(mark in path for mark in WORK) and not path.endswith(CODE)]
        assert not work, f"work was done before the mistake was caught: opened {work}"
    finally:
        _opened = None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["train", RECORDS, "--out", "w.json", "--pooling", "median"],
            "--pooling: unknown pooling 'median'; available: mean",
        ),
        (
            ["train", RECORDS, "--out", "w.json", "--metric", "foo"],
            "--metric: unknown correctness metric 'foo'; available: em",
        ),
        (["train", RECORDS, "--out", "w.json", "--metrics", "em,nope"], "--metrics: unknown similarity metric(s) nope"),
        (["train", RECORDS, "--out", "w.json", "--voter", "majority"], "unknown voter 'majority'; available: auto"),
        (["ask", "q", "--config", "{config}", "--members", ","], "--members: name at least one member"),
    ],
)
def test_bad_choices_fail_at_once(tmp_path, capsys, args, message) -> None:
    args = [arg.replace("{config}", config(tmp_path, GOOD)) for arg in args]
    with no_work():
        assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("eor: error: ") and message in err[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "--config", "c.yaml", "--data", "q.jsonl", "--out", "o", "--batch-size", "0"],
            "expected a whole number ≥ 1, got 0",
        ),
        (
            ["run", "--config", "c.yaml", "--data", "q.jsonl", "--out", "o", "--limit", "x"],
            "expected a whole number, got 'x'",
        ),
        (["train", RECORDS, "--out", "w.json", "--cv", "1"], "expected a whole number ≥ 2, got 1"),
        (["train", RECORDS, "--out", "w.json", "--max-loss", "-1"], "expected a finite number ≥ 0, got -1"),
        (["train", RECORDS, "--out", "w.json", "--cost", "euros"], "invalid choice: 'euros'"),
        (["design", RECORDS, "--config", "c.yaml", "--out", "d", "--rates", "281"], "expected PROMPT,GENERATED"),
        (["design", RECORDS, "--config", "c.yaml", "--out", "d", "--rates", "281,0"], "above 0, e.g. 281,60"),
        (["design", RECORDS, "--config", "c.yaml", "--out", "d", "--repeats", "0"], "expected a whole number ≥ 1"),
        (
            ["design", RECORDS, "--config", "c.yaml", "--out", "d", "--max-loss", "0.5", "--budget", "2"],
            "argument --budget: not allowed with argument --max-loss",
        ),
    ],
)
def test_impossible_numbers_are_refused_by_the_parser(capsys, args, message) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "voter: {metrics: [em, f2]}\n", "voter.metrics: unknown similarity metric(s) f2; available: "),
        (GOOD + "voter: {pooling: median}\n", "voter.pooling: unknown pooling 'median'; available: mean"),
        (GOOD + "members: [ReFree, BM26@1]\n", "members[1] 'BM26@1': unknown source(s) BM26"),
        ("name: x\nmembers: [ReFree\nreader: {model: m}\n", "c.yaml:3:7: invalid YAML: "),
    ],
)
def test_config_mistakes_fail_before_any_model_loads(tmp_path, capsys, text, message) -> None:
    path = config(tmp_path, text)
    with no_work():
        assert main(["ask", "who wrote hamlet", "--config", path, "--no-cache"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_serving_the_network_without_a_key_is_refused(tmp_path, capsys) -> None:
    path = config(tmp_path, GOOD)
    with no_work():
        assert main(["serve", "--config", path, "--host", "0.0.0.0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing to serve 0.0.0.0 without an API key" in err[0]
    assert "--allow-unauthenticated" in err[0]


def test_the_guard_sees_records_being_read() -> None:
    with pytest.raises(AssertionError, match="nq-train.jsonl.gz"), no_work():
        open(RECORDS, "rb").close()
