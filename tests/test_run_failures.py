"""`eor run` under member failures: the failed members are listed at the end, `--retry-failed` runs only them
again, merges their answers into the records and votes again; a torn last line is repaired with a message; a
question no member answers is left out (the batch's others recorded, the next run tries it again), and questions in
a row that none answers stop the run (with real SmolLM2 and tests/test_server_api.py's retrievers: Picky fails on
questions that mention 'explode', Boom on every question)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from eor.cli import main
from eor.commands.plan_command import Pilot
from eor.core.data import Question, make_question
from eor.core.errors import InputError
from eor.pipeline.stages.failures import STOP_AFTER, LeftOut, no_member_left
from eor.readers.base import BatchedReader
from eor.runs.records import RECORDS_FILE
from tests.conftest import DEMO, write_jsonl
from tests.test_server_api import server_test_config

DOWN = "EOR_TEST_FLAKY_DOWN"


class Flaky(BaseRetriever):
    """Down (raises) while the environment variable EOR_TEST_FLAKY_DOWN is 1, else one passage."""

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        if os.environ.get(DOWN) == "1":
            raise ConnectionError("search API unreachable")
        return [Document(page_content="Leonardo da Vinci painted the Mona Lisa.", metadata={"title": "Mona Lisa"})]


class Scripted(BatchedReader):
    """Answers 'Leonardo da Vinci' when the prompt holds that name, else 'unknown'."""

    name = "scripted"

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    def _generate_batch(self, prompts, max_tokens):
        self.prompts += prompts
        return ["Leonardo da Vinci" if "Leonardo" in prompt else "unknown" for prompt in prompts]


def config(folder: Path) -> Path:
    path = folder / "flaky.yaml"
    path.write_text(
        f"""
name: flaky
corpus: {{path: {DEMO / "corpus.jsonl"}}}
sources:
  Flaky: {{type: langchain, params: {{class: "{__name__}:Flaky"}}}}
members: [ReFree, Flaky]
voter: {{metrics: [em]}}
"""
    )
    return path


def test_failed_members_are_listed_and_retried_alone(tmp_path, isolated_cache, capsys, monkeypatch) -> None:
    readers: list[Scripted] = []
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: readers.append(Scripted()) or readers[-1])
    data = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": f"q{n}", "question": f"who painted the mona lisa ({n})", "answers": ["Leonardo da Vinci"]}
            for n in range(3)
        ],
    )
    out = tmp_path / "run"
    args = ["run", "--config", str(config(tmp_path)), "--data", str(data), "--out", str(out), "--no-cache"]
    monkeypatch.setenv(DOWN, "1")
    assert main(args) == 0
    summary = capsys.readouterr().out
    assert "members that failed (left out of those questions' votes):" in summary
    assert "Flaky" in summary
    assert "3 questions; e.g. retrieval failed: ConnectionError: search API unreachable" in summary
    assert "--retry-failed" in summary
    before = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert all(r["degraded"] == ["Flaky"] and list(r["members"]) == ["ReFree"] for r in before)
    assert all(r["vote"]["answer"] == "unknown" for r in before)

    monkeypatch.setenv(DOWN, "0")  # the API is back: only Flaky runs again
    assert main([*args, "--retry-failed"]) == 0
    summary = capsys.readouterr().out
    assert "retried the failed members of 3 questions: 3 member answers recovered" in summary
    assert "members that failed" not in summary
    after = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in after] == ["q0", "q1", "q2"]  # rewritten in place, nothing duplicated
    for old, new in zip(before, after, strict=True):
        assert list(new["members"]) == ["ReFree", "Flaky"] and "degraded" not in new
        assert new["members"]["ReFree"] == old["members"]["ReFree"]  # the members that worked are kept as they were
        assert new["members"]["Flaky"]["answer"] == "Leonardo da Vinci"
        assert set(new["vote"]["scores"]) == {"ReFree", "Flaky"}
    assert len(readers[-1].prompts) == 3 and all("Assuming" in p for p in readers[-1].prompts)  # Flaky's only
    assert "EoR (vote)" in summary
    with pytest.raises(InputError, match="retried failed members"):  # a retry's figures are not a pilot's
        Pilot.from_run(out)
    # a second --retry-failed has nothing to do
    assert main([*args, "--retry-failed"]) == 0
    assert "retried the failed members of 0 questions" in capsys.readouterr().out


class Interrupted(Scripted):
    """Scripted, until its `stop_at`-th batch of prompts: there the user presses Ctrl-C."""

    def __init__(self, stop_at: int) -> None:
        super().__init__()
        self.stop_at, self.calls = stop_at, 0

    def _generate_batch(self, prompts, max_tokens):
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return super()._generate_batch(prompts, max_tokens)


def test_an_interrupted_retry_keeps_the_batches_retried_before(tmp_path, isolated_cache, capsys, monkeypatch) -> None:
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: Scripted())
    rows = [{"id": f"q{n}", "question": f"who painted the mona lisa ({n})"} for n in range(3)]
    data = write_jsonl(tmp_path / "q.jsonl", rows)
    out = tmp_path / "run"
    args = ["run", "--config", str(config(tmp_path)), "--data", str(data), "--out", str(out), "--no-cache"]
    monkeypatch.setenv(DOWN, "1")
    assert main(args) == 0
    monkeypatch.setenv(DOWN, "0")
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: Interrupted(stop_at=2))
    # one question a batch: the second question's retry is interrupted
    assert main([*args, "--retry-failed", "--batch-size", "1"]) == 130
    assert "finished work is saved" in capsys.readouterr().err
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r.get("degraded") for r in records] == [None, ["Flaky"], ["Flaky"]]  # the first batch was written
    assert records[0]["members"]["Flaky"]["answer"] == "Leonardo da Vinci"
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: Scripted())
    assert main([*args, "--retry-failed", "--batch-size", "1"]) == 0
    assert "retried the failed members of 2 questions: 2 member answers recovered" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["q0", "q1", "q2"] and not any("degraded" in r for r in records)


def test_a_torn_last_line_is_repaired_with_a_message(tmp_path, isolated_cache, capsys, monkeypatch) -> None:
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: Scripted())
    monkeypatch.setenv(DOWN, "0")
    data = write_jsonl(tmp_path / "q.jsonl", [{"id": "q0", "question": "who painted the mona lisa"}])
    out = tmp_path / "run"
    args = ["run", "--config", str(config(tmp_path)), "--data", str(data), "--out", str(out), "--no-cache"]
    assert main(args) == 0
    capsys.readouterr()
    finished = (out / "records.jsonl").read_bytes()
    (out / "records.jsonl").write_bytes(finished + b'{"id": "q1", "ques')
    assert main(args) == 0
    assert "repaired: cut a torn last line (18 bytes)" in capsys.readouterr().out
    assert (out / "records.jsonl").read_bytes() == finished


GOOD = ["who painted the mona lisa", "who painted the last supper", "where is the mona lisa kept"]
BAD = "why did the star explode"


def _questions(path: Path, texts: list[str]) -> Path:
    rows = [{"id": f"q{i}", "question": text, "answers": ["Leonardo da Vinci"]} for i, text in enumerate(texts)]
    return write_jsonl(path, rows)


def _run_batches(config: Path, data: Path, out: Path) -> int:
    args = ["run", "--config", str(config), "--data", str(data), "--out", str(out), "--no-cache", "--batch-size", "3"]
    return main(args)


def _recorded(out: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (out / RECORDS_FILE).read_text().splitlines()]


@pytest.fixture
def scripted(monkeypatch) -> list[Scripted]:
    readers: list[Scripted] = []
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: readers.append(Scripted()) or readers[-1])
    return readers


def test_a_question_no_member_answers_is_left_out_and_the_others_recorded(
    tmp_path, isolated_cache, scripted, capsys, caplog
) -> None:
    config = server_test_config(tmp_path, ["Picky", "Boom"])
    data = _questions(tmp_path / "questions.jsonl", [GOOD[0], BAD, GOOD[1], GOOD[2]])
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        assert _run_batches(config, data, out) == 0
    assert _recorded(out) == ["q0", "q2", "q3"]  # the batch [q0, q1, q2] recorded past q1
    captured = capsys.readouterr()
    printed = captured.out
    assert "4/4" in captured.err  # the progress bar counts the question left out as done with
    assert "3 questions in" in printed and f"1 question not recorded: no member answered (why: {out}" in printed
    warned = "not recorded (run again to try it again): every member failed on question q1"
    assert any(warned in message for message in caplog.messages)
    why = json.loads((out / "unanswered.json").read_text())
    assert list(why) == ["q1"] and "Picky: retrieval failed: RuntimeError: cannot parse the query" in why["q1"]
    # the same command tries it again (and leaves it out again), the recorded three untouched
    before = (out / RECORDS_FILE).read_bytes()
    assert _run_batches(config, data, out) == 0
    assert (out / RECORDS_FILE).read_bytes() == before and list(json.loads((out / "unanswered.json").read_text())) == [
        "q1"
    ]
    assert "(3 were already done)" in capsys.readouterr().out


def test_questions_in_a_row_no_member_answers_stop_the_run_and_a_resume_goes_past_them(
    tmp_path, isolated_cache, scripted, capsys
) -> None:
    config = server_test_config(tmp_path, ["Picky", "Boom"])
    bad = [f"{BAD} number {i}" for i in range(STOP_AFTER)]
    data = _questions(tmp_path / "questions.jsonl", [GOOD[0], *bad, GOOD[1], GOOD[2]])
    out = tmp_path / "run"
    assert _run_batches(config, data, out) != 0
    err = capsys.readouterr().err
    assert f"stopped: no member answered {STOP_AFTER} questions in a row" in err and "run again to resume" in err
    assert _recorded(out) == ["q0"]  # the answered question of the stopped batch [q0, q1, q2] is written
    assert list(json.loads((out / "unanswered.json").read_text())) == ["q1", "q2", "q3"]
    # resumed: the three fail again but no longer count toward a stop, and the run goes on past them
    assert _run_batches(config, data, out) == 0
    assert _recorded(out) == ["q0", "q4", "q5"]
    assert "3 questions not recorded" in capsys.readouterr().out


class _Answered:
    """A stand-in result: the question it answers."""

    def __init__(self, item) -> None:
        self.id = item.id


def _answering(bad: set[str], calls: list[list[str]]):
    """`answer` for LeftOut: raises the UnansweredError of the first question of the batch in `bad`."""

    def answer(batch):
        calls.append([item.id for item in batch])
        for item in batch:
            if item.id in bad:
                raise no_member_left(item, {"Boom": "retrieval failed: ValueError: index offline"})
        return [_Answered(item) for item in batch]

    return answer


def _items(*ids: str) -> list[Question]:
    return [make_question(f"question {qid}", id=qid) for qid in ids]


def test_left_out_answers_around_each_failure_in_order_and_counts_only_new_failures_in_a_row() -> None:
    calls: list[list[str]] = []
    left = LeftOut()
    results = left.answered(_items("a", "b", "c", "d", "e"), _answering({"b", "d"}, calls))
    assert [r.id for r in results] == ["a", "c", "e"] and left.stop is None
    assert calls == [["a", "b", "c", "d", "e"], ["a"], ["c", "d", "e"], ["c"], ["e"]]  # batches around each failure
    assert list(left.reasons) == ["b", "d"] and "every member failed on question b" in left.reasons["b"]
    # a batch of one that fails is asked once; one answered in between resets the count (bad, good, bad, bad)
    calls.clear()
    left = LeftOut()
    answer = _answering({"p", "r", "s"}, calls)
    for batch in (_items("p"), _items("q"), _items("r"), _items("s")):
        left.answered(batch, answer)
    assert left.stop is None and left.in_a_row == 2 and calls == [["p"], ["q"], ["r"], ["s"]]
    # STOP_AFTER in a row: the results before them kept, nothing asked after
    calls.clear()
    left = LeftOut()
    ids = ["x", *[f"bad{i}" for i in range(STOP_AFTER)], "y"]
    results = left.answered(_items(*ids), _answering(set(ids[1:-1]), calls))
    assert [r.id for r in results] == ["x"] and left.stop is not None and left.stop.question_id == ids[-2]
    assert len(calls) == STOP_AFTER + 1 and calls[-1] == [ids[-2], "y"]  # nothing asked after the stop
    # the same questions known from an earlier run do not count: the run goes past them
    left = LeftOut(known=ids[1:-1])
    results = left.answered(_items(*ids), _answering(set(ids[1:-1]), []))
    assert [r.id for r in results] == ["x", "y"] and left.stop is None
