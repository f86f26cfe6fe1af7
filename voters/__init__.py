"""Voters: similarity metrics, pooling functions and the `Voter` estimator of the EoR paper (section 4).

Modules: `batch` (`VoteBatch`, the recorded answers every voter kind fits on, predicts and is scored on:
`fit(X, y=None)`, `predict(X)`, `score(X, y=None)`), `similarity` (metric registry, similarity tensor,
pair-score disk cache), `pooling` (appendix C.4), `scoring` (eqs. 6-7 and the tie-breaking argmax),
`grounding` (answer found in the member's own passages), `nelder_mead` (Nelder-Mead with deterministic
restarts) and `voter_fit`, `voter` (the paper's estimator), `smooth` (its softmax surrogate objective),
`features` and `selector` (the learned answer selector, beyond the paper), `cascade` (members in steps, stopping
at a calibrated P), `accounts` (what a fitted voter tells of itself and of one vote), `weights_file` (the JSON
weights-file format) and `codecs` (each kind's weights file both ways: `save_voter`, `voter_from_document`),
`right` (P(right) of a vote's choice) and `loading` (any voter from its weights file; `choose_voter`: a weights
file, else uniform weights, or the judge voter a config names, alone or carried by its cascade). Each voter
kind is one class, which holds no file format. Answer correctness, the training objective, lives in
eor.core.correctness. Conventions fixed here:

- every similarity lies in [0, 1]; cosine clips negative values to 0 (option: (cos + 1) / 2);
- a member with ω^r ≤ member_threshold is dropped: it is never chosen and does not count as an n in the
  other members' pools (N = active members − 1); its decision score is −inf;
- s_m = ω^r_m · (pool_m + ω^g · g_m) when grounding is used (ω^g learned like the other weights);
- ties (within a relative 1e-9) go to the lowest member index;
- a uniform voter has ω^s = 1/K per metric and ω^r = 0.5 for every member.
"""

from __future__ import annotations

from eor.core.correctness import CORRECTNESS, correctness_matrix  # answer correctness lives in eor.core.correctness
from voters.batch import VoteBatch
from voters.grounding import grounding_features
from voters.loading import load_voter
from voters.nelder_mead import VoteData
from voters.pooling import POOLINGS, pool, register_pooling
from voters.scoring import VoteScorer, choose, decision_scores
from voters.selector import AnswerSelector
from voters.similarity import METRICS, PairScoreCache, SimilarityMetric, register_metric, similarity_tensor
from voters.voter import Voter

__all__ = [
    "AnswerSelector",
    "CORRECTNESS",
    "METRICS",
    "POOLINGS",
    "PairScoreCache",
    "SimilarityMetric",
    "VoteBatch",
    "VoteData",
    "VoteScorer",
    "Voter",
    "choose",
    "correctness_matrix",
    "decision_scores",
    "grounding_features",
    "load_voter",
    "pool",
    "register_metric",
    "register_pooling",
    "similarity_tensor",
]
