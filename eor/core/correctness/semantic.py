"""Semantic-equivalence correctness (`semantic`): a prediction matches a gold answer when their sentence
embeddings are close.

eor.core.correctness registers it as `semantic`, so `eor bench --metric semantic` (and training with that
objective) can use it. The score of a (prediction, gold) pair is 0 or 1:

- 1 when the normalised strings are equal (exact match);
- 0 when the two differ in the numbers they contain ("1901" vs "1902" embed almost identically);
- otherwise 1 when the cosine of their normalised `minilm-l6` embeddings is at least `threshold` (0.85:
  on this encoder "USA"/"United States" is 0.89 and "the Beatles"/"Beatles" 0.96, while "1901"/"1902" is
  0.81, "red"/"blue" 0.73 and "Michael Jordan"/"Michael Jackson" 0.63).

Multiple gold answers: best over golds, as for every correctness metric. Embeddings are cached per string;
`prime(texts)` encodes many strings in one batch before scoring (what `eor bench` does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from eor.core.answers import normalize_answer
from eor.core.cache_policy import KeyedMemo
from eor.core.models import load_sentence_encoder

NAME = "semantic"
DEFAULT_THRESHOLD = 0.85
DEFAULT_ENCODER = "minilm-l6"
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


class SemanticEquivalence:
    """A correctness function (prediction, gold) -> 0/1 by embedding cosine above a threshold."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, model: str = DEFAULT_ENCODER, device: str = "cpu"):
        self.threshold = float(threshold)
        self.model = model
        self.device = device
        self._embeddings: KeyedMemo[str, np.ndarray] = KeyedMemo()

    def prime(self, texts: Iterable[str], batch_size: int = 64) -> None:
        """Encode every new normalised text of `texts` in batches (later scoring then hits the cache)."""
        new = [
            text
            for text in dict.fromkeys(normalize_answer(t) for t in texts)
            if text and self._embeddings.get(text) is None
        ]
        if not new:
            return

        encoder = load_sentence_encoder(self.model, device=self.device)
        vectors = encoder.encode(
            new, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        for text, vector in zip(new, np.asarray(vectors, dtype=np.float64), strict=True):
            self._embeddings.keep(text, vector)

    def cosine(self, a: str, b: str) -> float:
        """Cosine of the normalised texts' embeddings (texts given normalised)."""
        self.prime([a, b])
        first, second = self._embeddings.get(a), self._embeddings.get(b)
        return 0.0 if first is None or second is None else float(first @ second)  # None: an empty text

    def __call__(self, prediction: str, gold: str) -> float:
        pred = normalize_answer(prediction)
        ref = normalize_answer(gold)
        if not pred or not ref:
            return 0.0
        if pred == ref:
            return 1.0
        if sorted(_NUMBER.findall(pred)) != sorted(_NUMBER.findall(ref)):
            return 0.0
        return float(self.cosine(pred, ref) >= self.threshold)


semantic_equivalence = SemanticEquivalence()
