from __future__ import annotations

import json

import pytest

from eor.core.data import check_question, load_questions, question_id
from eor.core.errors import InputError
from eor.core.results import Record
from eor.runs.records import RecordWriter, read_records
from tests.conftest import ROOT, write_jsonl


def test_questions_ids_answers_and_extra_fields(tmp_path) -> None:
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"question": "  who wrote hamlet ", "answers": ["Shakespeare"], "source": "x"},
            {"id": 7, "question": "capital of france", "answers": "Paris"},
            "",
            {"question": "who wrote hamlet"},
        ],
    )
    first, second, third = load_questions(path)
    assert first.question == "who wrote hamlet" and first.id == question_id("who wrote hamlet")
    assert first.extra == {"source": "x"} and first.answers == ["Shakespeare"]
    assert second.id == "7" and second.answers == ["Paris"]
    assert third.id == first.id + "-2"  # the same text twice keeps two distinct, stable ids
    assert [q.id for q in load_questions(path)] == [first.id, "7", third.id]
    assert len(load_questions(path, limit=2)) == 2


def test_a_question_may_hold_any_character_json_allows_raw(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    rows = [
        {"id": "a", "question": "who wrote\u2028hamlet", "answers": ["William\u2029Shakespeare"]},
        {"question": "b"},
    ]
    path.write_text("\r\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\r\n", encoding="utf-8")
    assert "\u2028" in path.read_text(encoding="utf-8")  # written raw, as eor's own records are
    first, second = load_questions(path)
    assert first.id == "a" and "hamlet" in first.question and first.answers == ["William\u2029Shakespeare"]
    assert second.question == "b"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (['{"question": "a"}', "{oops"], r"q.jsonl:2: not valid JSON"),
        (['{"q": "a"}'], r"q.jsonl:1: each line must be a JSON object with a 'question' field"),
        (['{"question": "   "}'], r"q.jsonl:1: the question is empty"),
        (['{"question": "a", "answers": [1]}'], r"'answers' must be a list of strings"),
        (['{"question": "a", "answer": ["b"]}'], r"q.jsonl:1: 'answer' is not read; name the acceptable answers"),
        (['{"id": "x", "question": "a"}', '{"id": "x", "question": "b"}'], r"q.jsonl:2: duplicate id 'x'"),
        ([""], "no questions found"),
    ],
)
def test_malformed_question_files(tmp_path, rows, message) -> None:
    with pytest.raises(InputError, match=message):
        load_questions(write_jsonl(tmp_path / "q.jsonl", rows))


def test_check_question() -> None:
    assert check_question("  hi ") == "hi"
    for bad in ("", " \n\t", None, "x" * 5000):
        with pytest.raises(InputError):
            check_question(bad)


def test_writer_appends_and_repairs_a_torn_line(tmp_path) -> None:
    with RecordWriter(tmp_path) as writer:
        writer.write([Record("a", "", [], {}), Record("b", "", [], {})])
    file = tmp_path / "records.jsonl"
    file.write_text(file.read_text() + '{"id": "c", "mem')  # an interrupted write
    assert [r.id for r in read_records(tmp_path)] == ["a", "b"]
    with RecordWriter(tmp_path) as writer:
        assert writer.done_ids == {"a", "b"}
        writer.write([Record("c", "", [], {})])
    assert [json.loads(line)["id"] for line in file.read_text().splitlines()] == ["a", "b", "c"]


def test_a_folder_of_compressed_records_alone_is_not_answered_again_beside_them(tmp_path) -> None:
    import gzip

    (tmp_path / "records.jsonl.gz").write_bytes(gzip.compress(b'{"id": "a", "question": "", "members": {}}\n'))
    with pytest.raises(InputError, match="unpack them into a run folder first: eor records unpack"):
        RecordWriter(tmp_path)
    assert not (tmp_path / "records.jsonl").exists()


def test_corrupt_records_name_the_line(tmp_path) -> None:
    (tmp_path / "records.jsonl").write_text('{"id": "a", "members": {}}\n{bad}\n{"id": "b", "members": {}}\n')
    with pytest.raises(InputError, match=r"records.jsonl:2"):
        read_records(tmp_path)
    with pytest.raises(InputError, match="records file not found"):
        read_records(tmp_path / "nope")


def test_packed_records_carry_their_pool_and_config(tmp_path) -> None:
    """`eor records pack`: one gzip file headed by the pool's identity and the run's config; readers skip the
    header, training finds the pool in it, and the same records pack to the same bytes."""
    import gzip

    from eor.cli import main
    from eor.runs.records import read_header
    from eor.runs.run_data import load_run
    from eor.runs.run_folder import recorded_pool

    run = tmp_path / "run"
    run.mkdir()
    member = {"answer": "Paris", "passages": [], "prompt": "p", "seconds": 0.5, "confidence": {"mean_logprob": -0.1}}
    rows = [{"id": f"q{i}", "question": "capital?", "answers": ["Paris"], "members": {"A": member}} for i in range(3)]
    (run / "records.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    pool = {"members": ["A"], "reader": "llama.cpp:model.gguf@sha256:0123", "corpus": {"file": "c.jsonl", "bytes": 9}}
    (run / "pool.json").write_text(json.dumps(pool))
    (run / "config.json").write_text(json.dumps({"members": ["A"], "reader": {"model": "m"}}))
    packed = tmp_path / "kept" / "run.jsonl.gz"
    assert main(["records", "pack", str(run), "--out", str(packed)]) == 0
    header = read_header(packed)
    assert header == {
        "version": 1,
        "pool": pool,
        "config": {"members": ["A"], "reader": {"model": "m"}},
        "questions": 3,
    }
    assert [r.to_dict() for r in read_records(packed)] == rows and read_header(run) is None
    assert recorded_pool(packed) == pool and recorded_pool(run) == pool
    data = load_run(packed)
    assert data.questions == 3 and data.confidence[0] == [{"mean_logprob": -0.1}] and data.has_confidence
    first = packed.read_bytes()
    assert main(["records", "pack", str(run), "--out", str(packed)]) == 0
    assert packed.read_bytes() == first and gzip.decompress(first).startswith(b'{"eor_records"')
    assert main(["records", "pack", str(tmp_path), "--out", str(packed)]) == 1  # not a run folder


def test_each_stretch_of_a_run_is_named_in_the_packed_header(tmp_path) -> None:
    """`eor run` notes each stretch (when, eor's version and git commit, questions already done); the packed
    header carries the list and unpacking restores it, so a resumed run keeps its history."""
    import subprocess

    from eor.runs.records import read_header
    from eor.runs.run_folder import MADE_BY_FILE, RunFolder, pack_records, unpack_records

    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text(json.dumps({"id": "q", "question": "?", "members": {}}) + "\n")
    (run / "pool.json").write_text(json.dumps({"members": ["A"], "reader": "m", "corpus": None}))
    (run / "config.json").write_text(json.dumps({"members": ["A"]}))
    RunFolder(run).note_stretch(0)
    RunFolder(run).note_stretch(1)
    pack_records(run, tmp_path / "run.jsonl.gz")
    made_by = read_header(tmp_path / "run.jsonl.gz")["made_by"]
    assert [stretch["questions_done"] for stretch in made_by] == [0, 1] and made_by[0]["eor"]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a checkout: the commit, marked when tracked files differ from it
        assert made_by[0]["commit"].split("+")[0] == head.stdout.strip()
    unpack_records(tmp_path / "run.jsonl.gz", tmp_path / "again")
    assert json.loads((tmp_path / "again" / MADE_BY_FILE).read_text()) == made_by


def test_typed_records_round_trip_every_shipped_record_unchanged():
    """The JSON format on disk does not change: every line of the shipped records (and a minimal old-style
    record without prompts, seconds or a vote) reads into a `Record` and writes back as the same object."""
    import gzip
    import json

    lines = []
    for path in sorted((ROOT / "docs" / "records").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            lines += [data for data in map(json.loads, handle) if "eor_records" not in data]  # not the header
    # fields of the question file come first, as eor writes them
    minimal = {"x": 1, "id": 7, "question": "q", "answers": [], "members": {"A": {"answer": "x", "passages": []}}}
    assert len(lines) > 1000
    for data in lines:  # byte for byte, keys in their order
        assert json.dumps(Record.from_dict(data, "test").to_dict()) == json.dumps(data)
    assert Record.from_dict(minimal, "test").to_dict() == {**minimal, "id": "7"}
    degraded = {**minimal, "id": "d", "degraded": ["B"], "degraded_reasons": {"B": "timed out"}}
    assert Record.from_dict(degraded, "test").degraded == {"B": "timed out"}
    assert list(Record.from_dict(degraded, "test").to_dict()) == list(degraded)


def test_a_record_keeps_what_it_cannot_read():
    """Fields of an unexpected shape are carried as they were, not dropped; failed members named without
    reasons (an older writer) are still failed members."""
    data = {
        "id": "q",
        "question": "?",
        "answers": "not a list",
        "members": {"A": {"answer": "x", "passages": [], "seconds": "slow", "tokens": [1]}},
        "vote": "A",
        "degraded": ["B"],
    }
    record = Record.from_dict(data, "test")
    assert record.answers == [] and record.vote is None and record.degraded == {"B": "unknown"}
    assert record.members["A"].seconds is None and record.members["A"].extra == {"seconds": "slow", "tokens": [1]}
    written = record.to_dict()
    assert written["answers"] == "not a list" and written["vote"] == "A" and written["degraded"] == ["B"]
    assert written["members"]["A"] == {"answer": "x", "passages": [], "seconds": "slow", "tokens": [1]}


def test_the_answer_is_credited_to_every_member_that_gave_it() -> None:
    """A tie between equal answers: the vote names the first member; `given_by` names all that gave the answer
    (equal once normalised), the vote's member first, and no member with another answer."""
    from eor.core.results import MemberOutput, Result

    outputs = {
        "ReFree": MemberOutput("George Washington", score=0.5),
        "BM25@1": MemberOutput("Washington", score=0.25),
        "Wiki@1": MemberOutput("george washington.", score=0.5),
        "PK": MemberOutput("", score=0.0),
    }
    result = Result("q", "who", "george washington.", "Wiki@1", outputs, {"total": 0.0})
    assert result.given_by == ["Wiki@1", "ReFree"]
    assert result.to_dict()["given_by"] == ["Wiki@1", "ReFree"]
    empty = Result("q", "who", "", "PK", outputs, {"total": 0.0})
    assert empty.given_by == ["PK"]  # an empty answer agrees with no one
