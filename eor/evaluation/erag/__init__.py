"""Document-level evaluation of retrievers: eRAG labels and metrics, baselines, correlation with end-to-end
quality, and context utility (relevance propagation).

Modules: `metrics` (the retrieval-metric registry: P, R, MAP, MRR, NDCG, Hit with `@k` cutoffs),
`correlation` (Kendall's τ-b, Spearman's ρ, Pearson's r, NaN-aware), `generators` (requests to prompts,
batched and cached through the generation stage), `evaluate` (the eRAG API), `utility` (U = (P(context) −
P(0-shot)) / P(0-shot) against nDCG@k) and `time_and_memory` (eRAG against end-to-end time and memory, in child
processes). The commands `eor erag` and `eor utility` are eor.commands.erag_command; their reports are written by
eor.evaluation.writing (`erag_sections`, `erag_figures`).
"""

from __future__ import annotations

from eor.evaluation.erag.correlation import correlate, kendall_tau, pearson_r, spearman_rho
from eor.evaluation.erag.evaluate import EragResult, Labelling, ListScores, Passage, as_passage, evaluate
from eor.evaluation.erag.generators import Request, generate, make_generator
from eor.evaluation.erag.metrics import (
    RETRIEVAL_METRICS,
    MetricSpec,
    default_metrics,
    mean_scores,
    parse_metric,
    parse_metrics,
    register_retrieval_metric,
    score,
    score_questions,
)
from eor.evaluation.erag.utility import UtilityResult, evaluate_utility, utility
from eor.pipeline.stages.generation import GenerationStats
from eor.runs.generation_cache import GenerationCache

__all__ = [
    "RETRIEVAL_METRICS",
    "GenerationStats",
    "EragResult",
    "GenerationCache",
    "Labelling",
    "ListScores",
    "MetricSpec",
    "Passage",
    "Request",
    "UtilityResult",
    "as_passage",
    "correlate",
    "default_metrics",
    "evaluate",
    "evaluate_utility",
    "generate",
    "kendall_tau",
    "make_generator",
    "mean_scores",
    "parse_metric",
    "parse_metrics",
    "pearson_r",
    "register_retrieval_metric",
    "score",
    "score_questions",
    "spearman_rho",
    "utility",
]
