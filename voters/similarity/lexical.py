"""String similarities on normalised answers: exact match (`em`) and token F1 (`f1`), from eor.core.answers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from eor.core.answers import exact_match, token_f1
from voters.similarity.metric import SimilarityMetric


class ExactMatchSimilarity(SimilarityMetric):
    """1 when the SQuAD-normalised answers are equal, else 0."""

    name = "em"
    cacheable = False

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.array([exact_match(a, b) for a, b in pairs], dtype=float)


class TokenF1Similarity(SimilarityMetric):
    """SQuAD token F1 between the normalised answers (symmetric: precision and recall swap)."""

    name = "f1"
    cacheable = False

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.array([token_f1(a, b) for a, b in pairs], dtype=float)
