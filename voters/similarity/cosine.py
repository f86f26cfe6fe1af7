"""Sentence-embedding cosine similarity (`cosine`) with a sentence-transformers encoder.

Cosine lies in [-1, 1]. By default negative values are clipped to 0 (`negative="clip"`), so the score keeps
the cosine's own scale: the pooling threshold s (0.5) then means "cosine above 0.5". The affine map
(cos + 1) / 2 (`negative="shift"`) would put unrelated answers (cosine near 0) at 0.5, right at that
threshold, so it is offered only as an option.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eor.core.errors import ConfigError
from eor.core.models import load_sentence_encoder
from voters.similarity.metric import SimilarityMetric

NEGATIVE_MODES = ("clip", "shift")


class CosineSimilarity(SimilarityMetric):
    """Cosine of normalised sentence embeddings; each distinct string of a batch is encoded once."""

    name = "cosine"

    def __init__(self, model: str = "minilm-l6", negative: str = "clip", batch_size: int = 64, device: str = "cpu"):
        if negative not in NEGATIVE_MODES:
            raise ConfigError(f"cosine: unknown negative={negative!r}; valid: {', '.join(NEGATIVE_MODES)}")
        self.model = model
        self.negative = negative
        self.batch_size = batch_size
        self.device = device

    def params(self) -> dict[str, Any]:
        return {"model": self.model, "negative": self.negative}

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)

        texts = list(dict.fromkeys(text for pair in pairs for text in pair))
        position = {text: i for i, text in enumerate(texts)}
        encoder = load_sentence_encoder(self.model, device=self.device)
        embeddings = np.asarray(
            encoder.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ),
            dtype=np.float64,
        )
        left = embeddings[[position[a] for a, _ in pairs]]
        right = embeddings[[position[b] for _, b in pairs]]
        cosine = np.einsum("ij,ij->i", left, right)
        if self.negative == "shift":
            cosine = (cosine + 1.0) / 2.0
        return np.clip(cosine, 0.0, 1.0)
