"""BM25 over a JSON Lines corpus (rank-bm25's Okapi BM25), persisted once built."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import PrivateAttr

from retrievers.base import SourceRetriever, passage
from retrievers.corpus import Corpus, load_corpus
from retrievers.index_store import index_folder, load_or_build

_TOKEN = re.compile(r"\w+")
# A short English stop list (the usual Lucene/NLTK core): BM25 over questions is otherwise swamped by them.
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i if in into is it its of on or she that the "
    "their them they this to was were what when where which who whom why will with how did does do".split()
)


def tokenize(text: str) -> list[str]:
    return [token for token in _TOKEN.findall(text.lower()) if token not in STOPWORDS]


class BM25Retriever(SourceRetriever):
    """Okapi BM25 (k1=1.5, b=0.75) over title + text of every passage."""

    source_name: str = "BM25"
    corpus_path: str
    depth: int = 20
    k1: float = 1.5
    b: float = 0.75
    _corpus: Corpus = PrivateAttr()
    _bm25: object = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        from tqdm.auto import tqdm

        self._corpus = load_corpus(self.corpus_path)
        corpus = self._corpus
        folder = index_folder("bm25", corpus.sha256, f"k1={self.k1},b={self.b}")

        def build(tmp: Path) -> None:
            from rank_bm25 import BM25Okapi

            tokens = [
                tokenize(f"{title} {text}")
                for title, text in tqdm(
                    zip(corpus.titles, corpus.texts, strict=True),
                    total=len(corpus),
                    desc="BM25 index",
                    unit="doc",
                )
            ]
            with (tmp / "bm25.pkl").open("wb") as handle:
                pickle.dump(BM25Okapi(tokens, k1=self.k1, b=self.b), handle)

        meta = {"kind": "bm25", "corpus_sha256": corpus.sha256, "k1": self.k1, "b": self.b, "version": 1}
        folder = load_or_build(folder, meta, build)
        with (folder / "bm25.pkl").open("rb") as handle:
            self._bm25 = pickle.load(handle)  # our own cache file, written above

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        results = []
        for query in queries:
            scores = np.asarray(self._bm25.get_scores(tokenize(query)))
            top = _top_indices(scores, self.depth)
            results.append([self._passage(int(i), float(scores[i])) for i in top])
        return results

    def _passage(self, index: int, score: float) -> Document:
        corpus = self._corpus
        return passage(
            corpus.texts[index],
            id=corpus.ids[index],
            title=corpus.titles[index],
            source=self.source_name,
            score=score,
        )


def _top_indices(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the `depth` highest scores, best first; ties keep corpus order (stable)."""
    depth = min(depth, len(scores))
    candidates = np.argpartition(-scores, depth - 1)[:depth] if depth < len(scores) else np.arange(len(scores))
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order]
