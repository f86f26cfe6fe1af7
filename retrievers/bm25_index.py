"""rank-bm25's Okapi BM25, built by streaming over a corpus and served from bm25s's memory-mapped index.

The scores are rank-bm25's `BM25Okapi.get_scores`, bit for bit:

    score(q, d) = Σ_{t in q, repeats counted} idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·|d| / avgdl))
    idf(t) = ln(N − n(t) + 0.5) − ln(n(t) + 0.5), a negative idf replaced by ε · (mean idf over the vocabulary)

with ε = 0.25, N passages, n(t) the passages holding t, |d| a passage's token count and avgdl their mean.
bm25s's own Robertson IDF floors a negative idf at 0 instead, so the idf is computed here: in float64, in
Python's `math.log`, summed over terms in their order of first appearance (rank-bm25's dictionary order),
and each (term, passage) contribution evaluated in rank-bm25's order of operations. A query's scores are the
contributions summed in query order from 0.0, as rank-bm25 sums them, so the two agree exactly (for k1 > 0:
with k1 = 0, or b = 1 and an empty passage, rank-bm25 divides 0 by 0 where this index holds no entry).

The index is bm25s's eager sparse layout (`data`, `indices`, `indptr` of a CSC matrix, term → passages; a
`vocab.index.json` and `params.index.json`), loaded with `bm25s.BM25.load(mmap=True)`: starting costs the
vocabulary alone, and a query reads the posting lists of its terms.

The build is streaming: one pass tokenizes the corpus, keeping the vocabulary and each passage's (term id,
count) pairs, written to disk in chunks of CHUNK pairs; a second pass places each chunk's contributions
into the memory-mapped CSC arrays by term. No token lists of the corpus are held in memory.
"""

from __future__ import annotations

import json
import math
import os
import re
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import numpy as np

# A short English stop list (the usual Lucene/NLTK core): BM25 over questions is otherwise swamped by them.
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i if in into is it its of on or she that the "
    "their them they this to was were what when where which who whom why will with how did does do".split()
)
_TOKEN = re.compile(r"\w+")
EPSILON = 0.25  # rank-bm25's floor of a negative idf, as a share of the mean idf
CHUNK = 1 << 24  # (term, count) pairs per chunk written by the first pass
INDEX_VERSION = 1
PARAMS = "params.index.json"


def tokenize(text: str) -> list[str]:
    return [token for token in _TOKEN.findall(text.lower()) if token not in STOPWORDS]


class Chunk(NamedTuple):
    """Pairs of the first pass for passages first..first+size-1: `<prefix>.terms`, `.counts`, `.uniques`."""

    prefix: Path
    first: int
    size: int  # not `count`, which would hide tuple.count

    def read(self, part: str) -> np.ndarray:
        return np.fromfile(self.prefix.with_suffix(f".{part}"), dtype="<i4")

    def remove(self) -> None:
        for part in ("terms", "counts", "uniques"):
            self.prefix.with_suffix(f".{part}").unlink()


def build_index(passages: Iterable[str], folder: Path, *, k1: float, b: float) -> None:
    """Write the BM25 index of `passages` (each passage's title and text, as one string) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab: dict[str, int] = {}
    lengths = array("q")
    chunks = _first_pass(passages, vocab, lengths, folder)
    frequency = np.zeros(len(vocab), dtype=np.int64)
    for chunk in chunks:
        frequency += np.bincount(chunk.read("terms"), minlength=len(vocab))
    idf = okapi_idf(frequency.tolist(), len(lengths))
    doc_lengths = np.asarray(lengths, dtype=np.int64)
    avgdl = int(doc_lengths.sum()) / len(doc_lengths) if len(doc_lengths) else 0.0  # rank-bm25's int / int
    _second_pass(chunks, idf, frequency, doc_lengths, avgdl, folder, k1=k1, b=b)
    (folder / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    params = {
        "k1": k1,
        "b": b,
        "delta": 0.5,
        "method": "robertson",  # bm25s's name for this formula; the idf above is rank-bm25's, not bm25s's
        "idf_method": None,
        "dtype": "float64",
        "int_dtype": "int32",
        "num_docs": len(doc_lengths),
        "backend": "numpy",
    }
    (folder / PARAMS).write_text(json.dumps(params, indent=2))


def okapi_idf(frequencies: list[int], passages: int) -> np.ndarray:
    """rank-bm25's idf (BM25Okapi._calc_idf) for document frequencies in the vocabulary's order of first
    appearance."""
    idf = [math.log(passages - freq + 0.5) - math.log(freq + 0.5) for freq in frequencies]
    total = 0.0
    for value in idf:  # summed one by one, in rank-bm25's order, for the same float
        total += value
    floor = EPSILON * (total / len(idf)) if idf else 0.0
    return np.asarray([floor if value < 0 else value for value in idf], dtype=np.float64)


def _first_pass(passages: Iterable[str], vocab: dict[str, int], lengths: array, folder: Path) -> list[Chunk]:
    """Tokenize every passage, growing `vocab` and `lengths`; each passage's (term, count) pairs go to disk."""
    chunks: list[Chunk] = []
    terms, counts, uniques = array("i"), array("i"), array("i")

    def flush() -> None:
        chunk = Chunk(folder / f"chunk{len(chunks)}.tmp", len(lengths) - len(uniques), len(uniques))
        for part, values in (("terms", terms), ("counts", counts), ("uniques", uniques)):
            chunk.prefix.with_suffix(f".{part}").write_bytes(values.tobytes())
            del values[:]
        chunks.append(chunk)

    for text in passages:
        tokens = tokenize(text)
        frequencies: dict[str, int] = {}
        for token in tokens:
            frequencies[token] = frequencies.get(token, 0) + 1
        lengths.append(len(tokens))
        uniques.append(len(frequencies))
        for token, count in frequencies.items():
            term = vocab.get(token)
            if term is None:
                term = vocab[token] = len(vocab)
            terms.append(term)
            counts.append(count)
        if len(terms) >= CHUNK:
            flush()
    if uniques:
        flush()
    return chunks


def _second_pass(
    chunks: list[Chunk],
    idf: np.ndarray,
    frequency: np.ndarray,
    lengths: np.ndarray,
    avgdl: float,
    folder: Path,
    *,
    k1: float,
    b: float,
) -> None:
    """Each chunk's contributions, placed by term into the memory-mapped CSC arrays."""
    indptr = np.zeros(len(idf) + 1, dtype=np.int64)
    np.cumsum(frequency, out=indptr[1:])
    data = _npy(folder / "data.csc.index.npy", np.float64, int(indptr[-1]))
    indices = _npy(folder / "indices.csc.index.npy", np.int32, int(indptr[-1]))
    cursor = indptr[:-1].copy()
    for chunk in chunks:
        terms, tf = chunk.read("terms"), chunk.read("counts").astype(np.int64)
        if not len(terms):  # passages without a token
            chunk.remove()
            continue
        docs = np.repeat(np.arange(chunk.first, chunk.first + chunk.size, dtype=np.int64), chunk.read("uniques"))
        # rank-bm25: idf * (q_freq * (k1 + 1) / (q_freq + k1 * (1 - b + b * doc_len / avgdl))), in that order
        contribution = idf[terms] * (tf * (k1 + 1) / (tf + k1 * ((1 - b) + b * lengths[docs] / avgdl)))
        order = np.argsort(terms, kind="stable")  # by term; passages stay ascending within a term
        sorted_terms = terms[order]
        starts = np.flatnonzero(np.r_[True, sorted_terms[1:] != sorted_terms[:-1]])
        runs = np.diff(np.r_[starts, len(order)])
        place = cursor[sorted_terms] + (np.arange(len(order)) - np.repeat(starts, runs))
        indices[place] = docs[order]
        data[place] = contribution[order]
        cursor[sorted_terms[starts]] += runs
        chunk.remove()
    data.flush()
    indices.flush()
    np.save(folder / "indptr.csc.index.npy", indptr)


def _npy(path: Path, dtype: type, length: int) -> np.memmap:
    """A new .npy file of `length` zeros, memory-mapped for writing, its blocks reserved first: a full disk
    raises ENOSPC here rather than SIGBUS at a write through the map."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(length,))
    with path.open("r+b") as handle:
        try:
            os.posix_fallocate(handle.fileno(), 0, path.stat().st_size)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from None  # names the file
    return array


class BM25Index:
    """A built index, memory-mapped through bm25s; `scores(tokens)` as rank-bm25's `get_scores(tokens)`."""

    def __init__(self, folder: Path) -> None:
        import bm25s

        self._bm25 = bm25s.BM25.load(str(folder), mmap=True, load_vocab=True, show_progress=False)
        self._vocab: dict[str, int] = self._bm25.vocab_dict

    def __len__(self) -> int:
        return int(self._bm25.scores["num_docs"])

    def scores(self, tokens: list[str]) -> np.ndarray:
        ids = [self._vocab[token] for token in tokens if token in self._vocab]  # unknown terms add 0, as there
        if not ids:  # bm25s refuses a query over an empty vocabulary (a corpus of stop words alone)
            return np.zeros(len(self), dtype=np.float64)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float64)

    @property
    def vocabulary_size(self) -> int:
        """The distinct terms indexed."""
        return len(self._vocab)

    def posting_lengths(self, tokens: list[str]) -> list[int]:
        """How many passages hold each token (0 for a token outside the vocabulary)."""
        indptr = self._bm25.scores["indptr"]
        return [int(indptr[t + 1] - indptr[t]) if (t := self._vocab.get(token)) is not None else 0 for token in tokens]
