"""Voters: similarity metrics, pooling functions and the `Voter` estimator of the EoR paper (section 4)."""

from __future__ import annotations

from voters.correctness import CORRECTNESS, correctness_matrix
from voters.grounding import grounding_features
from voters.pooling import POOLINGS, pool, register_pooling
from voters.scoring import VoteScorer, choose, decision_scores
from voters.similarity import METRICS, PairScoreCache, SimilarityMetric, register_metric, similarity_tensor
from voters.training import VoteData
from voters.voter import Voter

__all__ = [
    "CORRECTNESS",
    "METRICS",
    "POOLINGS",
    "PairScoreCache",
    "SimilarityMetric",
    "VoteData",
    "VoteScorer",
    "Voter",
    "choose",
    "correctness_matrix",
    "decision_scores",
    "grounding_features",
    "pool",
    "register_metric",
    "register_pooling",
    "similarity_tensor",
]
