"""Benchmark: building the BM25 and dense (MiniLM, FAISS Flat) indexes of a corpus, then loading them again,
with the seconds and bytes on disk per passage and what that makes for 10k and 1M passages (linear: both
builds touch each passage once; the dense Flat index keeps 384 float32 numbers per passage).

Each corpus is built in an empty cache folder (`EOR_CACHE` set to a temporary one), so nothing cached is
read; the first load is the build, the second the load of what it persisted.

    python -m benchmarks.bench_index_build [CORPUS.jsonl ...] [--json out.json]

Default: the demo corpus and, when present, ../shared/data/corpus/wiki-nq.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from retrievers.bm25 import BM25Retriever
from retrievers.corpus import load_corpus
from retrievers.dense import DenseRetriever

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = [ROOT / "eor/demo/corpus.jsonl", ROOT.parent / "shared/data/corpus/wiki-nq.jsonl"]
SCALES = (10_000, 1_000_000)


def folder_bytes(folder: Path, kind: str) -> int:
    return sum(path.stat().st_size for path in (folder / "indexes").rglob("*") if path.is_file() and kind in str(path))


def measure(corpus: Path) -> dict[str, Any]:
    passages = len(load_corpus(corpus))
    row: dict[str, Any] = {"corpus": corpus.name, "passages": passages}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["EOR_CACHE"] = cache
        for kind, build in (("bm25", BM25Retriever), ("dense", DenseRetriever)):
            start = time.perf_counter()
            build(corpus_path=str(corpus))
            built = time.perf_counter() - start
            start = time.perf_counter()
            build(corpus_path=str(corpus))
            loaded = time.perf_counter() - start
            size = folder_bytes(Path(cache), kind)
            row[kind] = {
                "build_s": built,
                "load_s": loaded,
                "bytes": size,
                "ms_per_passage": 1000 * built / passages,
                "bytes_per_passage": size / passages,
                "at": {n: {"build_s": built / passages * n, "bytes": size / passages * n} for n in SCALES},
            }
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", help="corpus files (JSON Lines: id, title, text)")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    corpora = [Path(p) for p in args.corpora] or [p for p in DEFAULTS if p.is_file()]
    rows = [measure(corpus) for corpus in corpora]
    print(
        f"{'corpus':<16} {'passages':>8}  {'index':<6} {'build s':>8} {'load s':>7} {'ms/passage':>10} "
        f"{'bytes/passage':>13}  {'10k: build, disk':>18}  {'1M: build, disk':>18}"
    )
    for row in rows:
        for kind in ("bm25", "dense"):
            figures = row[kind]
            scaled = [
                f"{figures['at'][n]['build_s'] / 60:6.1f} min, {figures['at'][n]['bytes'] / 1e6:6.0f} MB"
                for n in SCALES
            ]
            timing = f"{figures['build_s']:8.1f} {figures['load_s']:7.2f} {figures['ms_per_passage']:10.2f}"
            print(
                f"{row['corpus']:<16} {row['passages']:>8}  {kind:<6} {timing} "
                f"{figures['bytes_per_passage']:13.0f}  {scaled[0]:>18}  {scaled[1]:>18}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
