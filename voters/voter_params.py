"""The hyper-parameters of the paper's `Voter`: scikit-learn's constraints (`CONSTRAINTS`, checked by the
estimator's `_validate_params`) and the checks that depend on eor's registries or on several parameters
at once (`check_voter_params`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

from sklearn.utils._param_validation import Interval, StrOptions

from eor.core.correctness import CORRECTNESS
from eor.core.errors import ConfigError
from voters.pooling import POOLINGS
from voters.similarity import available_metrics

SEARCH = "search"  # pooling: choose the best one while fitting
OBJECTIVES = ("step", "smooth")

#: scikit-learn's validation of the hyper-parameters; check_voter_params adds what depends on the registries
CONSTRAINTS: dict[str, list[Any]] = {
    "metrics": ["array-like"],
    "pooling": [str],
    "threshold": [Interval(Real, None, None, closed="neither")],
    "member_threshold": [Interval(Real, 0, None, closed="left")],
    "max_weight": [Interval(Real, 0, None, closed="neither")],
    "restarts": [Interval(Integral, 0, None, closed="left")],
    "seed": [Integral],
    "correctness": [str],
    "grounding": ["boolean"],
    "max_evals": [Interval(Integral, 1, None, closed="left"), None],
    "metric_params": [Mapping, None],
    "cache_dir": [str, os.PathLike, None],
    "members": ["array-like", None],
    "objective": [StrOptions(set(OBJECTIVES))],
    "temperature": [Interval(Real, 0, None, closed="neither")],
    "penalty": [Interval(Real, 0, None, closed="left")],
}


def check_voter_params(voter: Any) -> None:
    """ConfigError unless the voter's metrics, pooling and correctness are registered, its metric_params
    name its metrics, member_threshold < max_weight, and its member names are distinct strings."""
    metrics = voter.metrics
    check_metric_names(metrics)
    check_pooling_name(voter.pooling)
    check_correctness_name(voter.correctness)
    if voter.max_weight <= voter.member_threshold:
        raise ConfigError(
            f"need 0 ≤ member_threshold < max_weight, got member_threshold={voter.member_threshold}, "
            f"max_weight={voter.max_weight}"
        )
    stray = sorted(set(voter.metric_params or {}) - set(metrics))
    if stray:
        raise ConfigError(f"metric_params for metric(s) not in metrics: {', '.join(stray)}")
    if voter.members is not None:
        names = list(voter.members)
        if any(not isinstance(name, str) for name in names) or len(set(names)) != len(names):
            raise ConfigError("members must be distinct member names (strings)")


def check_metric_names(metrics: Any) -> None:
    """ConfigError unless `metrics` is a non-empty list of registered similarity metrics, none named twice;
    the message lists the registered ones. Every voter, a config's `voter.metrics` and `eor train --metrics`
    are checked here."""
    known = available_metrics()
    if isinstance(metrics, str) or not metrics or any(not isinstance(name, str) for name in metrics):
        raise ConfigError(f"metrics must be a non-empty list of metric names; available: {', '.join(known)}")
    unknown = [name for name in metrics if name not in known]
    if unknown:
        raise ConfigError(f"unknown similarity metric(s) {', '.join(unknown)}; available: {', '.join(known)}")
    if len(set(metrics)) != len(metrics):
        raise ConfigError(f"metrics must not repeat a name: {list(metrics)}")


def check_pooling_name(pooling: str, *, search: bool = True) -> None:
    """ConfigError unless `pooling` is a registered pooling or, where `search` is allowed (a voter to fit),
    `search`: the fit's choice among them. The message lists the valid names."""
    valid = [*POOLINGS, SEARCH] if search else list(POOLINGS)
    if pooling not in valid:
        raise ConfigError(f"unknown pooling {pooling!r}; available: {', '.join(valid)}")


def check_correctness_name(name: str) -> None:
    """ConfigError unless `name` is a registered correctness metric (eor.core.correctness), listing them."""
    if name not in CORRECTNESS:
        raise ConfigError(f"unknown correctness metric {name!r}; available: {', '.join(CORRECTNESS)}")
