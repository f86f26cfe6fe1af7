"""Benchmark: the paper's corpus size on one machine. BM25 build and retrieval over synthetic corpora of 100k,
1M and 5M passages, rank-bm25 beside bm25s where it fits, `eor ask` over BM25 members, and IVF-PQ at 1M and
5M vectors.

Corpora are generated on the fly (never committed), deterministic per size and seed: passages of DPR's shape
(100 words, 5% shorter: the ends of articles; a title of 1 to 3 words) drawn from one Zipf distribution
(exponent 1.07) over a vocabulary of 2M words whose 60 most frequent are eor's stop words, so that a passage
keeps about as many terms after the stop list as a Wikipedia one. Questions: 1,000 distinct, their lengths
those of the NQ dev questions after the stop list, their terms drawn from the same Zipf without stop words.

Every measurement runs in a fresh process (`--child`), alone on the machine: the script records the load
average before and after and refuses to start above 0.5. Per size:

- build: seconds and peak resident memory (VmHWM, mapped pages included) of a cold start that hashes the
  corpus, indexes its byte offsets and builds the BM25 index; the index's size on disk;
- retrieval: `eor retrieve --questions Q --members BM25@20 --json` (the real command, each question asked
  once, so nothing comes from a memo) in a fresh process: p50 and p95 of its per-question seconds, its load
  seconds and its peak resident memory; with a cold page cache (dropped first, where the machine allows) and
  then a warm one;
- the vocabulary size and the posting-list lengths of the questions' terms;
- rank-bm25 (`engine: rank-bm25`) at the sizes in `--rank-bm25`, over the first `--rank-bm25-questions`.

`--ask SIZE`: `eor ask` with a config of BM25 members only over that corpus, the packaged reader included,
timed from process start to the printed answer (the index built before), three times, the first after the
page cache was dropped. `--profile SIZES`: where a warm query's time goes (summing, top 20, reading).
`--dense SIZES`: IVF4096,PQ48 over that many synthetic unit vectors of 384 dimensions (minilm-l6's), trained
on 160,000, added in chunks; build seconds, bytes on disk, and a fresh process's query p50/p95 (nprobe 16,
one query at a time) and peak memory.

    python -m benchmarks.bench_corpus_scale --sizes 100k,1M,5M --rank-bm25 100k,1M --ask 1M --dense 1M,5M \
        --work /tmp/eor-scale --json docs/scale-corpus.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

# The project's modules are imported inside the functions that use them: each child process measures its own
# cold start (seconds and peak memory) from what it imports.

ROOT = Path(__file__).resolve().parent.parent
NQ_DEV = ROOT.parent / "shared" / "data" / "nq" / "dev.jsonl"
VOCABULARY = 2_000_000
EXPONENT = 1.07
WORDS = 100
SEED = 20261126
MAX_LOAD = 0.5


def size_of(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("km")) * scale)


def label(count: int) -> str:
    return f"{count // 1_000_000}M" if count % 1_000_000 == 0 else f"{count // 1_000}k"


# -- synthetic data --------------------------------------------------------------------------------------


def _words() -> list[str]:
    from retrievers.bm25_index import STOPWORDS

    stop = sorted(STOPWORDS)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words, seen, rank = list(stop), set(stop), 26**2
    while len(words) < VOCABULARY:
        value, word = rank, ""
        while value:
            value, digit = divmod(value, 26)
            word = letters[digit] + word
        rank += 1
        if word not in seen:
            words.append(word)
    return words


def _cdf() -> np.ndarray:
    weights = 1.0 / np.arange(1, VOCABULARY + 1, dtype=np.float64) ** EXPONENT
    return np.cumsum(weights / weights.sum())


def write_corpus(path: Path, count: int) -> float:
    """The corpus of `count` passages at `path` (kept when there); returns the seconds spent generating."""
    from eor.core.atomic import atomic_file

    if path.is_file():
        return 0.0
    started = time.perf_counter()
    words, cdf = np.asarray(_words(), dtype=object), _cdf()
    rng = np.random.default_rng([SEED, count])
    with atomic_file(path) as handle:
        for start in range(0, count, 50_000):
            rows = min(50_000, count - start)
            lengths = np.where(rng.random(rows) < 0.95, WORDS, rng.integers(10, WORDS, rows))
            titles = rng.integers(1, 4, rows)
            draws = np.searchsorted(cdf, rng.random(int(lengths.sum() + titles.sum())))
            tokens = words[np.minimum(draws, VOCABULARY - 1)]
            at = 0
            lines = []
            for i in range(rows):
                title = " ".join(tokens[at : at + titles[i]])
                at += titles[i]
                text = " ".join(tokens[at : at + lengths[i]])
                at += lengths[i]
                lines.append(json.dumps({"id": f"s{start + i}", "title": title, "text": text}) + "\n")
            handle.write("".join(lines))
    return time.perf_counter() - started


def write_questions(path: Path, count: int) -> None:
    from retrievers.bm25_index import STOPWORDS, tokenize

    if path.is_file():
        return
    lengths = [len(tokenize(json.loads(line)["question"])) for line in NQ_DEV.open()]
    words, cdf = _words(), _cdf()
    rng = np.random.default_rng([SEED, 1])
    questions: list[str] = []
    seen: set[str] = set()
    while len(questions) < count:
        length = max(1, int(rng.choice(lengths)))
        terms: list[str] = []
        while len(terms) < length:
            word = words[min(int(np.searchsorted(cdf, rng.random())), VOCABULARY - 1)]
            if word not in STOPWORDS:
                terms.append(word)
        text = " ".join(terms)
        if text not in seen:
            seen.add(text)
            questions.append(text)
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(questions)))


def write_config(path: Path, corpus: Path, engine: str, members: str = "[BM25@20]") -> Path:
    path.write_text(
        f"name: scale\ncorpus: {{path: {corpus}}}\nmembers: {members}\n"
        f"sources: {{BM25: {{type: bm25, params: {{engine: {engine}}}}}}}\nvoter: {{metrics: [em]}}\n"
    )
    return path


# -- measuring in fresh processes --------------------------------------------------------------------------


def peak_memory() -> int:
    """This process's peak resident set (VmHWM, bytes): anonymous and mapped file pages it touched."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def load_average() -> float:
    return os.getloadavg()[0]


def child(args: list[str], cache: Path, out: Path | None = None) -> dict[str, Any]:
    """Run this script's `--child` mode in a fresh process; returns the JSON it prints last on stderr."""
    env = {**os.environ, "EOR_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout
    command = [sys.executable, "-m", "benchmarks.bench_corpus_scale", "--child", *args]
    started = time.perf_counter()
    with open(out or os.devnull, "w") as stdout:
        done = subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return {**report, "wall_seconds": round(wall, 2)}


def run_child(mode: str, rest: list[str]) -> None:
    report: dict[str, Any] = {}
    if mode == "build":
        corpus = Path(rest[0])
        if rest[1] not in ("bm25s", "rank-bm25"):
            raise SystemExit(f"unknown BM25 engine {rest[1]!r}: bm25s or rank-bm25")
        engine: Literal["bm25s", "rank-bm25"] = "rank-bm25" if rest[1] == "rank-bm25" else "bm25s"
        started = time.perf_counter()
        from eor.core.models import file_sha256

        file_sha256(corpus)
        report["hash_seconds"] = time.perf_counter() - started
        from retrievers.corpus import load_corpus

        mark = time.perf_counter()
        load_corpus(corpus)
        report["offsets_seconds"] = time.perf_counter() - mark
        from retrievers.bm25 import BM25Retriever

        mark = time.perf_counter()
        BM25Retriever(corpus_path=str(corpus), engine=engine)
        report["bm25_seconds"] = time.perf_counter() - mark
        report["seconds"] = time.perf_counter() - started
    elif mode == "retrieve":  # the command line, run in this process as `python -m eor.cli` runs it
        import runpy

        sys.argv = ["eor", *rest]
        try:
            runpy.run_module("eor.cli", run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            if stop.code:
                raise
    elif mode == "profile":
        report.update(_profile(Path(rest[0]), Path(rest[1])))
    elif mode == "dense-query":
        report.update(_dense_queries(Path(rest[0]), int(rest[1])))
    else:
        raise SystemExit(f"unknown child mode {mode}")
    report["peak_bytes"] = peak_memory()
    print(json.dumps(report), file=sys.stderr)


def folder_bytes(folder: Path) -> int:
    return sum(file.stat().st_size for file in folder.rglob("*") if file.is_file())


def drop_page_cache() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def percentiles(seconds: list[float]) -> dict[str, float]:
    values = np.asarray(seconds) * 1000
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 2),
        "p95_ms": round(float(np.percentile(values, 95)), 2),
        "mean_ms": round(float(values.mean()), 2),
        "questions": len(seconds),
    }


def retrieval(work: Path, cache: Path, config: Path, questions: Path, cold: bool, name: str) -> dict[str, Any]:
    dropped = drop_page_cache() if cold else False
    out = work / f"retrieved-{name}.jsonl"
    args = ["retrieve", "--config", str(config), "--questions", str(questions), "--members", "BM25@20", "--json"]
    report = child(["retrieve", *args], cache, out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    timing = percentiles([line["seconds"] for line in lines])
    page_cache = "cold (dropped before the process)" if dropped else ("warm" if not cold else "not dropped (no root)")
    return {
        **timing,
        "first_50": percentiles([line["seconds"] for line in lines[:50]]),  # rank-bm25's questions
        "load_seconds": lines[0]["load_seconds"],
        "peak_bytes": report["peak_bytes"],
        "wall_seconds": report["wall_seconds"],
        "page_cache": page_cache,
    }


def postings(cache: Path, corpus: Path, questions: Path) -> dict[str, Any]:
    os.environ["EOR_CACHE"] = str(cache)
    from retrievers.bm25 import BM25Retriever
    from retrievers.bm25_index import tokenize

    index = BM25Retriever(corpus_path=str(corpus)).index
    assert index is not None  # the bm25s engine's
    lengths = [
        length for line in questions.open() for length in index.posting_lengths(tokenize(json.loads(line)["question"]))
    ]
    terms = [len(tokenize(json.loads(line)["question"])) for line in questions.open()]
    return {
        "vocabulary": index.vocabulary_size,
        "terms_per_question": round(statistics.mean(terms), 2),
        "posting_length_median": int(np.median(lengths)),
        "posting_length_mean": int(np.mean(lengths)),
        "posting_length_p95": int(np.percentile(lengths, 95)),
        "posting_length_max": int(max(lengths)),
    }


def bench_size(count: int, args: argparse.Namespace, questions: Path) -> dict[str, Any]:
    work = args.work / label(count)
    work.mkdir(parents=True, exist_ok=True)
    corpus = args.work / f"corpus-{label(count)}.jsonl"
    generated = write_corpus(corpus, count)
    cache = work / "cache"
    result: dict[str, Any] = {"passages": count, "corpus_bytes": corpus.stat().st_size}
    if generated:
        result["generate_seconds"] = round(generated, 1)
    if not args.retrieve_only:
        print(f"[{label(count)}] building (bm25s) ...", flush=True)
        subprocess.run(["rm", "-rf", str(cache)], check=True)
        result["build"] = child(["build", str(corpus), "bm25s"], cache)
    indexes = cache / "indexes"
    result["index_bytes"] = {f.name.split("-")[0]: folder_bytes(f) for f in indexes.iterdir() if f.is_dir()}
    config = write_config(work / "bm25s.yaml", corpus, "bm25s")
    print(f"[{label(count)}] retrieving ...", flush=True)
    result["retrieve_cold"] = retrieval(work, cache, config, questions, cold=True, name="cold")
    result["retrieve_warm"] = retrieval(work, cache, config, questions, cold=False, name="warm")
    result["postings"] = postings(cache, corpus, questions)
    if label(count) in args.rank_bm25 and not args.retrieve_only:
        print(f"[{label(count)}] rank-bm25 ...", flush=True)
        result["rank_bm25_build"] = child(["build", str(corpus), "rank-bm25"], cache)
        few = work / "questions-few.jsonl"
        few.write_text("".join(questions.read_text().splitlines(keepends=True)[: args.rank_bm25_questions]))
        config = write_config(work / "rank-bm25.yaml", corpus, "rank-bm25")
        result["rank_bm25_retrieve_warm"] = retrieval(work, cache, config, few, cold=False, name="rank-bm25")
        warm = (work / "retrieved-warm.jsonl").read_text().splitlines()[: args.rank_bm25_questions]
        result["bm25s_on_the_same_questions"] = percentiles([json.loads(line)["seconds"] for line in warm])
    return result


def bench_ask(count: int, args: argparse.Namespace) -> dict[str, Any]:
    """`eor ask` over BM25 members only, from process start to the printed answer (the index built before),
    three times over one question: the first after the page cache was dropped (where the machine allows)."""
    corpus = args.work / f"corpus-{label(count)}.jsonl"
    cache = args.work / label(count) / "cache"
    config = write_config(args.work / label(count) / "ask.yaml", corpus, "bm25s", "[BM25@1, BM25@3, BM25#2]")
    env = {**os.environ, "EOR_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    question = "who wrote the declaration of independence"
    runs = []
    for attempt in range(3):
        dropped = drop_page_cache() if attempt == 0 else False
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "eor.cli", "ask", question, "--config", str(config), "--no-cache"],
            capture_output=True,
            text=True,
            env=env,
        )
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        answer = next(line for line in done.stdout.splitlines() if line.startswith("Answer:"))
        page_cache = "cold (dropped before the process)" if dropped else "warm"
        runs.append({"seconds": round(seconds, 2), "page_cache": page_cache, "answer": answer})
    return {"passages": count, "question": question, "members": ["BM25@1", "BM25@3", "BM25#2"], "runs": runs}


def profile(count: int, args: argparse.Namespace, questions: Path) -> dict[str, Any]:
    """Where a query's time goes, warm, over the first 200 questions: summing the posting lists (bm25s),
    choosing the top 20, reading their passages from disk."""
    corpus = args.work / f"corpus-{label(count)}.jsonl"
    return child(["profile", str(corpus), str(questions)], args.work / label(count) / "cache")


def _profile(corpus: Path, questions: Path) -> dict[str, Any]:
    from retrievers.bm25 import BM25Retriever, top_indices

    retriever = BM25Retriever(corpus_path=str(corpus))
    texts = [json.loads(line)["question"] for line in questions.open()][:200]
    for text in texts:  # once untimed: the posting lists and passages in the page cache (warm)
        retriever.invoke(text)
    spent = {"scores_ms": 0.0, "top20_ms": 0.0, "read_ms": 0.0}
    for text in texts:
        first = time.perf_counter()
        scores = retriever.scores(text)
        second = time.perf_counter()
        top = top_indices(scores, 20)
        third = time.perf_counter()
        for row in top.tolist():
            retriever.document(row, float(scores[row]))
        spent["scores_ms"] += second - first
        spent["top20_ms"] += third - second
        spent["read_ms"] += time.perf_counter() - third
    return {"questions": len(texts), **{key: round(1000 * value / len(texts), 2) for key, value in spent.items()}}


# -- dense ----------------------------------------------------------------------------------------------


DIMENSION = 384
FACTORY = "IVF4096,PQ48"
TRAIN = 160_000  # FAISS asks for 39 points per list


def _unit_rows(rng: np.random.Generator, rows: int) -> np.ndarray:
    block = rng.standard_normal((rows, DIMENSION), dtype=np.float32)
    block /= np.linalg.norm(block, axis=1, keepdims=True)
    return block


def bench_dense(count: int, args: argparse.Namespace) -> dict[str, Any]:
    import faiss

    faiss.omp_set_num_threads(2)  # the build uses both cores; queries are timed on one
    path = args.work / f"dense-{label(count)}.faiss"
    started = time.perf_counter()
    index = faiss.index_factory(DIMENSION, FACTORY, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng([SEED, count, 2])
    index.train(_unit_rows(rng, TRAIN))
    trained = time.perf_counter() - started
    for start in range(0, count, 250_000):
        index.add(_unit_rows(rng, min(250_000, count - start)))
    faiss.write_index(index, str(path))
    built = time.perf_counter() - started
    del index
    report = child(["dense-query", str(path), "1000"], args.work / "dense-cache")
    return {
        "vectors": count,
        "factory": FACTORY,
        "train_seconds": round(trained, 1),
        "build_seconds": round(built, 1),
        "index_bytes": path.stat().st_size,
        **report,
    }


def _dense_queries(path: Path, count: int) -> dict[str, Any]:
    import faiss

    faiss.omp_set_num_threads(1)
    started = time.perf_counter()
    index = faiss.read_index(str(path))
    faiss.ParameterSpace().set_index_parameter(index, "nprobe", 16)
    loaded = time.perf_counter() - started
    queries = _unit_rows(np.random.default_rng([SEED, 3]), count)
    seconds = []
    for row in queries:
        mark = time.perf_counter()
        index.search(row[None, :], 20)
        seconds.append(time.perf_counter() - mark)
    return {"load_seconds": round(loaded, 2), "nprobe": 16, **percentiles(seconds)}


# -- main -------------------------------------------------------------------------------------------------


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        run_child(sys.argv[2], sys.argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100k,1M,5M", help="corpus sizes (default 100k,1M,5M)")
    parser.add_argument("--rank-bm25", default="100k", help="sizes at which rank-bm25 runs too (default 100k)")
    parser.add_argument("--rank-bm25-questions", type=int, default=100, help="its questions (default 100)")
    parser.add_argument("--questions", type=int, default=1000, help="distinct questions (default 1000)")
    parser.add_argument("--ask", default="", help="a size at which to time `eor ask` (e.g. 1M)")
    parser.add_argument("--dense", default="", help="vector counts for IVF-PQ (e.g. 1M,5M)")
    parser.add_argument("--profile", default="", help="sizes at which to profile a query's parts (e.g. 5M)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/eor-scale"), help="corpora, indexes, outputs")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--force", action="store_true", help="run even above load average 0.5")
    parser.add_argument(
        "--retrieve-only", action="store_true", help="time retrieval over the indexes an earlier run built"
    )
    args = parser.parse_args()
    args.rank_bm25 = {label(size_of(s)) for s in args.rank_bm25.split(",") if s}
    before = load_average()
    if before > MAX_LOAD and not args.force:
        print(f"load average {before:.2f} > {MAX_LOAD}: stop other work first (figures beside it are not figures)")
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    questions = args.work / f"questions-{args.questions}.jsonl"
    write_questions(questions, args.questions)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_before": round(before, 2)},
        "corpus": {"vocabulary": VOCABULARY, "zipf_exponent": EXPONENT, "words_per_passage": WORDS, "seed": SEED},
        "sizes": [],
    }
    for text in args.sizes.split(","):
        if text:
            results["sizes"].append(bench_size(size_of(text), args, questions))
            print(json.dumps(results["sizes"][-1], indent=1), flush=True)
    if args.ask:
        results["ask"] = bench_ask(size_of(args.ask), args)
        print(json.dumps(results["ask"], indent=1), flush=True)
    results["profile"] = [profile(size_of(text), args, questions) for text in args.profile.split(",") if text]
    results["dense"] = []
    for text in args.dense.split(","):
        if text:
            results["dense"].append(bench_dense(size_of(text), args))
            print(json.dumps(results["dense"][-1], indent=1), flush=True)
    results["machine"]["load_after"] = round(load_average(), 2)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
