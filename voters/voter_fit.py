"""How a `Voter` gets its weights: explicit uniform ones, or a search by Nelder-Mead (the paper's step
objective of voters.nelder_mead, or the smooth surrogate of voters.smooth), as functions of the voter's
hyper-parameters (`FitSettings`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from eor.core.errors import ConfigError
from voters.nelder_mead import (
    Callback,
    SearchResult,
    VoteData,
    Weights,
    search_weights,
    uniform_member_weight,
    uniform_metric_weight,
)
from voters.pooling import POOLINGS
from voters.smooth import SmoothSettings, smooth_search
from voters.voter_params import SEARCH

log = logging.getLogger("voters.voter")


def uniform_weights(
    n_members: int, params: dict[str, Any], grounding_weight: float | None, only: int | None = None
) -> Weights:
    """Explicit uniform weights for a voter of `params` (its `get_params()`): every member ω^r =
    min(0.5, max_weight) (all active), every metric ω^s = 1/K (S_sim is the plain average of the metrics);
    with grounding, ω^g = `grounding_weight` (None: 1/K as well). `only`: Top R's weights instead, ω^r =
    max_weight for member `only` and 0 for every other member (the metric weights then never matter)."""
    pooling, members, n_metrics = params["pooling"], params["members"], len(params["metrics"])
    if pooling == SEARCH:
        raise ConfigError(f"a uniform voter needs a concrete pooling: {', '.join(POOLINGS)}")
    if not isinstance(n_members, int) or n_members < 1:
        raise ConfigError(f"n_members must be a positive integer, got {n_members!r}")
    if members is not None and len(members) != n_members:
        raise ConfigError(f"{len(members)} member names given for {n_members} members")
    grounding = None
    if params["grounding"]:
        grounding = float(grounding_weight) if grounding_weight is not None else 1.0 / n_metrics
    retriever = np.full(n_members, uniform_member_weight(params["max_weight"]))
    if only is not None:
        if not isinstance(only, int) or not 0 <= only < n_members:
            raise ConfigError(f"member must be an index in 0..{n_members - 1}, got {only!r}")
        retriever = np.zeros(n_members)
        retriever[only] = params["max_weight"]
    return Weights(
        np.full(n_metrics, uniform_metric_weight(n_metrics, params["max_weight"])), retriever, grounding, pooling
    )


@dataclass(frozen=True)
class FitSettings:
    """A `Voter`'s hyper-parameters that its weight search reads."""

    pooling: str
    threshold: float
    member_threshold: float
    max_weight: float
    restarts: int
    seed: int
    grounding: bool
    max_evals: int | None
    objective: str
    temperature: float
    penalty: float

    @classmethod
    def of(cls, params: dict[str, Any]) -> FitSettings:
        """The settings among a voter's `get_params()`."""
        return cls(**{item.name: params[item.name] for item in fields(cls)})


def search(
    settings: FitSettings, train: VoteData, dev: VoteData | None = None, callback: Callback | None = None
) -> SearchResult:
    """The weights that maximise the training objective: Nelder-Mead on the paper's step objective
    (voters.nelder_mead), or on the smooth surrogate polished on the step objective (voters.smooth); with
    pooling "search", the best over every pooling."""
    poolings = list(POOLINGS) if settings.pooling == SEARCH else [settings.pooling]
    n_weights = train.tensor.shape[3] + train.tensor.shape[1] + int(bool(settings.grounding))
    max_evals = settings.max_evals if settings.max_evals is not None else 40 * n_weights
    if settings.objective == "smooth":
        result = _smooth_search(settings, train, poolings, dev, max_evals)
    else:
        result = search_weights(
            train,
            poolings=poolings,
            threshold=float(settings.threshold),
            member_threshold=float(settings.member_threshold),
            max_weight=float(settings.max_weight),
            restarts=settings.restarts,
            seed=settings.seed,
            max_evals=max_evals,
            use_grounding=bool(settings.grounding),
            dev=dev,
            callback=callback,
        )
    log.debug(
        "voter fitted: train %.4f%s, pooling %s, %d active of %d members",
        result.train_score,
        "" if result.dev_score is None else f", dev {result.dev_score:.4f}",
        result.weights.pooling,
        int(np.sum(result.weights.retriever > settings.member_threshold)),
        len(result.weights.retriever),
    )
    return result


def _smooth_search(
    settings: FitSettings, train: VoteData, poolings: list[str], dev: VoteData | None, max_evals: int
) -> SearchResult:
    best: SearchResult | None = None
    for pooling in poolings:
        result = smooth_search(
            train,
            pooling=pooling,
            threshold=float(settings.threshold),
            member_threshold=float(settings.member_threshold),
            max_weight=float(settings.max_weight),
            max_evals=max_evals,
            use_grounding=bool(settings.grounding),
            settings=SmoothSettings(float(settings.temperature), float(settings.penalty)),
            dev=dev,
        )
        if best is None or result.train_score > best.train_score:
            best = result
    assert best is not None  # search: one pooling at least
    return best
