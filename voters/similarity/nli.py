"""NLI entailment similarity (`nli`) with any Hugging Face sequence-classification NLI model (id or path).

sim(a, b) combines P(a entails b) and P(b entails a) (softmax over the model's labels; the entailment
label is found in `config.id2label` by a case-insensitive "entail" that is not "not_entail"/"non-entail",
or given as `entailment_label`, a label name or index). The combination of the two directions is
`mean` (default), `min` or `max`, so the metric is symmetric. All ordered pairs of a call run through the
model in batches of `batch_size`, sorted by length to limit padding. No NLI model ships offline: the
metric must be configured with `model=...`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eor.core.cache_policy import memo
from eor.core.errors import ConfigError
from eor.core.models import resolve_model
from voters.similarity.metric import SimilarityMetric

COMBINATIONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "mean": lambda forward, backward: (forward + backward) / 2.0,
    "min": np.minimum,
    "max": np.maximum,
}

_NEGATED = re.compile(r"(not|non)[\s_-]*entail")


def entailment_index(id2label: dict[Any, str], label: str | int | None = None) -> int:
    """The class index of the entailment label in `id2label` (explicit `label` name/index, or found)."""
    labels = {int(index): str(name) for index, name in id2label.items()}
    listing = ", ".join(f"{i}={name}" for i, name in sorted(labels.items()))
    if label is not None:
        if isinstance(label, int) and label in labels:
            return label
        matches = [i for i, name in labels.items() if name.lower() == str(label).lower()]
        if len(matches) == 1:
            return matches[0]
        raise ConfigError(f"nli: entailment_label {label!r} is not one of the model's labels ({listing})")
    matches = [i for i, name in labels.items() if "entail" in name.lower() and not _NEGATED.search(name.lower())]
    if len(matches) != 1:
        found = "no" if not matches else "several"
        raise ConfigError(
            f"nli: {found} entailment label among the model's labels ({listing}); "
            "name it with metric_params={'nli': {'entailment_label': ...}}"
        )
    return matches[0]


@memo
def _load(model: str, device: str) -> tuple[Any, Any]:
    """The tokenizer and network of an NLI model on `device` (loaded once per process)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    location = str(resolve_model(model))
    tokenizer = AutoTokenizer.from_pretrained(location)
    network = AutoModelForSequenceClassification.from_pretrained(location).to(device).eval()
    return tokenizer, network


class NliSimilarity(SimilarityMetric):
    """Entailment probability of an NLI model, both directions combined."""

    name = "nli"

    def __init__(
        self,
        model: str | None = None,
        combine: str = "mean",
        entailment_label: str | int | None = None,
        batch_size: int = 32,
        max_length: int = 256,
        device: str = "cpu",
    ):
        if not model:
            raise ConfigError(
                "nli needs a model: metric_params={'nli': {'model': <Hugging Face id or local path>}} "
                "(no NLI model is packaged for offline use)"
            )
        if combine not in COMBINATIONS:
            raise ConfigError(f"nli: unknown combine={combine!r}; valid: {', '.join(COMBINATIONS)}")
        self.model = model
        self.combine = combine
        self.entailment_label = entailment_label
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device

    def params(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "combine": self.combine,
            "entailment_label": self.entailment_label,
            "max_length": self.max_length,
        }

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(premise entails hypothesis) for each (premise, hypothesis) pair, batched."""
        if not pairs:
            return np.zeros(0)
        import torch

        tokenizer, network = _load(self.model, self.device)
        index = entailment_index(network.config.id2label, self.entailment_label)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = np.zeros(len(pairs))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                encoded = tokenizer(
                    [pairs[i][0] for i in chunk],
                    [pairs[i][1] for i in chunk],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                logits = network(**encoded).logits.float()
                out[chunk] = torch.softmax(logits, dim=-1)[:, index].cpu().numpy()
        return out

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        ordered = list(dict.fromkeys([(a, b) for a, b in pairs] + [(b, a) for a, b in pairs]))
        position = {pair: i for i, pair in enumerate(ordered)}
        probs = self.entailment(ordered)
        forward = probs[[position[(a, b)] for a, b in pairs]]
        backward = probs[[position[(b, a)] for a, b in pairs]]
        return np.clip(COMBINATIONS[self.combine](forward, backward), 0.0, 1.0)
