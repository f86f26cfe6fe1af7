"""Dense retrieval (`Wiki`): a sentence-transformers bi-encoder over the corpus, exact inner product search.

Embeddings are L2-normalised, so the inner product is the cosine similarity. They are computed once
with a progress bar and persisted beside the corpus hash and the encoder's name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from langchain_core.documents import Document
from pydantic import PrivateAttr

from retrievers.base import SourceRetriever, passage
from retrievers.bm25 import _top_indices
from retrievers.corpus import Corpus, load_corpus
from retrievers.index_store import index_folder, load_or_build


class DenseRetriever(SourceRetriever):
    """Bi-encoder retrieval; `query_prefix`/`passage_prefix` serve encoders such as E5 ("query: ")."""

    source_name: str = "Wiki"
    corpus_path: str
    encoder: str = "minilm-l6"
    depth: int = 20
    batch_size: int = 64
    query_prefix: str = ""
    passage_prefix: str = ""
    _corpus: Corpus = PrivateAttr()
    _embeddings: np.ndarray = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        self._corpus = load_corpus(self.corpus_path)
        corpus = self._corpus
        folder = index_folder("dense", corpus.sha256, self.encoder)

        def build(tmp: Path) -> None:
            texts = [
                f"{self.passage_prefix}{title}. {text}" if title else f"{self.passage_prefix}{text}"
                for title, text in zip(corpus.titles, corpus.texts, strict=True)
            ]
            vectors = self._model().encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                show_progress_bar=True,
                convert_to_numpy=True,
            )
            np.save(tmp / "embeddings.npy", vectors.astype(np.float32))

        meta = {
            "kind": "dense",
            "corpus_sha256": corpus.sha256,
            "encoder": self.encoder,
            "passage_prefix": self.passage_prefix,
            "version": 1,
        }
        folder = load_or_build(folder, meta, build)
        self._embeddings = np.load(folder / "embeddings.npy", mmap_mode="r")

    def _model(self):
        from eor.models import load_sentence_encoder

        return load_sentence_encoder(self.encoder)

    def _retrieve_uncached(self, queries: list[str]) -> list[list[Document]]:
        vectors = self._model().encode(
            [self.query_prefix + query for query in queries],
            normalize_embeddings=True,
            convert_to_numpy=True,
            batch_size=self.batch_size,
        )
        scores = np.asarray(vectors @ np.asarray(self._embeddings).T)
        corpus = self._corpus
        results = []
        for row in scores:
            top = _top_indices(row, self.depth)
            results.append(
                [
                    passage(
                        corpus.texts[i],
                        id=corpus.ids[i],
                        title=corpus.titles[i],
                        source=self.source_name,
                        score=float(row[i]),
                    )
                    for i in top
                ]
            )
        return results
