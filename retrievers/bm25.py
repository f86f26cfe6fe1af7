"""BM25 over a JSON Lines corpus: rank-bm25's Okapi BM25, served by bm25s from a memory-mapped index.

Two engines give the same scores (retrievers.bm25_index shows why, tests/test_bm25_engines.py checks it on
every NQ question): `bm25s` (the default) builds its index by streaming over the corpus and memory-maps it,
so a start costs the vocabulary and a query the posting lists of its terms; `rank-bm25` (the reference)
pickles rank-bm25's BM25Okapi whole and scores every passage in Python, and serves only small corpora. The
engine is part of the pool's identity when it is not the default (eor.pipeline.pool.member_identity).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import PrivateAttr

from retrievers.base import SourceRetriever, passage
from retrievers.bm25_index import INDEX_VERSION, STOPWORDS, BM25Index, build_index, tokenize
from retrievers.corpus import Corpus, load_corpus
from retrievers.index_store import index_folder, load_or_build
from retrievers.withheld import keep, withheld_of

__all__ = ["STOPWORDS", "BM25Retriever", "tokenize", "top_indices"]
ENGINES = ("bm25s", "rank-bm25")
DEFAULT_ENGINE: Literal["bm25s", "rank-bm25"] = "bm25s"


class BM25Retriever(SourceRetriever):
    """Okapi BM25 (k1=1.5, b=0.75) over title + text of every passage."""

    source_name: str = "BM25"
    withholds: ClassVar[bool] = True  # ranks past withheld passages (retrievers.withheld)
    corpus_path: str
    depth: int = 20
    k1: float = 1.5
    b: float = 0.75
    engine: Literal["bm25s", "rank-bm25"] = DEFAULT_ENGINE
    _corpus: Corpus = PrivateAttr()
    _scorer: object = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        self._corpus = load_corpus(self.corpus_path)
        if self.engine == "bm25s":
            self._scorer = self._bm25s()
        else:
            self._scorer = self._rank_bm25()

    def _texts(self, desc: str) -> object:
        from tqdm.auto import tqdm

        passages = tqdm(self._corpus, total=len(self._corpus), desc=desc, unit="passage")
        return (f"{p.title} {p.text}" for p in passages)

    def _bm25s(self) -> BM25Index:
        corpus = self._corpus
        folder = index_folder("bm25s", corpus.sha256, f"k1={self.k1},b={self.b}")
        meta = {"kind": "bm25s", "corpus_sha256": corpus.sha256, "k1": self.k1, "b": self.b, "version": INDEX_VERSION}

        def build(tmp: Path) -> None:
            build_index(self._texts("BM25 index"), tmp, k1=self.k1, b=self.b)  # type: ignore[arg-type]

        return BM25Index(load_or_build(folder, meta, build, source=corpus.path))

    def _rank_bm25(self) -> object:
        corpus = self._corpus
        folder = index_folder("bm25", corpus.sha256, f"k1={self.k1},b={self.b}")

        def build(tmp: Path) -> None:
            from rank_bm25 import BM25Okapi

            tokens = [tokenize(text) for text in self._texts("BM25 index (rank-bm25)")]  # type: ignore[attr-defined]
            with (tmp / "bm25.pkl").open("wb") as handle:
                pickle.dump(BM25Okapi(tokens, k1=self.k1, b=self.b), handle)

        meta = {"kind": "bm25", "corpus_sha256": corpus.sha256, "k1": self.k1, "b": self.b, "version": 1}
        with (load_or_build(folder, meta, build, source=corpus.path) / "bm25.pkl").open("rb") as handle:
            return pickle.load(handle)  # our own cache file, written above

    def scores(self, query: str) -> np.ndarray:
        """Every passage's BM25 score for `query` (row i is passage i of the corpus)."""
        tokens = tokenize(query)
        if isinstance(self._scorer, BM25Index):
            return self._scorer.scores(tokens)
        return np.asarray(self._scorer.get_scores(tokens), dtype=np.float64)  # type: ignore[attr-defined]

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        # Withheld passages (a corpus ablation) are ranked past: the `depth` best of the others, ranked by the
        # whole corpus's statistics (idf, mean length: the index is built once), exactly the full ranking with
        # the withheld passages struck out.
        results = []
        for query, run_manager in zip(queries, run_managers, strict=True):
            withheld = withheld_of(run_manager)
            scores = self.scores(query)
            top = top_indices(scores, self.depth + len(withheld))
            found = [self.document(int(i), float(scores[i])) for i in top]
            results.append(keep(found, withheld, self.depth))
        return results

    @property
    def index(self) -> BM25Index | None:
        """The bm25s index (None under the rank-bm25 engine)."""
        return self._scorer if isinstance(self._scorer, BM25Index) else None

    def document(self, row: int, score: float) -> Document:
        """Passage `row` of the corpus as a retrieved Document with `score`."""
        found = self._corpus[row]
        return passage(
            found.text, id=found.id, title=found.title, source=self.source_name, score=score, cite=found.cite
        )


def top_indices(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the `depth` highest scores, best first; equal scores in corpus order.

    Only passages that share a term with the query score above 0 (BM25's idf is positive): they are the
    candidates, so a query over 5M passages sorts thousands of scores, not millions (34 ms of a 41 ms query
    before). With fewer candidates than `depth`, the rest are the first passages scoring 0.
    """
    depth = min(depth, len(scores))
    chosen = np.flatnonzero(scores > 0)
    if len(chosen) > depth:
        kth = np.partition(scores[chosen], len(chosen) - depth)[len(chosen) - depth]
        chosen = chosen[scores[chosen] >= kth]  # every passage tied with the last place stays a candidate
    chosen = chosen[np.lexsort((chosen, -scores[chosen]))][:depth]
    if len(chosen) < depth:
        rest = np.flatnonzero(scores <= 0)
        rest = rest[np.lexsort((rest, -scores[rest]))] if (scores < 0).any() else rest  # none below 0 in BM25
        chosen = np.concatenate([chosen, rest[: depth - len(chosen)]])
    return chosen
