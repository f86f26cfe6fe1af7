"""Checks of a config against the registries that load no model, so a mistake fails at once with one line
naming the valid choices: the members' sources (`check_member_names`), the voter section (`check_voter_config`),
and what an answer is asked with (`check_timeout`, `check_config_risk`). The ensemble, `eor serve` and the
commands call them before anything heavy loads.
"""

from __future__ import annotations

import math
from typing import Any

from eor.config import EnsembleConfig
from eor.errors import ConfigError, InputError, RetrieverError
from retrievers import notation
from retrievers.registry import source_names
from voters.pooling import POOLINGS
from voters.similarity import available_metrics


def check_member_names(config: EnsembleConfig) -> None:
    """Every member names only known sources (RetrieverError otherwise)."""

    known = source_names(config.sources)
    for member in config.members:
        unknown = sorted(notation.sources(notation.parse(member)) - known)
        if unknown:
            raise RetrieverError(
                f"member {member!r}: unknown source(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}"
            )


def check_voter_config(config: EnsembleConfig) -> None:
    """The config's `voter:` names only registered metrics and poolings (ConfigError listing the valid ones)."""

    voter = config.voter
    known = available_metrics()
    unknown = [name for name in voter.metrics if name not in known]
    if unknown:
        raise ConfigError(f"voter.metrics: unknown metric(s) {', '.join(unknown)}; available: {', '.join(known)}")
    if voter.pooling not in POOLINGS:
        raise ConfigError(f"voter.pooling: unknown pooling {voter.pooling!r}; available: {', '.join(POOLINGS)}")
    voter.resolved_metric_params()  # metric_params may name only metrics in voter.metrics


def check_config_risk(voting: Any, risk: float | None) -> None:
    """The config's `voter.risk` needs the voter's thresholds (`voting`: the ensemble's VoteStage): a
    ConfigError at start, not at the first answer."""
    try:
        voting.check_risk(risk)
    except InputError as exc:
        raise ConfigError(f"voter.risk: {exc}") from None


def check_timeout(value: float | None) -> float | None:
    """A member timeout: a positive number of seconds, or None (InputError otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InputError(f"member_timeout must be a positive number of seconds or None, got {value!r}")
    return float(value)
