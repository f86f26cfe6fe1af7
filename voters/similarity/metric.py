"""What a similarity metric is: `SimilarityMetric`, a similarity between two answers in [0, 1], scored in
batches of pairs. eor's metrics (lexical, cosine, bertscore, nli) subclass it here and are registered in
voters.similarity.registry, which imports them; a metric module never imports the registry.

A metric's `cache_key` names the metric together with every parameter that changes its scores, so a disk cache
never mixes two models.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np


class SimilarityMetric(ABC):
    """A similarity between two answers in [0, 1], scored in batches of pairs."""

    name: ClassVar[str] = ""
    #: sim(a, b) == sim(b, a): only one order of each pair is scored (and cached).
    symmetric: ClassVar[bool] = True
    #: worth a disk cache (a model call); cheap string metrics say False.
    cacheable: ClassVar[bool] = True

    def params(self) -> dict[str, Any]:
        """The parameters that change the scores (part of the cache key); batch size and device are not."""
        return {}

    def cache_key(self) -> str:
        return f"{self.name}:{json.dumps(self.params(), sort_keys=True, default=str)}"

    @abstractmethod
    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One score in [0, 1] per pair, as a float array of shape (len(pairs),)."""

    def __repr__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.params().items())
        return f"{type(self).__name__}({args})"
