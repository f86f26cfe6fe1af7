"""A full disk at each write point: an index build, a records write, a cache write, a file written whole.

Each says one clear line naming the path and keeps what was written before: records stay whole and the same
command resumes them, the cache degrades to a warning while answers go on, no half-written index or file is
ever loaded. Where the machine lets a test mount a small tmpfs (as root) the disk is really full; everywhere,
failpoints (eor.core.faults, `NAME:COUNT:enospc`) raise ENOSPC at the same points.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from eor.cli import main
from eor.core.atomic import write_text_atomically
from eor.core.errors import DiskFullError
from eor.pipeline.stages.generation import GenerationStage
from eor.runs.generation_cache import GenerationCache
from eor.runs.records import RecordWriter, iter_records
from retrievers.bm25 import BM25Retriever
from tests.conftest import DEMO, ROOT, SHARED_DATA
from tests.test_generation_cache import Scripted

NQ_CORPUS = SHARED_DATA / "corpus" / "wiki-nq.jsonl"
SHIPPED = ROOT / "docs" / "records" / "nq-dev.jsonl.gz"


def _mount(folder: Path, size: str) -> bool:
    folder.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs (skipped where mounting is not allowed: the failpoint tests cover the same points)."""
    disk = tmp_path / "disk"
    if not _mount(disk, "1m"):
        pytest.skip("cannot mount a tmpfs on this machine (not root?); the failpoint tests cover these points")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave: int = 0) -> Path:
    """Fill `disk` but for `leave` bytes; returns the filler file (delete it to free the space)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    if leave:
        with filler.open("r+b") as handle:
            handle.truncate(max(filler.stat().st_size - leave, 0))
    return filler


def _records(count: int) -> list:
    return [record for _, record in zip(range(count), iter_records(SHIPPED), strict=False)]


@pytest.fixture
def failpoints(monkeypatch):
    monkeypatch.setattr("eor.core.faults._hits", Counter())
    return lambda spec: monkeypatch.setenv("EOR_FAILPOINTS", spec)


# -- an index build ------------------------------------------------------------------------------------


def test_an_index_build_on_a_full_disk_keeps_nothing_and_builds_once_there_is_room(small_disk, monkeypatch) -> None:
    monkeypatch.setenv("EOR_CACHE", str(small_disk / "cache"))
    with pytest.raises(DiskFullError, match=r"no space left on the device building the index .*bm25s-") as error:
        BM25Retriever(corpus_path=str(NQ_CORPUS))  # its index is 2.8 MB
    assert "\n" not in str(error.value)
    assert not list((small_disk / "cache" / "indexes").glob("bm25s-*"))  # nothing that could load
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    found = BM25Retriever(corpus_path=str(NQ_CORPUS), depth=3).invoke("who wrote the declaration of independence")
    assert len(found) == 3


def test_a_full_disk_while_the_index_arrays_are_mapped_raises_not_kills(small_disk, monkeypatch) -> None:
    """3 MB: the offsets and the first pass's chunks (1.4 MB) fit, the mapped arrays (2.1 MB) do not. Their
    blocks are reserved before the map is written, so the build raises ENOSPC instead of dying of SIGBUS."""
    subprocess.run(["mount", "-o", "remount,size=3m", str(small_disk)], check=True)
    monkeypatch.setenv("EOR_CACHE", str(small_disk / "cache"))
    with pytest.raises(DiskFullError, match=r"building the index .*bm25s-.*\.npy\)"):
        BM25Retriever(corpus_path=str(NQ_CORPUS))
    assert not list((small_disk / "cache" / "indexes").glob("bm25s-*"))


def test_the_command_says_one_line(small_disk, monkeypatch, capsys) -> None:
    monkeypatch.setenv("EOR_CACHE", str(small_disk / "cache"))
    _fill(small_disk, leave=64 * 1024)  # the demo corpus's offsets fit; its BM25 index (190 KB) does not
    assert main(["retrieve", "who wrote hamlet", "--members", "BM25@1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("eor: error: no space left on the device building the index ")
    assert "EOR_CACHE" in err[-1]


def test_an_index_write_failpoint(isolated_cache, failpoints) -> None:
    failpoints("index-write:1:enospc")
    with pytest.raises(DiskFullError, match="nothing half-built was kept"):
        BM25Retriever(corpus_path=str(DEMO / "corpus.jsonl"))  # the corpus's offsets index is the first write
    assert not [path for path in (isolated_cache / "indexes").iterdir() if path.is_dir()]  # a lock file stays
    failpoints("")
    assert BM25Retriever(corpus_path=str(DEMO / "corpus.jsonl"), depth=1).invoke("hamlet")


# -- records -------------------------------------------------------------------------------------------


def test_records_on_a_full_disk_stay_whole_and_resume(small_disk) -> None:
    records = _records(20)  # about 25 KB each
    _fill(small_disk, leave=160 * 1024)
    writer = RecordWriter(small_disk / "run")
    with pytest.raises(DiskFullError, match=r"writing .*records.jsonl: the records written before are kept"):
        for start in range(0, len(records), 2):
            writer.write(records[start : start + 2])
    writer.close()
    kept = [record.id for record in iter_records(small_disk / "run")]
    assert 0 < len(kept) < len(records) and kept == [record.id for record in records[: len(kept)]]
    (small_disk / "filler").unlink()
    with RecordWriter(small_disk / "run") as resumed:
        assert resumed.done_ids == set(kept)
        resumed.write([record for record in records if record.id not in resumed.done_ids])
    assert [record.to_dict() for record in iter_records(small_disk / "run")] == [r.to_dict() for r in records]


def _run_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"name: full-disk\nreader: {{model: smollm2-135m, max_tokens: 8, context_tokens: 2048}}\n"
        f"corpus: {{path: {DEMO / 'corpus.jsonl'}}}\nmembers: [ReFree, BM25@1]\nvoter: {{metrics: [em]}}\n"
    )
    return path


def test_eor_run_on_a_full_disk_says_one_line_and_the_same_command_resumes(tmp_path, isolated_cache) -> None:
    args = [sys.executable, "-m", "eor.cli", "run", "--config", str(_run_config(tmp_path))]
    args += ["--data", str(DEMO / "questions.jsonl"), "--limit", "6", "--batch-size", "2", "--no-cache"]
    args += ["--out", str(tmp_path / "run")]
    env = {**os.environ, "EOR_FAILPOINTS": "record-write:3:enospc"}
    failed = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert failed.returncode == 1, failed.stderr[-2000:]
    assert (
        failed.stderr.strip()
        .splitlines()[-1]
        .startswith(f"eor: error: no space left on the device writing {tmp_path / 'run' / 'records.jsonl'}")
    )
    assert len(list(iter_records(tmp_path / "run"))) == 2  # the first batch; the third record's line is torn
    env["EOR_FAILPOINTS"] = ""
    resumed = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    assert len({json.loads(line)["id"] for line in lines}) == len(lines) == 6


# -- the generation cache ------------------------------------------------------------------------------


def test_a_full_cache_disk_is_a_warning_and_answers_go_on(small_disk, caplog) -> None:
    with GenerationCache(small_disk / "generations.sqlite") as cache:
        stage = GenerationStage(Scripted(), cache)
        assert stage.generate(["warm"]) == ["mraw/8"]
        _fill(small_disk)
        prompts = [f"question {i} " + "x" * 3000 for i in range(40)]
        with caplog.at_level(logging.WARNING):
            assert stage.generate(prompts) == [f"{p[::-1]}/8" for p in prompts]
            assert stage.generate(["warm", "another " * 500]) == ["mraw/8", f"{('another ' * 500)[::-1]}/8"]
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "disk full, generations are not stored" in warnings[0]
        (small_disk / "filler").unlink()
        assert stage.generate(prompts[:2]) and cache.get_many([stage.key(prompts[0], None)])


def test_a_cache_write_failpoint(tmp_path, failpoints, caplog) -> None:
    with GenerationCache(tmp_path / "generations.sqlite") as cache:
        stage = GenerationStage(Scripted(), cache)
        failpoints("cache-write:1:enospc")
        with caplog.at_level(logging.WARNING):
            assert stage.generate(["a", "b"]) == ["a/8", "b/8"]
        assert "disk full" in caplog.text and cache.stats().entries == 0
        assert stage.generate(["a"]) == ["a/8"] and cache.stats().entries == 1


# -- files written whole (weights, reports, configs) ----------------------------------------------------


def test_a_file_written_whole_on_a_full_disk_is_left_as_it_was(small_disk) -> None:
    report = small_disk / "report.md"
    report.write_text("the old report\n")
    _fill(small_disk, leave=8 * 1024)
    with pytest.raises(DiskFullError, match=f"writing {report} \\(it was left as it was\\)"):
        write_text_atomically(report, "new\n" * 100_000)
    assert report.read_text() == "the old report\n"
    assert sorted(path.name for path in small_disk.iterdir()) == ["filler", "report.md"]  # no temporary file


def test_a_file_write_failpoint(tmp_path, failpoints) -> None:
    weights = tmp_path / "weights.json"
    failpoints("file-write:1:enospc")
    with pytest.raises(DiskFullError, match="nothing was written"):
        write_text_atomically(weights, "{}")
    assert not list(tmp_path.iterdir())
