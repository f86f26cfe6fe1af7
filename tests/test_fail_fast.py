"""Mistakes are caught before any work: each bad option or config fails in under 2 s with one error line,
before records are read, similarities computed or a model loaded."""

from __future__ import annotations

import time

import pytest

from eor.cli import main
from tests.conftest import DEMO, ROOT

RECORDS = str(ROOT / "docs" / "records" / "nq-train.jsonl.gz")


def config(tmp_path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


GOOD = f"corpus: {{path: {DEMO / 'corpus.jsonl'}}}\nmembers: [ReFree, BM25@1]\n"


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
    started = time.perf_counter()
    assert main(args) == 1
    assert time.perf_counter() - started < 2
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
        (GOOD + "voter: {metrics: [em, f2]}\n", "voter.metrics: unknown metric(s) f2; available: "),
        (GOOD + "voter: {pooling: median}\n", "voter.pooling: unknown pooling 'median'; available: mean"),
        (GOOD + "members: [ReFree, BM26@1]\n", "member 'BM26@1': unknown source(s) BM26"),
        ("name: x\nmembers: [ReFree\nreader: {model: m}\n", "c.yaml:3:7: invalid YAML: "),
    ],
)
def test_config_mistakes_fail_before_any_model_loads(tmp_path, capsys, text, message) -> None:
    started = time.perf_counter()
    assert main(["ask", "who wrote hamlet", "--config", config(tmp_path, text), "--no-cache"]) == 1
    assert time.perf_counter() - started < 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_serving_the_network_without_a_key_is_refused(tmp_path, capsys) -> None:
    started = time.perf_counter()
    assert main(["serve", "--config", config(tmp_path, GOOD), "--host", "0.0.0.0"]) == 1
    assert time.perf_counter() - started < 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing to serve 0.0.0.0 without an API key" in err[0]
    assert "--allow-unauthenticated" in err[0]
