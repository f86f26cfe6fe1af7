"""The one generation cache: keys worked out by hand, the real SmolLM2 reader served from the cache, two
processes writing at once, a writer killed with SIGKILL mid-transaction, `--no-cache`, `eor cache stats` /
`eor cache clear`, and the project's error for a file that is not a cache."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eor.cli import main
from eor.core.errors import CacheError, InputError, ReaderError
from eor.pipeline.stages.generation import GenerationStage
from eor.runs.generation_cache import (
    Generation,
    GenerationCache,
    default_cache_path,
    generation_key,
    open_cache,
    open_cache_or_memory,
)
from tests.conftest import DEMO, ROOT

PROMPTS = ["Say hello.", "Name a colour.", "Say hello."]


class Scripted:
    """A reader with an identity whose outputs are worked out from the prompt; records every call."""

    name = "scripted"
    default_max_tokens = 8

    def __init__(self, identity: str = "scripted:v1", fail: bool = False) -> None:
        self.identity = identity
        self.fail = fail
        self.calls: list[list[str]] = []

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        self.calls.append(list(prompts))
        if self.fail:
            raise ReaderError("the scripted reader is down")
        return [f"{prompt[::-1]}/{max_tokens or self.default_max_tokens}" for prompt in prompts]


@pytest.fixture
def cache(tmp_path) -> GenerationCache:
    with GenerationCache(tmp_path / "generations.sqlite") as opened:
        yield opened


# -- keys and the cached reader -----------------------------------------------------------------------


def test_the_key_is_the_sha256_of_canonical_json() -> None:
    by_hand = '{"params":{"max_tokens":8},"prompt":"Qui était Napoléon ?","reader":"r:1"}'
    expected = hashlib.sha256(by_hand.encode("utf-8")).hexdigest()
    assert generation_key("r:1", "Qui était Napoléon ?", {"max_tokens": 8}) == expected
    assert generation_key("r:1", "Qui était Napoléon ?", {"max_tokens": 9}) != expected
    assert generation_key("r:2", "Qui était Napoléon ?", {"max_tokens": 8}) != expected


class Renamed:
    """`reader` under another identity (as if its model file or context size had changed)."""

    def __init__(self, reader, identity: str) -> None:
        self.reader, self.identity, self.name = reader, identity, reader.name

    def generate(self, prompts, max_tokens=None):
        return self.reader.generate(prompts, max_tokens=max_tokens)


def test_only_distinct_misses_reach_the_reader_in_one_call(cache) -> None:
    reader = Scripted()
    stage = GenerationStage(reader, cache)
    assert stage.generate(["cd", "ab", "cd"]) == ["dc/8", "ba/8", "dc/8"]
    assert reader.calls == [["ab", "cd"]]  # distinct, and sorted: prompts sharing a prefix run back to back
    completions = stage.complete(["cd", "ef", "ab", "ef"])
    assert [c.text for c in completions] == ["dc/8", "fe/8", "ba/8", "fe/8"]
    assert reader.calls == [["ab", "cd"], ["ef"]]
    assert [c.cached for c in completions] == [True, False, True, False]
    assert stage.stats.requests == 7 and stage.stats.unique == 5  # repeats included; distinct per call
    assert stage.stats.cache_hits == 2 and stage.stats.generated == 3  # distinct
    assert stage.stats.calls == 2
    # max_tokens is part of the key: None means the reader's default (8), so 8 is a hit and 4 a miss
    assert stage.generate(["ab"], max_tokens=8) == ["ba/8"] and len(reader.calls) == 2
    assert stage.generate(["ab"], max_tokens=4) == ["ba/4"] and reader.calls[-1] == ["ab"]
    # another identity (another model file, context size, ...) never reads these entries
    other = Scripted(identity="scripted:v2")
    assert GenerationStage(other, cache).generate(["ab"]) == ["ba/8"] and other.calls == [["ab"]]
    assert cache.stats().readers == {"scripted:v1": 4, "scripted:v2": 1}


class Bar:
    """A progress bar that records what it is told."""

    def __init__(self, total: int) -> None:
        self.total, self.updates, self.closed = total, [], False

    def update(self, count: int) -> None:
        self.updates.append(count)

    def close(self) -> None:
        self.closed = True


def test_a_caller_cuts_the_prompts_to_generate_into_reader_calls(cache) -> None:
    """eRAG's way in: its `batch_size` questions per reader call, with a progress bar over what is generated."""
    reader = Scripted()
    stage = GenerationStage(reader, cache)
    stage.generate(["b2"])
    bars: list[Bar] = []
    cuts: list[list[str]] = []

    def calls(missing: list[str]) -> list[list[str]]:
        cuts.append(missing)
        return [[prompt for prompt in missing if prompt[0] == letter] for letter in "ab"]

    def progress(total: int) -> Bar:
        bars.append(Bar(total))
        return bars[-1]

    completions = stage.complete(["b3", "a1", "b2", "a2", "b3", "b1"], calls=calls, progress=progress)
    assert [c.text for c in completions] == ["3b/8", "1a/8", "2b/8", "2a/8", "3b/8", "1b/8"]
    assert cuts == [["b3", "a1", "a2", "b1"]]  # distinct, uncached, in the caller's order
    assert reader.calls[1:] == [["a1", "a2"], ["b1", "b3"]]  # one call per part, each sorted
    assert (bars[0].total, bars[0].updates, bars[0].closed) == (4, [2, 2], True)
    assert (stage.stats.requests, stage.stats.unique, stage.stats.cache_hits) == (7, 6, 1)
    assert (stage.stats.generated, stage.stats.calls) == (5, 3)
    stage.complete(["a1"], calls=calls, progress=progress)  # nothing to generate: no call, no bar
    assert len(cuts) == 2 and len(bars) == 1 and len(reader.calls) == 3
    with pytest.raises(InputError, match="exactly once"):
        stage.complete(["c1", "c2"], calls=lambda missing: [missing[:1]])


def test_a_failing_reader_stores_nothing_and_readers_without_identity_are_not_cached(cache) -> None:
    broken = GenerationStage(Scripted(fail=True), cache)
    with pytest.raises(ReaderError, match="down"):
        broken.generate(["ab"])
    assert len(cache) == 0 and broken.stats.generated == 0
    failures = broken.complete_each(["ab", "cd"])  # the failure policy: each prompt gets its own error
    assert all(isinstance(failure, ReaderError) for failure in failures) and len(broken.reader.calls) == 4

    anonymous = Scripted()
    anonymous.identity = None
    stage = GenerationStage(anonymous, cache)
    assert stage.cache is None and stage.generate(["ab"]) == ["ba/8"] and len(cache) == 0
    assert stage.generate(["ab"]) == ["ba/8"] and len(anonymous.calls) == 2  # asked again: nothing cached


def test_the_real_reader_is_served_from_the_cache(smollm2, cache) -> None:
    cached = GenerationStage(smollm2, cache)
    assert cached.identity == smollm2.identity
    assert cached.identity.startswith("llama.cpp:SmolLM2-135M-Instruct.Q4_1.gguf@sha256:")
    assert "|n_ctx=4096|" in cached.identity
    made = cached.complete(PROMPTS, max_tokens=4)
    first = [completion.text for completion in made]
    assert first == smollm2.generate(PROMPTS, max_tokens=4)  # what the reader itself says
    assert first[0] == first[2] and cached.stats.generated == 2
    assert all(c.prompt_tokens > 5 and 1 <= c.generated_tokens <= 4 for c in made)  # llama.cpp's own counts
    assert cached.stats.prompt_tokens == made[0].prompt_tokens + made[1].prompt_tokens
    again = cached.complete(PROMPTS, max_tokens=4)
    assert [c.text for c in again] == first and cached.stats.generated == 2 and all(c.cached for c in again)
    assert all(c.seconds > 0 for c in again)  # the seconds of the original generation
    # a different max_tokens is a miss; so is the same model under another identity
    cached.generate(PROMPTS[:1], max_tokens=3)
    assert cached.stats.generated == 3
    renamed = GenerationStage(Renamed(smollm2, smollm2.identity.replace("n_ctx=4096", "n_ctx=2048")), cache)
    assert renamed.generate(PROMPTS[:1], max_tokens=4) == first[:1] and renamed.stats.generated == 1
    # a new process (a new cache object on the same file) reads them back
    with GenerationCache(cache.path) as reopened:
        assert len(reopened) == 4
        key = cached.key(PROMPTS[1], 4)
        assert reopened.get(key).text == first[1] and reopened.get(key).reader == smollm2.identity


def test_every_generating_component_of_the_ensemble_goes_through_one_cache(tmp_path) -> None:
    from eor import Ensemble
    from eor.core.config import EnsembleConfig, PromptConfig, VoterConfig

    config = EnsembleConfig(
        members=["ReFree", "PK", "PK@1"],
        prompts=PromptConfig(parametric_max_tokens=16),
        voter=VoterConfig(metrics=["em", "f1"]),
        base_dir=str(tmp_path),
    )
    file, question = tmp_path / "g.sqlite", "who wrote hamlet"
    reader = Scripted()
    first = Ensemble(config, reader=reader, cache=file).answer(question, lazy=False)  # every member, one batch
    # PK's background document (16 tokens) once for PK and PK@1; then ReFree's prompt and PK's one answer
    # prompt (PK and PK@1 read the same passage, so their prompts are identical)
    assert [len(call) for call in reader.calls] == [1, 2]
    assert reader.calls[0][0].startswith("Generate a background document")
    again = Scripted()
    second = Ensemble(config, reader=again, cache=file).answer(question, lazy=False)
    assert again.calls == [] and untimed(second.to_record().to_dict()) == untimed(first.to_record().to_dict())
    uncached = Scripted()
    third = Ensemble(config, reader=uncached, cache=False).answer(question, lazy=False)
    assert len(uncached.calls) == 2 and third.members.keys() == first.members.keys()
    with GenerationCache(file) as cache:
        assert cache.stats().readers == {"scripted:v1": 3}


def test_model_hash_is_memoised_in_a_stamp(tmp_path, monkeypatch) -> None:
    from eor.core import models

    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights" * 1000)
    expected = hashlib.sha256(model.read_bytes()).hexdigest()
    assert models.file_sha256(model) == expected
    [stamp] = (tmp_path / "cache" / "hashes").iterdir()
    assert stamp.read_text().split()[0] == expected
    models._DIGESTS.clear()
    stamp.write_text(stamp.read_text().replace(expected, "f" * 64))  # proves the stamp is read, not the file
    assert models.file_sha256(model) == "f" * 64
    model.write_bytes(b"other weights")  # size and time change: the stamp no longer applies
    assert models.file_sha256(model) == hashlib.sha256(b"other weights").hexdigest()


def test_identities_of_the_other_backends(tmp_path) -> None:
    from eor.readers.hf import _model_fingerprint
    from eor.readers.openai_compat import OpenAIReader

    served = OpenAIReader("qwen", base_url="http://127.0.0.1:9/v1/", seed=0)  # no request is made
    assert served.identity == "openai:http://127.0.0.1:9/v1|model=qwen|seed=0"
    assert OpenAIReader("gpt-x", seed=None).identity == "openai:https://api.openai.com/v1|model=gpt-x|seed=None"
    assert _model_fingerprint("Qwen/Qwen2.5-0.5B-Instruct", "abc123") == "Qwen/Qwen2.5-0.5B-Instruct@abc123"
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    before = _model_fingerprint(folder, None)
    assert before.startswith(f"{folder.resolve()}@files:")
    (folder / "model.safetensors").write_bytes(b"w")  # new weights: a new identity
    assert _model_fingerprint(folder, None) != before


# -- concurrency and crashes --------------------------------------------------------------------------


def _writer(path: str, me: int, start, rounds: int) -> None:
    start.wait()
    cache = GenerationCache(path)  # both processes open (and initialise) a new file at once
    for i in range(rounds):
        cache.put_many(
            [
                Generation(f"shared-{i}", "w", f"shared {i} from {me}", 0.1),
                Generation(f"own-{me}-{i}", "w", f"own {i} of {me}", 0.2),
            ]
        )
        cache.get_many([f"shared-{i}", f"own-{1 - me}-{i}"])


def test_two_processes_write_the_same_and_different_keys(tmp_path) -> None:
    path, rounds = str(tmp_path / "shared.sqlite"), 200
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [context.Process(target=_writer, args=(path, me, start, rounds)) for me in (0, 1)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0]
    with GenerationCache(path) as cache:
        assert len(cache) == 3 * rounds
        keys = [f"shared-{i}" for i in range(rounds)] + [f"own-{m}-{i}" for m in (0, 1) for i in range(rounds)]
        found = cache.get_many(keys)
        assert len(found) == 3 * rounds
        assert all(found[f"shared-{i}"].text in (f"shared {i} from 0", f"shared {i} from 1") for i in range(rounds))
        assert all(found[f"own-{m}-{i}"].text == f"own {i} of {m}" for m in (0, 1) for i in range(rounds))


KILLED_WRITER = """
import sys
from eor.runs.generation_cache import Generation, GenerationCache
cache = GenerationCache(sys.argv[1])
batch = 0
while True:
    cache.put_many(Generation(f"{batch}-{i}", "w", f"{batch}-{i}|" * 2000, 0.5) for i in range(50))
    batch += 1
"""


def test_a_writer_killed_mid_transaction_leaves_only_whole_batches(tmp_path) -> None:
    path = tmp_path / "killed.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], env=env)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _rows(path) < 150:
            time.sleep(0.05)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with GenerationCache(path) as cache:  # opens: SQLite rolls back the torn transaction
        count = len(cache)
        assert count >= 150 and count % 50 == 0  # every batch (one transaction) whole or absent
        batches = count // 50
        found = cache.get_many(f"{b}-{i}" for b in range(batches) for i in range(50))
        assert len(found) == count
        assert all(entry.text == f"{key}|" * 2000 and entry.seconds == 0.5 for key, entry in found.items())
        cache.put_many([Generation("after", "w", "the file still takes writes")])
        assert cache.get("after").text == "the file still takes writes"


def _rows(path: Path) -> int:
    if not path.exists():
        return 0
    connection = sqlite3.connect(path, timeout=5)
    try:
        return connection.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0
    finally:
        connection.close()


# -- files that are not caches, the default location ---------------------------------------------------


def test_a_file_that_is_not_a_cache_is_the_projects_error(tmp_path, capsys) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(CacheError, match="is not a valid eor generation cache .* remove it"):
        GenerationCache(garbage)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE t (x)")
    with pytest.raises(CacheError, match="an SQLite database but not an eor generation cache"):
        GenerationCache(foreign)
    with pytest.raises(CacheError, match="is a folder"):
        GenerationCache(tmp_path)
    assert main(["cache", "stats", "--cache", str(garbage)]) == 1
    error = capsys.readouterr().err
    assert error.startswith("eor: error: ") and error.count("\n") == 1 and "not a valid eor generation cache" in error


def test_the_default_file_and_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("EOR_GENERATION_CACHE", raising=False)
    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "c"))
    assert default_cache_path() == tmp_path / "c" / "generations.sqlite"
    assert open_cache(True).path == tmp_path / "c" / "generations.sqlite"
    monkeypatch.setenv("EOR_GENERATION_CACHE", str(tmp_path / "mine.sqlite"))
    assert open_cache(True).path == tmp_path / "mine.sqlite"
    monkeypatch.setenv("EOR_GENERATION_CACHE", "off")
    assert open_cache(True) is None and open_cache(False) is None and open_cache(None) is None
    assert open_cache(tmp_path / "x.sqlite").path == tmp_path / "x.sqlite"
    assert GenerationCache().path is None and bool(GenerationCache())  # in memory; truthy even when empty
    # eRAG's and utility's opener: the same file where caching is on, a fresh in-memory cache where it is off
    assert open_cache_or_memory(True).path is None and open_cache_or_memory(None).path is None
    assert open_cache_or_memory(tmp_path / "x.sqlite").path == tmp_path / "x.sqlite"
    kept = GenerationCache()
    assert open_cache_or_memory(kept) is kept and open_cache_or_memory(False) is not open_cache_or_memory(False)


# -- the commands ---------------------------------------------------------------------------------------


def small_config(folder: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text(
        f"""
name: cache-test
reader: {{model: smollm2-135m, max_tokens: 4, context_tokens: 1024, threads: 1}}
corpus: {{path: {DEMO / "corpus.jsonl"}}}
members: [ReFree, BM25@1]
voter: {{metrics: [em, f1]}}
batch_size: 2
"""
    )
    return path


def untimed(record: dict) -> dict:
    """A record without its members' seconds (retrieval plus generation time: the only fields that differ)."""
    members = {
        name: {k: v for k, v in member.items() if k not in ("seconds", "tokens")}
        for name, member in record["members"].items()
    }
    return {**record, "members": members}


def without_timings(path: Path) -> list[dict]:
    return [untimed(json.loads(line)) for line in path.read_text().splitlines()]


def test_eor_run_records_are_the_same_from_the_cache(tmp_path, isolated_cache, capsys) -> None:
    config, data, file = small_config(tmp_path), DEMO / "questions.jsonl", tmp_path / "g.sqlite"
    args = ["run", "--config", str(config), "--data", str(data), "--limit", "1"]
    assert main([*args, "--out", str(tmp_path / "first"), "--cache", str(file)]) == 0
    assert "0 prompts read back, 2 generated" in capsys.readouterr().out  # ReFree's and BM25@1's prompts
    assert main([*args, "--out", str(tmp_path / "second"), "--cache", str(file)]) == 0
    assert "2 prompts read back, 0 generated" in capsys.readouterr().out
    first = without_timings(tmp_path / "first" / "records.jsonl")
    assert first == without_timings(tmp_path / "second" / "records.jsonl")
    assert not (isolated_cache / "generations.sqlite").exists()  # --cache FILE: not the default file

    # `eor ask` with the same config reads the run's answers back: nothing new is generated
    assert (
        main(
            [
                "ask",
                "who was the first president of the united states",
                "--config",
                str(config),
                "--cache",
                str(file),
                "--json",
            ]
        )
        == 0
    )
    asked = json.loads(capsys.readouterr().out)["members"]
    for name, member in first[0]["members"].items():
        assert {key: asked[name][key] for key in member} == member, name
    with GenerationCache(file) as cache:
        assert len(cache) == 2


def test_no_cache_neither_reads_nor_writes(tmp_path, isolated_cache, capsys, monkeypatch) -> None:
    """The flag's wiring with a scripted reader (the real reader's records are compared above)."""
    readers: list[Scripted] = []
    scripted = lambda config: readers.append(Scripted()) or readers[-1]  # noqa: E731
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", scripted)
    config = small_config(tmp_path)
    args = ["run", "--config", str(config), "--data", str(DEMO / "questions.jsonl"), "--limit", "2"]
    assert main([*args, "--out", str(tmp_path / "cached")]) == 0
    assert "0 prompts read back, 4 generated" in capsys.readouterr().out
    assert (isolated_cache / "generations.sqlite").is_file()  # the default file, under $EOR_CACHE
    assert main([*args, "--out", str(tmp_path / "uncached"), "--no-cache"]) == 0
    assert "generation cache: off" in capsys.readouterr().out
    assert [len(call) for call in readers[1].calls] == [4]  # everything generated again
    assert without_timings(tmp_path / "cached" / "records.jsonl") == without_timings(
        tmp_path / "uncached" / "records.jsonl"
    )
    with GenerationCache(isolated_cache / "generations.sqlite") as cache:
        assert len(cache) == 4 and cache.hits == 0
    monkeypatch.setenv("EOR_GENERATION_CACHE", "off")  # the environment's --no-cache, for every command
    assert main([*args, "--out", str(tmp_path / "off")]) == 0
    assert "generation cache: off" in capsys.readouterr().out


def test_cache_stats_and_clear(tmp_path, isolated_cache, capsys) -> None:
    file = tmp_path / "g.sqlite"
    assert main(["cache", "stats", "--cache", str(file)]) == 0
    assert "entries: 0 (no file yet)" in capsys.readouterr().out and not file.exists()  # looking creates nothing
    with GenerationCache(file) as cache:
        GenerationStage(Scripted("reader:a"), cache).generate(["1", "2", "3"])
        GenerationStage(Scripted("reader:b"), cache).generate(["1"])
    assert main(["cache", "stats", "--cache", str(file)]) == 0
    out = capsys.readouterr().out
    assert f"generation cache: {file}" in out and "entries: 4" in out
    assert "        3  reader:a" in out and "        1  reader:b" in out

    assert main(["cache", "clear", "--cache", str(file), "--reader", "reader:c"]) == 1
    assert "no entries of reader 'reader:c'" in capsys.readouterr().err
    assert main(["cache", "clear", "--cache", str(file), "--reader", "reader:a"]) == 0
    assert "deleted 3 cached generations of reader reader:a" in capsys.readouterr().out
    with GenerationCache(file) as cache:
        assert cache.stats().readers == {"reader:b": 1}
    assert main(["cache", "clear", "--cache", str(file)]) == 0
    assert "deleted 1 cached generations" in capsys.readouterr().out
    assert main(["cache", "stats", "--cache", str(file)]) == 0
    assert "entries: 0" in capsys.readouterr().out


def test_no_cache_and_cache_are_exclusive(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["ask", "hi", "--cache", "x.sqlite", "--no-cache"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_cache_keeps_under_its_bound_least_recently_used_first(tmp_path, monkeypatch) -> None:
    """Past its bound, the entries read or written longest ago go first: an old entry read since stays,
    the old ones nobody touched are gone."""
    from eor.core import cache_policy
    from eor.runs.generation_cache import Generation, GenerationCache, format_stats

    monkeypatch.setattr(cache_policy, "EVICT_TO", 1.0)  # evict down to the bound itself: one entry at a time
    path = tmp_path / "bounded.sqlite"
    cache = GenerationCache(path, max_bytes="160KB")
    text = "x" * 2000
    cache.put_many(Generation(f"old{i}", "r", f"{text}{i}", 0.1) for i in range(30))  # about 70 KB
    time.sleep(0.01)
    assert cache.get("old0") is not None  # read: now used more recently than old1..old29

    def old_keys() -> set[str]:  # looked up without a read that would count as a use
        with sqlite3.connect(path) as peek:
            return {key for (key,) in peek.execute("SELECT key FROM generations WHERE key LIKE 'old%'")}

    added = 0
    while old_keys() != {"old0"}:
        time.sleep(0.001)
        cache.put_many([Generation(f"new{added}", "r", f"{text}{added}", 0.1)])
        added += 1
        assert added < 500 and "old0" in old_keys(), "old0 went before the untouched old entries"
    assert cache.evicted >= 29 and cache.bytes_in_use() <= 160 * 1024
    assert cache.get("old0").text == f"{text}0" and cache.get(f"new{added - 1}") is not None
    assert "of a bound of 160.0 KB" in format_stats(cache.stats())
