"""Answer normalisation and correctness metrics (SQuAD conventions), shared by voting, training and evaluation.

A prediction is compared with a list of acceptable gold answers and scores the best over them.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, remove punctuation and articles, collapse white space (the SQuAD v1.1 script)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall over normalised tokens (SQuAD F1)."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def contains(prediction: str, gold: str) -> float:
    """1.0 when the normalised gold answer occurs in the normalised prediction as a whole-token span."""
    gold_norm = normalize_answer(gold)
    if not gold_norm:
        return 0.0
    return float(f" {gold_norm} " in f" {normalize_answer(prediction)} ")


def best_over_golds(metric: Callable[[str, str], float], prediction: str, golds: Sequence[str]) -> float:
    """The best score of `prediction` against any gold answer; 0.0 when there is no gold answer."""
    return max((metric(prediction, gold) for gold in golds), default=0.0)


def matches_gold(prediction: str, golds: Sequence[str]) -> bool:
    """Whether `prediction` equals a gold answer after SQuAD normalisation (exact match against any of them):
    whether an answer is right, as every EM figure of eor counts it; False without a gold answer."""
    return best_over_golds(exact_match, prediction, golds) >= 1.0
