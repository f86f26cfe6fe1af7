"""What `eor train` is asked, `TrainOptions` (one field per flag), and the check of every choice before any
record is read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError
from eor.learning.crossval import AUTO, DEFAULT_FOLDS, VoteSettings, candidate_names
from eor.pipeline.abstention import DEFAULT_SHARE
from eor.pipeline.validation import located
from eor.runs.run_data import named_runs, run_paths
from voters.voter_params import check_correctness_name, check_metric_names, check_pooling_name


@dataclass(frozen=True)
class TrainOptions:
    """What `eor train` trains, and how (one field per flag).

    voter: a candidate of eor.learning.crossval, or `auto`: chosen by cross-validation (`inner_folds` folds) on the
    training records, never below Top R; `grounding` turns paper and smooth into their grounding versions.
    metric: the correctness objective; metrics (with metric_params) and pooling (or `search`): the vote's;
    restarts: Nelder-Mead's seeded starts; seed: theirs and the folds'. cv: first report every candidate's
    K-fold figures against Top R (`auto` nested). max_loss (EM points, e.g. 0.5) or budget (cost per
    question, seconds) make the choice cost-aware: the cascade's tolerance, and `auto`'s choice among every
    candidate, the cascade included (the cheapest within max_loss of the best, or the best within the
    budget); cost_unit: what a member's cost is (eor.runs.costs), rates: the reader's tokens per second for
    token costs (None: fitted to the records' seconds); costs: the members' costs per question (an
    eor.runs.costs.MemberCosts over the members) in place of those the records give; cost_order: "cascade" (a
    cascade is charged as it runs its members, each after the one before it: eor.runs.costs.with_replay, where
    pool_config's reader counts its tokens) or "recorded" (as `eor run` ran them). pool_config: the config the
    records were run with, checked as every config is (eor.pipeline.validation): the weights file records the
    identity of its pool (eor.pipeline.pool; without it, the `pool.json` that `eor run` wrote beside the records),
    and its members are those trained on unless `members` names others (default: all the records hold). pool:
    pool_config's file already loaded past a door (`eor design`'s pool.yaml, the chosen members of the config
    it validated), not validated again.
    confidence: the selector's features may include the reader's confidence where the records hold it
    (voters.features); for the selector, the cascade and `auto` they are kept only when a cross-validation
    of the selector with and without them (`inner_folds`, the same folds) says they help
    (`meta.confidence_features`). dev: held-out records, scored for the report. ablated (several runs: read as
    one), nocorpus: records of questions the corpus cannot answer (ablated copies of the training questions; real
    ones), for a P(right) fitted
    with them and thresholds for a mix with `unanswerable_share` of them (eor.learning.beyond_corpus).
    """

    voter: str = AUTO
    metric: str = "em"
    metrics: tuple[str, ...] = ("em", "f1", "cosine")
    metric_params: dict[str, dict[str, Any]] | None = None
    pooling: str = "mean"
    grounding: bool = False
    restarts: int = 4
    seed: int = 0
    cv: int | None = None
    inner_folds: int = DEFAULT_FOLDS
    max_loss: float | None = None
    budget: float | None = None
    cost_unit: str = "auto"
    rates: dict[str, float] | None = None
    costs: Any = None
    cost_order: str = "cascade"
    pool_config: Path | None = None
    pool: EnsembleConfig | None = None
    members: list[str] | None = None
    confidence: bool = True
    dev: Path | None = None
    ablated: Path | tuple[Path, ...] | None = None
    nocorpus: Path | None = None
    unanswerable_share: float = DEFAULT_SHARE

    @property
    def beyond_corpus(self) -> bool:
        """Whether P(right) is fitted with questions the corpus cannot answer."""
        return self.ablated is not None or self.nocorpus is not None

    def beyond_meta(self) -> dict[str, Any]:
        """The records of questions the corpus cannot answer that P(right) was fitted with, as the file keeps them."""
        if not self.beyond_corpus:
            return {}
        return {
            "ablated_records": self.ablated and named_runs(run_paths(self.ablated)),
            "nocorpus_records": self.nocorpus and str(self.nocorpus),
        }

    def checked_voter(self) -> str:
        """The candidate to train (`grounding` applied), every choice checked first: a ConfigError naming the
        flag, before any record is read or similarity computed."""
        names = candidate_names()
        if self.voter not in (*names, AUTO):
            raise ConfigError(f"unknown voter {self.voter!r}; available: {', '.join([AUTO, *names])}")
        if self.grounding and self.voter not in ("paper", "smooth", "grounding", "smooth-grounding"):
            raise ConfigError("--grounding applies to --voter paper or smooth (auto tries grounding itself)")
        if self.max_loss is not None and self.budget is not None:
            raise ConfigError("give --max-loss or --budget, not both")
        if self.rates is not None and self.cost_unit == "seconds":
            raise ConfigError("--rates prices token counts; it does not apply to --cost seconds")
        for flag, value in (("--max-loss", self.max_loss), ("--budget", self.budget)):
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{flag} must be a number ≥ 0, got {value!r}")
        with located("--metric"):
            check_correctness_name(self.metric)
        with located("--metrics"):
            check_metric_names(self.metrics)
        with located("--pooling"):
            check_pooling_name(self.pooling)
        grounded = {"paper": "grounding", "smooth": "smooth-grounding"}
        return grounded.get(self.voter, self.voter) if self.grounding else self.voter

    def vote_settings(self) -> VoteSettings:
        """What every candidate shares (eor.learning.crossval), `max_loss` turned from EM points into a fraction."""
        return VoteSettings(
            metrics=tuple(self.metrics),
            metric_params=self.metric_params or None,
            pooling=self.pooling,
            correctness=self.metric,
            restarts=self.restarts,
            seed=self.seed,
            max_loss=None if self.max_loss is None else self.max_loss / 100,
            budget=self.budget,
            cost_unit=self.cost_unit,
            rates=self.rates,
            confidence=self.confidence,
        )
