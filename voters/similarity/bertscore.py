"""BERTScore F1 between two answers (`bertscore`), through the bert-score package with any local or hub model.

F1 is symmetric (swapping candidate and reference swaps precision and recall), so one order of each pair
is scored. The packaged `minilm-l6` works offline; for a model bert-score does not know, `num_layers`
defaults to the model's last layer (6 for MiniLM-L6), read from its config. Answers that are empty after
stripping are not sent to the model (bert-score warns and returns 0 for them): an empty answer scores 1
against another empty answer and 0 against anything else, as exact match would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eor.core.cache_policy import memo
from eor.core.models import resolve_model
from voters.similarity.metric import SimilarityMetric


def _location(model: str) -> str:
    return str(resolve_model(model))


def _num_layers(location: str, model: str) -> int:
    from bert_score.utils import model2layers

    if model in model2layers:
        return int(model2layers[model])
    from transformers import AutoConfig

    return int(AutoConfig.from_pretrained(location).num_hidden_layers)


@memo
def _scorer(location: str, num_layers: int, device: str) -> Any:
    """bert-score's scorer of a model (loaded once per process)."""
    from bert_score import BERTScorer

    return BERTScorer(model_type=location, num_layers=num_layers, device=device)


class BertScoreSimilarity(SimilarityMetric):
    """BERTScore F1 (no idf, no baseline rescaling), clipped to [0, 1]."""

    name = "bertscore"

    def __init__(
        self,
        model: str = "minilm-l6",
        num_layers: int | None = None,
        batch_size: int = 64,
        device: str = "cpu",
    ):
        self.model = model
        self.num_layers = num_layers
        self.batch_size = batch_size
        self.device = device

    def params(self) -> dict[str, Any]:
        return {"model": self.model, "num_layers": self.num_layers}

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        scores = np.zeros(len(pairs))
        modelled = []
        for i, (a, b) in enumerate(pairs):
            if a.strip() and b.strip():
                modelled.append(i)
            else:
                scores[i] = float(not a.strip() and not b.strip())
        if not modelled:
            return scores
        location = _location(self.model)
        layers = self.num_layers if self.num_layers is not None else _num_layers(location, self.model)
        scorer = _scorer(location, layers, self.device)
        cands = [pairs[i][0] for i in modelled]
        refs = [pairs[i][1] for i in modelled]
        _, _, f1 = scorer.score(cands, refs, batch_size=self.batch_size)
        scores[modelled] = np.clip(f1.detach().cpu().numpy().astype(np.float64), 0.0, 1.0)
        return scores
