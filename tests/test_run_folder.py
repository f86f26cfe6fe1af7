"""The run folder (eor.runs.run_folder): each file round trips through `RunFolder`, the JSON files are written
atomically (an interrupted write leaves the old file whole and no partial file), and a missing or broken file
is an InputError that names the file and what writes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import eor.core.atomic
from eor.cli import main
from eor.core.errors import InputError
from eor.core.results import Record
from eor.runs.records import RECORDS_FILE
from eor.runs.run_folder import (
    CONFIG_FILE,
    GENERATION_FILE,
    MADE_BY_FILE,
    POOL_FILE,
    RunFolder,
    pack_records,
    recorded_config,
    recorded_pool,
    unpack_records,
)
from tests.conftest import DEMO, ROOT

CONFIG = {"members": ["A", "B"], "reader": {"model": "m"}, "name": "Café", "weights": None}
POOL = {"members": ["A", "B"], "reader": "llama.cpp:m.gguf@sha256:0123", "corpus": {"file": "c.jsonl", "bytes": 9}}
GENERATION = {"cache_hits": 1, "generated": 2, "prompt_tokens": 30, "questions": 2, "wall_seconds": 1.5}


def _record(qid: str) -> Record:
    member = {"answer": "Paris", "passages": [], "prompt": "p", "seconds": 0.5}
    return Record.from_dict({"id": qid, "question": "capital?", "answers": ["Paris"], "members": {"A": member}}, qid)


def test_each_json_file_round_trips(tmp_path) -> None:
    folder = RunFolder(tmp_path / "run")  # made when the first file is written
    folder.write_config(CONFIG)
    folder.write_pool(POOL)
    folder.write_generation(GENERATION)
    folder.write_made_by([{"started": "2024-01-01T00:00:00+00:00", "questions_done": 0}])
    assert folder.read_config() == CONFIG and folder.read_pool() == POOL
    assert folder.read_generation() == GENERATION
    assert folder.read_made_by() == [{"started": "2024-01-01T00:00:00+00:00", "questions_done": 0}]
    for name in (CONFIG_FILE, POOL_FILE, GENERATION_FILE, MADE_BY_FILE):
        assert folder.has(name) and folder.file(name).read_text(encoding="utf-8").endswith("\n")
    assert "Café" in folder.file(CONFIG_FILE).read_text(encoding="utf-8")  # UTF-8 as it is
    assert sorted(path.name for path in folder.path.iterdir()) == sorted(
        [CONFIG_FILE, POOL_FILE, GENERATION_FILE, MADE_BY_FILE]
    )  # no temporary file left behind


def test_records_round_trip_through_eor_records(tmp_path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.records_file() is None and list(folder.iter_records()) == []
    with folder.record_writer() as writer:
        writer.write([_record("q1"), _record("q2")])
    assert folder.records_file() == tmp_path / RECORDS_FILE
    assert [record.id for record in folder.read_records()] == ["q1", "q2"]
    assert [record.to_dict() for record in folder.iter_records()] == [_record(q).to_dict() for q in ("q1", "q2")]
    folder.replace_records([_record("q3")])
    assert [record.id for record in folder.read_records()] == ["q3"]


def test_stretches_are_appended_to_made_by(tmp_path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.read_made_by() == []  # before the first stretch
    folder.note_stretch(0)
    folder.note_stretch(5)
    stretches = folder.read_made_by()
    assert [stretch["questions_done"] for stretch in stretches] == [0, 5]
    assert all({"started", "eor", "commit"} <= set(stretch) for stretch in stretches)


def test_of_a_records_file_is_its_folder(tmp_path) -> None:
    assert RunFolder.of(tmp_path / RECORDS_FILE).path == tmp_path
    assert RunFolder.of(tmp_path).path == tmp_path
    assert RunFolder(str(tmp_path)).path == tmp_path  # a str is taken as a Path


@pytest.mark.parametrize(
    ("name", "write"),
    [
        (CONFIG_FILE, lambda folder, data: folder.write_config(data)),
        (POOL_FILE, lambda folder, data: folder.write_pool(data)),
        (GENERATION_FILE, lambda folder, data: folder.write_generation(data)),
    ],
)
def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path, monkeypatch, name, write) -> None:
    folder = RunFolder(tmp_path)
    write(folder, {"old": True})
    before = folder.file(name).read_bytes()
    real_open = open

    class Dying:
        """A file that takes part of the text, then fails as a killed or full write would."""

        def __init__(self, *args, **kwargs) -> None:
            self._handle = real_open(*args, **kwargs)

        def write(self, text: str) -> int:
            self._handle.write(text[: len(text) // 2])
            self._handle.flush()
            raise OSError("interrupted mid-write")

        def __enter__(self) -> Dying:
            return self

        def __exit__(self, *exc: object) -> None:
            self._handle.close()

    monkeypatch.setattr(eor.core.atomic, "open", Dying, raising=False)
    with pytest.raises(OSError, match="interrupted mid-write"):
        write(folder, {"new": True, "padding": "x" * 10_000})
    monkeypatch.undo()
    assert folder.file(name).read_bytes() == before  # the old file, whole
    assert [path.name for path in tmp_path.iterdir()] == [name]  # no partial file beside it
    assert json.loads(before) == {"old": True}


@pytest.mark.parametrize(
    ("name", "read"),
    [
        (CONFIG_FILE, RunFolder.read_config),
        (POOL_FILE, RunFolder.read_pool),
        (GENERATION_FILE, RunFolder.read_generation),
    ],
)
def test_a_missing_or_broken_file_names_itself_and_its_writer(tmp_path, name, read) -> None:
    folder = RunFolder(tmp_path)
    with pytest.raises(InputError, match=rf"{name} not found: `eor run` .*writes it"):
        read(folder)
    folder.file(name).write_text('{"torn": ', encoding="utf-8")
    with pytest.raises(InputError, match=rf"{name} cannot be read \(.*\): not the file `eor run`"):
        read(folder)
    folder.file(name).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InputError, match=rf"{name} is not a JSON object: not the file `eor run`"):
        read(folder)


def test_a_broken_made_by_names_itself(tmp_path) -> None:
    folder = RunFolder(tmp_path)
    folder.file(MADE_BY_FILE).write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match=rf"{MADE_BY_FILE} is not a JSON list"):
        folder.note_stretch(0)


def test_recorded_config_and_pool_from_a_folder_or_a_packed_file(tmp_path) -> None:
    folder = RunFolder(tmp_path / "run")
    assert recorded_config(tmp_path) is None and recorded_pool(tmp_path) is None  # records from before eor kept them
    with folder.record_writer() as writer:
        writer.write([_record("q1")])
    folder.write_config({**CONFIG, "corpus": {"path": "/home/someone/c.jsonl"}})
    folder.write_pool(POOL)
    folder.note_stretch(0)
    for where in (folder.path, folder.file(RECORDS_FILE)):  # the folder, or its records file
        assert recorded_pool(where) == POOL and recorded_config(where)["name"] == "Café"
    packed = tmp_path / "kept" / "run.jsonl.gz"
    assert pack_records(folder.path, packed) == 1
    first = packed.read_bytes()
    assert first[3] & 0x08 == 0  # the gzip header names no file (it would be a temporary one's)
    assert pack_records(folder.path, tmp_path / "elsewhere.jsonl.gz") == 1
    assert (tmp_path / "elsewhere.jsonl.gz").read_bytes() == first  # the same bytes, wherever and whenever packed
    assert recorded_pool(packed) == POOL
    assert recorded_config(packed)["corpus"] == {"path": "c.jsonl"}  # no machine paths in a packed file
    again = RunFolder(tmp_path / "again")
    assert unpack_records(packed, again.path) == 1
    assert again.read_pool() == POOL and again.read_config()["weights"] is None
    assert again.read_made_by() == folder.read_made_by()
    assert [record.to_dict() for record in again.read_records()] == [_record("q1").to_dict()]


def test_pack_refuses_a_folder_without_config_and_pool(tmp_path) -> None:
    with pytest.raises(InputError, match=f"needs {CONFIG_FILE} and {POOL_FILE}"):
        pack_records(tmp_path, tmp_path / "run.jsonl.gz")


HOLD = """
import sys
from eor.runs.run_folder import RunFolder
with RunFolder(sys.argv[1]).writing():
    print("held", flush=True)
    sys.stdin.read()  # held until the test closes this process's input
"""


def test_one_writer_a_folder_a_second_eor_run_is_refused_at_once(tmp_path, capsys) -> None:
    """Another process holds the folder (as a running `eor run` does): a second `eor run` into it is refused
    before anything is written; once the holder is gone (killed: the system drops its lock), the folder opens."""
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(InputError, match=rf"being written by another eor command \(pid {holder.pid}\)"),
            RunFolder(out).writing(),
        ):
            pass
        config, data = ROOT / "configs" / "default.yaml", DEMO / "questions.jsonl"
        assert main(["run", "--config", str(config), "--data", str(data), "--out", str(out)]) == 1
        assert f"another eor command (pid {holder.pid})" in capsys.readouterr().err
        packed = ROOT / "docs" / "records" / "nq-nocorpus-learn200.jsonl.gz"
        assert main(["records", "unpack", str(packed), "--out", str(out)]) == 1  # nor unpacked into
        assert f"another eor command (pid {holder.pid})" in capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".writer.lock"]  # nothing written beside the holder
    finally:
        holder.kill()
        holder.wait()
    with RunFolder(out).writing():
        assert (out / ".writer.lock").read_text().strip() == str(os.getpid())


def test_a_run_into_a_file_is_refused(tmp_path) -> None:
    file = tmp_path / "records.jsonl"
    file.write_text("")
    with pytest.raises(InputError, match="is a file: a run is written into a folder"), RunFolder(file).writing():
        pass
