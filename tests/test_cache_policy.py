"""One cache policy (eor.core.cache_policy): every persistent cache bounded, least recently used entries evicted
first, every cache reported by `eor cache stats`; model loaders memoised in one way."""

from __future__ import annotations

import json
import pickle
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from eor.cli import main
from eor.core import cache_policy
from eor.core.cache_policy import DEFAULT_MAX_BYTES, KeyedMemo, least_recently_used, memo, size_bound
from eor.core.errors import CacheError
from eor.runs.generation_cache import GenerationCache
from retrievers.vector_cache import VectorCache, passage_key
from retrievers.web.web_cache import WebCache
from voters.similarity.pair_score_cache import PairScoreCache

POLICY = {"guard": "public", "max_bytes": 1000}


@pytest.fixture
def one_at_a_time(monkeypatch) -> None:
    """Evict down to the bound itself, so each write past it deletes as little as it can."""
    monkeypatch.setattr(cache_policy, "EVICT_TO", 1.0)


def test_the_bound_is_given_else_the_environment_else_the_default(monkeypatch) -> None:
    monkeypatch.delenv("EOR_CACHE_MAX_BYTES", raising=False)
    assert size_bound() == DEFAULT_MAX_BYTES == 4 * 1024**3
    monkeypatch.setenv("EOR_CACHE_MAX_BYTES", "500MB")
    assert size_bound() == 500 * 1024**2 and size_bound("2kB") == 2048 and size_bound(7) == 7
    assert PairScoreCache("x").max_bytes == WebCache("x").max_bytes == GenerationCache().max_bytes == 500 * 1024**2
    with pytest.raises(CacheError, match="e.g. 500MB"):
        size_bound("lots")
    with pytest.raises(CacheError, match="positive"):
        size_bound(0)


def test_least_recently_used_go_until_a_tenth_under_the_bound() -> None:
    entries = [("a", 5), ("b", 5), ("c", 5)]
    assert least_recently_used(entries, in_use=15, bound=10) == ["a", "b"]  # 15 - 2 * 5 <= 0.9 * 10
    assert least_recently_used(entries, in_use=9, bound=10) == []
    assert least_recently_used([("a", 5)], in_use=50, bound=10) == ["a"]  # all there is


# -- the pair-score cache -------------------------------------------------------------------------------------


def _stored_pairs(path: Path) -> set[str]:
    """The pairs in the file, looked up without a read that would count as a use."""
    with sqlite3.connect(path) as peek:
        return {a for (a,) in peek.execute("SELECT a FROM scores")}


def test_pair_scores_stay_under_their_bound_least_recently_used_first(tmp_path, one_at_a_time) -> None:
    cache = PairScoreCache(tmp_path, max_bytes=2000)
    text = "y" * 90  # a score's bytes: its metric key (1) and pair (a: 4 to 5, b: 90), about 95
    cache.put_many("m", [((f"old{i}", text), 0.5) for i in range(10)])  # about 950 bytes
    time.sleep(0.01)
    assert cache.get_many("m", [("old0", text)]) == {("old0", text): 0.5}  # a read: now the most recent use
    added = 0
    while _stored_pairs(cache.path) & {f"old{i}" for i in range(1, 10)}:
        time.sleep(0.002)
        cache.put_many("m", [((f"new{added}", text), 0.25)])
        added += 1
        assert added < 100 and "old0" in _stored_pairs(cache.path), "old0 went before the untouched old scores"
    report = cache.report()
    assert report.entries == len(cache) and report.bytes_in_use <= 2000 and report.max_bytes == 2000
    assert cache.get_many("m", [("old0", text), ("old1", text)]) == {("old0", text): 0.5}


def test_a_pair_score_file_from_before_the_bound_is_upgraded(tmp_path) -> None:
    path = tmp_path / "pair_scores.sqlite"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE scores (metric TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, "
            "score REAL NOT NULL, PRIMARY KEY (metric, a, b)) WITHOUT ROWID"
        )
        old.executemany("INSERT INTO scores VALUES ('m', ?, 'b', 0.5)", [("a1",), ("a2",)])
    old.close()
    cache = PairScoreCache(tmp_path, max_bytes=12)  # each old score holds 4 bytes (m, a1, b)
    assert cache.get_many("m", [("a2", "b")]) == {("a2", "b"): 0.5}  # kept, and now used
    assert cache.report().bytes_in_use == 8
    cache.put_many("m", [(("new", "b"), 1.0)])  # 5 bytes more: past 12, so the unread a1 goes
    assert _stored_pairs(path) == {"a2", "new"} and cache.report().bytes_in_use == 9


def test_pair_scores_cleared(tmp_path) -> None:
    cache = PairScoreCache(tmp_path)
    assert cache.clear() == 0 and not cache.path.exists()  # clearing nothing creates nothing
    cache.put_many("m", [(("a", "b"), 0.5), (("a", "c"), 0.5)])
    cache.put_many("m", [(("a", "b"), 0.75)])  # replaced: still two scores
    assert cache.report().entries == 2 and cache.clear() == 2 and len(cache) == 0
    assert cache.report().bytes_in_use == 0


# -- the web cache --------------------------------------------------------------------------------------------


def test_web_entries_stay_under_their_bound_least_recently_used_first(tmp_path, one_at_a_time) -> None:
    cache = WebCache(tmp_path / "web", max_bytes=6000)
    page = {"text": "z" * 400}
    for i in range(10):  # about 500 bytes a file
        cache.put_page(f"https://old/{i}", POLICY, page)
        time.sleep(0.002)
    time.sleep(0.01)
    assert cache.get_page("https://old/0", POLICY) == page  # a read: now the most recent use

    def old_pages() -> set[int]:
        return {i for i in range(10) if cache.path("pages", {"url": f"https://old/{i}", "policy": POLICY}).exists()}

    added = 0
    while old_pages() != {0}:
        time.sleep(0.002)
        cache.put_search({"backend": "b"}, f"query {added}", [{"url": "u", "snippet": "w" * 400}])
        added += 1
        assert added < 100 and 0 in old_pages(), "the page read last went before the untouched ones"
    report = cache.report()
    assert report.bytes_in_use <= 6000 and report.entries == len(list((tmp_path / "web").rglob("*.json")))
    assert cache.clear() == report.entries and cache.report().entries == 0


def test_a_web_cache_counts_the_files_other_processes_wrote(tmp_path, one_at_a_time) -> None:
    root = tmp_path / "web"
    other = WebCache(root)  # unbounded enough: fills the folder
    for i in range(6):
        other.put_page(f"https://other/{i}", POLICY, {"text": "o" * 400})
    sizes = [file.stat().st_size for file in root.rglob("*.json")]
    mine = WebCache(root, max_bytes=sum(sizes))  # its first write scans: the other's files count
    mine.put_page("https://mine", POLICY, {"text": "m" * 400})
    assert mine.report().bytes_in_use <= sum(sizes) and mine.get_page("https://mine", POLICY) is not None


# -- eor cache stats and clear --------------------------------------------------------------------------------


def test_cache_stats_lists_every_cache(isolated_cache, capsys, monkeypatch) -> None:
    monkeypatch.setenv("EOR_CACHE_MAX_BYTES", "1MB")
    assert main(["cache", "stats"]) == 0  # nothing yet: every cache said empty, nothing created
    out = capsys.readouterr().out
    assert out.count("entries: 0 (no file yet)") == 6 and not isolated_cache.exists()

    PairScoreCache().put_many("m", [(("a", "b"), 0.5)])
    WebCache().put_page("https://x", POLICY, {"text": "x"})
    VectorCache().put_many("settings", [(passage_key("t", "x"), np.ones(4, dtype=np.float32))])
    (isolated_cache / "models").mkdir()
    (isolated_cache / "models" / "model.gguf").write_bytes(b"\0" * 2048)
    assert main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    for name, path in [
        ("generation cache", "generations.sqlite"),
        ("pair-score cache", "pair_scores.sqlite"),
        ("web cache", "web"),
        ("passage vector cache", "vectors.sqlite"),
        ("index store", "indexes"),
        ("packaged models", "models"),
        ("model file hashes", "hashes"),
    ]:
        assert f"{name}: {isolated_cache / path}" in out
    assert out.count("of a bound of 1.0 MB") == 3  # pair scores, web, vectors (the generation cache has no file)
    assert "entries: 1\nsize on disk: 2.0 KB (never evicted" in out


def test_cache_clear_names_the_cache(isolated_cache, capsys) -> None:
    PairScoreCache().put_many("m", [(("a", "b"), 0.5)])
    WebCache().put_page("https://x", POLICY, {"text": "x"})
    assert main(["cache", "clear", "--which", "web"]) == 0
    assert f"deleted 1 entries of the web cache at {isolated_cache / 'web'}" in capsys.readouterr().out
    assert main(["cache", "clear", "--which", "pair-scores"]) == 0
    assert "deleted 1 entries of the pair-score cache" in capsys.readouterr().out
    assert len(PairScoreCache()) == 0 and WebCache().report().entries == 0
    VectorCache().put_many("settings", [(passage_key("t", "x"), np.ones(4, dtype=np.float32))])
    assert main(["cache", "clear", "--which", "vectors"]) == 0
    assert "deleted 1 entries of the passage vector cache" in capsys.readouterr().out and len(VectorCache()) == 0
    assert main(["cache", "clear", "--which", "web", "--reader", "r"]) == 1
    assert "--cache and --reader name generations" in capsys.readouterr().err


def test_a_pickled_generation_cache_keeps_its_bound(tmp_path) -> None:
    cache = GenerationCache(tmp_path / "g.sqlite", max_bytes="1MB")
    assert pickle.loads(pickle.dumps(cache)).max_bytes == 1024**2


# -- in-process memos -----------------------------------------------------------------------------------------


def test_a_memo_loads_once_per_arguments_with_defaults_applied() -> None:
    loads: list[tuple[str, str]] = []

    @memo
    def load(name: str, device: str = "cpu") -> object:
        loads.append((name, device))
        if name == "broken":
            raise OSError("no such model")
        return object()

    first = load("a")
    assert load("a", "cpu") is first and load(name="a", device="cpu") is first and load("a", "cuda") is not first
    assert loads == [("a", "cpu"), ("a", "cuda")] and load.__name__ == "load"
    for _ in range(2):  # a failed load keeps nothing: it is tried again
        with pytest.raises(OSError):
            load("broken")
    assert loads.count(("broken", "cpu")) == 2


def test_threads_asking_for_one_model_load_it_once() -> None:
    loads = []

    @memo
    def load(name: str) -> object:
        loads.append(name)
        time.sleep(0.05)  # the other threads ask meanwhile
        return object()

    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(load("m"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["m"] and len({id(result) for result in results}) == 1


def test_a_keyed_memo_keeps_by_key_drops_its_oldest_past_a_bound_and_copies_with_its_owner() -> None:
    kept: KeyedMemo[str, list[int]] = KeyedMemo()
    assert kept.get("a") is None and kept.keep("a", [1]) == [1] and kept.get("a") == [1]
    assert kept.keep("a", [2]) == [2] and kept.get("a") == [2]  # replaced, still the oldest
    kept.keep("b", [3], bound=2)
    kept.keep("c", [4], bound=2)  # two kept: "a" goes
    assert [kept.get(key) for key in "abc"] == [None, [3], [4]]
    copied = pickle.loads(pickle.dumps(kept))  # no lock of its own: it pickles and copies with its owner
    copied.clear()
    assert copied.get("b") is None and kept.get("b") == [3]


def test_web_cache_files_keep_their_format(tmp_path) -> None:
    """The bound changes nothing in the files: a benchmark recorded before replays from them."""
    WebCache(tmp_path).put_search({"backend": "b"}, "q", [{"url": "u"}])
    (file,) = tmp_path.rglob("*.json")
    record = json.loads(file.read_text())
    assert set(record) == {"version", "key", "stored_at", "hits"} and record["version"] == 1
