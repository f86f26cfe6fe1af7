"""Benchmark: FAISS index types for the dense source (`Wiki`) side by side, on one set of vectors.

The shared corpus (`../shared/data/corpus/wiki-nq.jsonl`) is encoded once by the real `DenseRetriever`
(exact `Flat` index, the default); every other index is built from the same vectors by the function the
retriever builds with (`retrievers.dense.faiss_index`) and searched with the same query vectors (the NQ dev
questions). Per index: build seconds (training and adding), bytes per passage (the index as written by
FAISS, divided by the passages), search milliseconds per query (all queries in one call, best of 3),
recall@10 against the exact top 10, and the share of questions with a gold passage in the top 10.

`--scale N` also runs the same index types over N× the corpus: the real vectors plus N−1 noisy copies
(Gaussian noise of the vectors' own spread, renormalised), to show the trade-off where an index outgrows
exact search. The copies are synthetic: recall is measured against exact search over them too.

    python -m benchmarks.bench_faiss [--scale 100] [--out docs/faiss.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from eor.core.data import load_questions
from retrievers.corpus import load_corpus
from retrievers.dense import DenseRetriever, faiss_index

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "data" / "corpus" / "wiki-nq.jsonl"
QUESTIONS = ROOT.parent / "shared" / "data" / "nq" / "dev.jsonl"
SETTINGS = [  # (factory, nprobe)
    ("Flat", None),
    ("IVF64,Flat", 1),
    ("IVF64,Flat", 4),
    ("IVF64,Flat", 16),
    ("IVF64,PQ32", 16),
    ("IVF64,PQ16", 16),
    ("HNSW32", None),
]
SCALED = [("Flat", None), ("IVF1024,Flat", 8), ("IVF1024,Flat", 32), ("IVF1024,PQ32", 32), ("HNSW32", None)]


def measure(
    vectors: np.ndarray, queries: np.ndarray, factory: str, nprobe: int | None, exact: np.ndarray
) -> dict[str, Any]:
    started = time.perf_counter()
    index = faiss_index(vectors, factory)
    built = time.perf_counter() - started
    if nprobe is not None:
        faiss.ParameterSpace().set_index_parameter(index, "nprobe", nprobe)
    with tempfile.TemporaryDirectory() as folder:
        faiss.write_index(index, os.path.join(folder, "index"))
        size = os.path.getsize(os.path.join(folder, "index"))
    seconds = []
    for _ in range(3):
        started = time.perf_counter()
        _, rows = index.search(queries, 10)
        seconds.append(time.perf_counter() - started)
    recall = np.mean([len(set(r) & set(e)) / 10 for r, e in zip(rows.tolist(), exact.tolist(), strict=True)])
    return {
        "index": factory,
        "nprobe": nprobe,
        "build_s": round(built, 2),
        "bytes_per_passage": round(size / len(vectors), 1),
        "ms_per_query": round(1000 * min(seconds) / len(queries), 4),
        "recall@10": round(float(recall), 4),
        "rows": rows,
    }


def run(scale: int) -> dict[str, Any]:
    faiss.omp_set_num_threads(1)  # one core: comparable figures whatever else runs
    wiki = DenseRetriever(corpus_path=str(CORPUS), depth=10)
    vectors = wiki.index.reconstruct_n(0, wiki.index.ntotal)
    questions = load_questions(QUESTIONS)
    queries = wiki.encode_queries([q.question for q in questions])
    _, exact = wiki.index.search(queries, 10)
    ids = [passage.id for passage in load_corpus(CORPUS)]
    golds = [set(q.extra.get("gold_passages") or []) for q in questions]
    table = []
    for factory, nprobe in SETTINGS:
        row = measure(vectors, queries, factory, nprobe, exact)
        found = [
            bool(gold & {ids[i] for i in rows if i >= 0}) for gold, rows in zip(golds, row.pop("rows"), strict=True)
        ]
        row["gold@10"] = round(float(np.mean(found)), 4)
        table.append(row)
        print(json.dumps(row), flush=True)
    result: dict[str, Any] = {"passages": len(vectors), "queries": len(queries), "dimension": vectors.shape[1]}
    result["corpus"] = table
    if scale > 1:
        rng = np.random.default_rng(0)
        spread = float(vectors.std())
        copies = [vectors] + [
            vectors + rng.normal(0, spread, vectors.shape).astype(np.float32) for _ in range(scale - 1)
        ]
        big = np.concatenate(copies)
        big /= np.linalg.norm(big, axis=1, keepdims=True)
        _, big_exact = _flat_search(big, queries)
        scaled = []
        for factory, nprobe in SCALED:
            row = measure(big, queries, factory, nprobe, big_exact)
            row.pop("rows")
            scaled.append(row)
            print(json.dumps(row), flush=True)
        result["scaled"] = {"copies": scale, "passages": len(big), "table": scaled}
    return result


def _flat_search(vectors: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index.search(queries, 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=1, help="also run over this many copies of the corpus")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    result = run(args.scale)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
