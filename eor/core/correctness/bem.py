"""BEM correctness (`bem`, Bulian et al. 2022, "Tomayto, Tomahto. Beyond Token-level Answer Equivalence"):
a BERT classifier trained on answer equivalence judges whether a candidate answer means the same as a gold
answer to the same question. The EoR paper reports it beside exact match.

It needs such a model, given as a Hugging Face id or a local folder (`eor bench --metric bem --bem-model
ID_OR_PATH`, or `BemCorrectness(model)` registered as `bem`); nothing is downloaded by eor itself, so an id
must be in the local Hugging Face cache. The input is the original BEM layout, `[CLS] candidate [SEP]
reference [SEP] question [SEP]`, with segment ids 0, 1, 2 (or 0, 1, 1 for a model with two token types, as in
its PyTorch ports); the score is 1 when the normalised strings are equal, else 1 when P(equivalent) =
softmax(logits)[1] is at least `threshold` (0.5). Several gold answers: the best over them
(as for every correctness metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eor.core.answers import normalize_answer
from eor.core.errors import ConfigError

NAME = "bem"
DEFAULT_THRESHOLD = 0.5


class BemCorrectness:
    """A question-aware correctness function: `score(triples)` for (question, candidate, reference) triples."""

    needs_question = True

    def __init__(self, model: str | None = None, threshold: float = DEFAULT_THRESHOLD, batch_size: int = 32):
        self.model = model
        self.threshold = float(threshold)
        self.batch_size = batch_size
        self._loaded: tuple[Any, Any] | None = None

    def probabilities(self, triples: Sequence[tuple[str, str, str]]) -> list[float]:
        """P(equivalent) of each (question, candidate, reference), in batches."""
        import torch

        tokenizer, network = self._network()
        types = 3 if getattr(network.config, "type_vocab_size", 2) >= 3 else 2
        out: list[float] = []
        for start in range(0, len(triples), self.batch_size):
            batch = [_encode(tokenizer, *triple, types) for triple in triples[start : start + self.batch_size]]
            width = max(len(ids) for ids, _ in batch)
            pad = tokenizer.pad_token_id or 0
            ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in batch])
            segments = torch.tensor([s + [0] * (width - len(s)) for _, s in batch])
            mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in batch])
            with torch.no_grad():
                logits = network(input_ids=ids, token_type_ids=segments, attention_mask=mask).logits
            out += torch.softmax(logits.float(), dim=-1)[:, 1].tolist()
        return out

    def score(self, triples: Sequence[tuple[str, str, str]]) -> list[float]:
        """0/1 per (question, candidate, reference): equal after normalisation, or P(equivalent) ≥ threshold."""
        equal = [bool(normalize_answer(c)) and normalize_answer(c) == normalize_answer(r) for _, c, r in triples]
        judged = [t for t, same in zip(triples, equal, strict=True) if not same and normalize_answer(t[1])]
        probability = dict(zip(judged, self.probabilities(judged), strict=True)) if judged else {}
        return [
            1.0 if same else float(probability.get(triple, 0.0) >= self.threshold)
            for triple, same in zip(triples, equal, strict=True)
        ]

    def __call__(self, prediction: str, gold: str) -> float:
        raise ConfigError("bem judges an answer to a question: score it with the question (correctness_matrix)")

    def _network(self) -> tuple[Any, Any]:
        if self.model is None:
            raise ConfigError(
                "--metric bem needs a BEM model: --bem-model ID_OR_PATH (a BERT sequence classifier trained on "
                "answer equivalence, as a Hugging Face id in the local cache or a folder)"
            )
        if self._loaded is None:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            try:
                tokenizer = AutoTokenizer.from_pretrained(self.model)
                network = AutoModelForSequenceClassification.from_pretrained(self.model).eval()
            except OSError as exc:
                raise ConfigError(f"BEM model {self.model!r} could not be loaded: {str(exc).splitlines()[0]}") from None
            if network.config.num_labels != 2:
                raise ConfigError(f"BEM model {self.model!r} has {network.config.num_labels} labels; BEM has 2")
            self._loaded = (tokenizer, network)
        return self._loaded


def _encode(tokenizer: Any, question: str, candidate: str, reference: str, types: int) -> tuple[list[int], list[int]]:
    """Token ids and segment ids of [CLS] candidate [SEP] reference [SEP] question [SEP]."""
    parts = [tokenizer.encode(text, add_special_tokens=False) for text in (candidate, reference, question)]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids = [cls, *parts[0], sep, *parts[1], sep, *parts[2], sep]
    third = 2 if types >= 3 else 1
    segments = [0] * (len(parts[0]) + 2) + [1] * (len(parts[1]) + 1) + [third] * (len(parts[2]) + 1)
    return ids[:512], segments[:512]


bem_correctness = BemCorrectness()
