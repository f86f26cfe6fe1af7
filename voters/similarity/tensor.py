"""The similarity tensor of a batch of questions: shape (questions, members, members, metrics).

Answers are deduplicated per question, and the distinct pairs of ALL questions (deduplicated again across
questions; one canonical order for symmetric metrics) go to each metric in ONE `score_pairs` call, after
the disk cache has supplied what it holds. A pair of identical strings is scored by the metric like any
other (em gives 1), so members with the same answer get whatever the metric says of that answer with
itself. Entry [q, m, n, k] = sim_k(y_m, y_n); the diagonal (n = m) is filled the same way but never
enters a pooling.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.errors import InputError
from voters.similarity.metric import SimilarityMetric
from voters.similarity.pair_score_cache import PairScoreCache, as_cache
from voters.similarity.registry import build_metrics

log = logging.getLogger(__name__)


def check_answers(answers_per_question: Sequence[Sequence[str]], n_members: int | None = None) -> int:
    """Validate a (questions × members) list of answer strings and return the member count."""
    if isinstance(answers_per_question, str | bytes):
        raise InputError("answers must be a list (one per question) of lists (one per member) of strings")
    sizes = {len(row) for row in answers_per_question}
    if len(sizes) > 1:
        raise InputError(
            f"every question needs one answer per member, in the same member order; got rows of sizes {sorted(sizes)}"
        )
    members = sizes.pop() if sizes else (n_members or 0)
    if n_members is not None and members != n_members:
        raise InputError(f"expected answers from {n_members} members per question, got {members}")
    for q, row in enumerate(answers_per_question):
        if isinstance(row, str) or any(not isinstance(answer, str) for answer in row):
            raise InputError(f"question {q}: answers must be strings (use '' for a member that produced no answer)")
    return members


def _pair(metric: SimilarityMetric, a: str, b: str) -> tuple[str, str]:
    return (a, b) if not metric.symmetric or a <= b else (b, a)


def _scores(metric: SimilarityMetric, pairs: list[tuple[str, str]], cache: PairScoreCache | None) -> np.ndarray:
    known: dict[tuple[str, str], float] = {}
    store = cache if cache is not None and metric.cacheable else None
    if store is not None:
        known = store.get_many(metric.cache_key(), pairs)
    missing = [pair for pair in pairs if pair not in known]
    started = time.perf_counter()
    if missing:
        computed = np.asarray(metric.score_pairs(missing), dtype=float)
        if computed.shape != (len(missing),) or not np.all(np.isfinite(computed)):
            raise InputError(
                f"similarity metric {metric.name!r} returned {computed.shape} scores (finite values needed) "
                f"for {len(missing)} pairs"
            )
        computed = np.clip(computed, 0.0, 1.0)
        fresh = dict(zip(missing, computed.tolist(), strict=True))
        if store is not None:
            store.put_many(metric.cache_key(), fresh.items())
        known.update(fresh)
    log.info(
        "similarity %s: %d distinct pairs, %d from the cache, %d computed in %.1f s",
        metric.name,
        len(pairs),
        len(pairs) - len(missing),
        len(missing),
        time.perf_counter() - started,
    )
    return np.array([known[pair] for pair in pairs], dtype=float)


def similarity_tensor(
    answers_per_question: Sequence[Sequence[str]],
    metrics: Sequence[str | SimilarityMetric],
    cache: PairScoreCache | str | Path | None = None,
    metric_params: Mapping[str, Mapping[str, Any]] | None = None,
) -> np.ndarray:
    """sim_k(y_m, y_n) for every question, member pair and metric, shape (Q, M, M, K)."""
    n_members = check_answers(answers_per_question)
    built = build_metrics(metrics, metric_params)
    store = as_cache(cache)
    n_questions = len(answers_per_question)
    tensor = np.zeros((n_questions, n_members, n_members, len(built)))
    distinct = [list(dict.fromkeys(row)) for row in answers_per_question]
    member_index = [
        np.array([{answer: i for i, answer in enumerate(unique)}[a] for a in row], dtype=np.intp)
        for unique, row in zip(distinct, answers_per_question, strict=True)
    ]
    for k, metric in enumerate(built):
        positions: dict[tuple[str, str], int] = {}
        for unique in distinct:
            for i, a in enumerate(unique):
                for b in unique[i:] if metric.symmetric else unique:
                    positions.setdefault(_pair(metric, a, b), len(positions))
        pairs = list(positions)
        scores = _scores(metric, pairs, store)
        for q, unique in enumerate(distinct):
            size = len(unique)
            matrix = np.empty((size, size))
            for i, a in enumerate(unique):
                for j, b in enumerate(unique):
                    matrix[i, j] = scores[positions[_pair(metric, a, b)]]
            index = member_index[q]
            tensor[q, :, :, k] = matrix[np.ix_(index, index)]
    return tensor
