"""Similarity metrics between two answers, found by name in one registry, and the similarity tensor.

Registered in voters.similarity.registry: `em`, `f1` (strings), `cosine` (sentence embeddings), `bertscore`
(BERTScore F1), `nli` (entailment probability, both directions). Heavy libraries load on first use, not on
import.
"""

from __future__ import annotations

from voters.similarity.metric import SimilarityMetric
from voters.similarity.pair_score_cache import PairScoreCache
from voters.similarity.registry import (
    METRICS,
    available_metrics,
    build_metric,
    build_metrics,
    parse_metric_spec,
    register_metric,
)
from voters.similarity.tensor import check_answers, similarity_tensor

__all__ = [
    "METRICS",
    "PairScoreCache",
    "SimilarityMetric",
    "available_metrics",
    "build_metric",
    "build_metrics",
    "check_answers",
    "parse_metric_spec",
    "register_metric",
    "similarity_tensor",
]
