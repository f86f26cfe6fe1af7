"""`eor bench --weights CASCADE.json --config C` for a cascade trained with the judge as its last step
(eor.learning.judge_cascade), replayed on records whose candidates the reader scored: each question's answer is
the step the cascade stops at, or the judge's choice (the fit for what the config's `judge:` scores) where it
runs every step; its reader seconds are the steps' members' (token counts at the cascade's training rates) and,
where the judge answers, the replayed scoring of its candidates at the same rates. Beside it: the judge on
every question, the oracles, Top R (train) and `against`, paired; P(right) (the cascade's steps', the
judge's fit where it answers) with its calibration and each error rate's abstention.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.answers import matches_gold
from eor.core.config import EnsembleConfig, JudgeConfig
from eor.core.errors import ConfigError, InputError
from eor.evaluation.bench.judge import baselines, judge_choices, selective
from eor.evaluation.bench.vote import vote
from eor.evaluation.stats import Bootstrap
from eor.evaluation.upper_bound import any_right, oracle_accuracy
from eor.learning.judge_cascade import reader_tokens, scoring_costs
from eor.pipeline.judging import scored_families
from eor.pipeline.stages.judged import judged_by
from eor.readers import build_reader
from eor.runs.costs import member_costs, with_replay
from eor.runs.records import read_records
from eor.runs.run_data import load_run
from voters.judge_selector import JudgeVoter
from voters.judge_step import ends_with_judge
from voters.loading import carried_judge
from voters.right import RightModel


def judge_cascade_report(
    records: str | Path,
    weights: str | Path,
    config: EnsembleConfig,
    *,
    against: str | Path | None = None,
    seed: int = 0,
    resamples: int = 1000,
) -> dict[str, Any]:
    """The report (JSON-ready) of the cascade of `weights` ending with the judge of `config`'s `judge:`."""
    settings = _check_door(config)
    data = load_run(records, config.members)
    voted = vote(data, weights, with_judge=True)
    cascade = voted.voter
    judge = _carried(cascade, weights, config)
    by_id = {record.id: record for record in read_records(records)}
    loaded = [by_id[question] for question in data.ids]
    if not all(record.answers for record in loaded):
        raise InputError(f"{records}: every question needs gold answers to benchmark on")
    judged = judge_choices(loaded, judge, records, scored_families(config))
    assert voted.stops is not None  # a cascade's replay
    ended = voted.stops == len(cascade.steps_) - 1
    answers = [data.answers[q][int(c)] for q, c in enumerate(voted.chosen)]
    early = np.array([matches_gold(answer, data.golds[q]) for q, answer in enumerate(answers)], bool)
    right = np.where(ended, judged.right, early)
    rates = (cascade.metadata_.get("costs") or {}).get("rates") or {}
    cost = _seconds(data, cascade, voted.stops, ended, [loaded[i] for i in np.flatnonzero(ended)], config, rates)
    draws = Bootstrap.draw(len(right), resamples, seed)
    members = _members_right(data, judge.members_)
    report: dict[str, Any] = {
        "kind": "judge-cascade",
        "records": str(records),
        "weights": str(weights),
        "judge_weights": str(settings.weights),
        "questions": len(loaded),
        "scored": sum(bool(q.features.scored) for q in judged.questions),
        "cascade": {
            "em": float(right.mean()),
            "ci": draws.interval(right.astype(float)),
            "cost": float(cost.mean()),
            "cost_p90": float(np.percentile(cost, 90)),
            "members_run": float((voted.stops + 1).mean()),
            "judged": float(ended.mean()),
            "rates": dict(rates),
        },
        "judge": {"em": float(judged.right.mean()), "ci": draws.interval(judged.right.astype(float))},
        "oracle": {
            "members": oracle_accuracy(members.T),
            "candidates": float(any_right([q.right for q in judged.questions]).mean()),
        },
        "fits_used": judged.used,
    }
    report.update(baselines(judge, records, loaded, right.astype(float), members, draws, against))
    report["selective"] = _selective(voted, ended, judged, right, seed)
    return report


def _check_door(config: EnsembleConfig) -> JudgeConfig:
    """The config's `judge:`; ConfigError unless it names a judge after a cascade, in a file that exists."""
    if config.judge is None or config.judge.weights is None or config.judge.after != "cascade":
        raise ConfigError(
            f"the config {config.name!r} (--config) names no judge after a cascade (judge: {{weights: ..., after: "
            "cascade}})"
        )
    if not config.resolve_path(config.judge.weights).is_file():
        raise ConfigError(f"judge.weights: no file {config.resolve_path(config.judge.weights)}")
    return config.judge


def _carried(cascade: Any, weights: str | Path, config: EnsembleConfig) -> JudgeVoter:
    """The judge of the config's `judge.weights` that the cascade of `weights` was trained to end with, carried by
    it (`judge_`) and checked against the config (eor.pipeline.stages.judged.judged_by)."""
    assert config.judge is not None and config.judge.weights is not None  # the report's door
    cascade.source_ = str(weights)
    cascade.judge_ = carried_judge(cascade, config.resolve_path(config.judge.weights))
    found = judged_by(config, cascade)
    assert found is not None  # it carries one
    return found[0]


def _members_right(data: Any, names: Sequence[str]) -> np.ndarray:
    """(Q, M): whether each member of `names` (in that order, as `baselines` reads them) answered right."""
    columns = [data.names.index(name) for name in names]
    right = [[matches_gold(row[c], data.golds[q]) for c in columns] for q, row in enumerate(data.answers)]
    return np.array(right, float)


def _seconds(
    data: Any, cascade: Any, stops: np.ndarray, ended: np.ndarray, judged: list[Any], config: Any, rates: dict
) -> np.ndarray:
    """Per question, the reader seconds at `rates`: the members of the steps run (token counts, each member
    replayed right after the one before it in the cascade's order: eor.runs.costs.PromptReplay), and where the
    judge answered (`judged`, those records in order) the replayed scoring of their candidates."""
    if not rates:
        raise InputError(f"{cascade.source_}: the cascade's file holds no token rates (meta.costs.rates) to replay at")
    tokens = reader_tokens(build_reader(config.reader), config)
    costs = with_replay(member_costs(data, "tokens", dict(rates)), data, tokens)
    assert costs.replay is not None  # with_replay's
    columns = [data.names.index(name) for name in cascade.members_]
    spent = cascade.spent(costs.replay.subset(columns), stops)  # each member after the one before it, in its order
    scored = scored_families(config)
    if judged and "scores" in scored:  # what live answering pays to score (nothing with judge.score false)
        spent[ended] += scoring_costs(judged, config, tokens.tokenize, rates, passages="passages" in scored)
    return spent


def _selective(voted: Any, ended: np.ndarray, judged: Any, right: np.ndarray, seed: int) -> dict[str, Any] | None:
    """The report's P(right) section (eor.evaluation.bench.judge.selective) with how many questions each fit scored."""
    probability, thresholds, used = _probability(voted, ended, judged)
    section = selective(probability, right, thresholds, seed)
    return None if section is None else {**section, "fits": used}


def _probability(voted: Any, ended: np.ndarray, judged: Any) -> tuple[np.ndarray, list[dict], dict[str, int]]:
    """Per question, P(right) and the abstention thresholds by error rate of what answered it: the cascade's
    P(right) of the answer its steps stopped at (voters.right, `meta.probability`, as the vote computed it with
    the fit for what the records hold) and that fit's thresholds, or the judge's fit's P and the thresholds
    chosen for the judge's share (`meta.last_step.risk.judged`); and how many questions each P(right) fit scored
    (`the judge` for its own)."""
    cascade = voted.voter
    model = RightModel.from_voter(cascade)
    risk = (ends_with_judge(cascade) or {}).get("risk") or {}
    if model is None or voted.probability is None or "judged" not in risk:
        raise InputError(
            f"{cascade.source_}: the cascade's file holds no P(right) of its steps' answers (meta.probability) or "
            "no thresholds of the judge's (meta.last_step.risk): train it again with this eor"
        )
    probability = np.where(ended, judged.probability, voted.probability)
    judge = {round(float(row["alpha"]), 6): row["threshold"] for row in risk["judged"]}
    fits = [str(name) for name in voted.fits[~ended]]
    own = {
        name: {round(float(row["alpha"]), 6): row["threshold"] for row in model.fit(name).thresholds}
        for name in set(fits)
    }
    thresholds = [judge if ended[q] else own[str(voted.fits[q])] for q in range(len(ended))]
    used = {name: fits.count(name) for name in sorted(own)} | {"the judge": int(ended.sum())}
    return probability, thresholds, used
