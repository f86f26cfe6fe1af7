"""Training a cascade whose last step is the reader as judge (`eor train --voter cascade --judge JUDGE.json`,
`train_judged_cascade`): the judge voter of JUDGE.json checked against the pool's config, the judge's held-out
choices and scoring cost on the training records (eor.learning.judge_cascade `last_step`), the cascade's order,
steps and threshold fitted with the judge as its last step, then P(right) and one threshold for every answer, the
steps' and the judge's (`calibrate_judged`), with the questions the corpus cannot answer beside the training ones
where they are given; and what its weights file records (`meta.last_step`: the judge's file and digest, the fit
that answers).

The members' costs are the cascade's (`--cost`, `--rates`); the judge's is the replayed seconds of scoring each
question's recorded candidates as the config's `judge:` scores them live. The config gives the members, what the
judge scores (`judge.passages`), the reader whose chat tokens are counted and its chunking.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import EnsembleConfig, JudgeConfig
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import small_data_warning
from eor.learning.beyond_corpus import ABLATED, NOCORPUS, mix_records
from eor.learning.crossval import VoteArrays, VoteSettings, build_candidate, vote_arrays
from eor.learning.judge_cascade import (
    JudgedCalibration,
    calibrate_judged,
    chat_tokenizer,
    last_step,
    last_step_meta,
    reader_tokens,
    scoring_costs,
)
from eor.learning.judge_training import JudgedQuestion, candidate_rule, judged_questions
from eor.learning.train_options import TrainOptions
from eor.learning.trained import Trained
from eor.learning.training import beyond_records
from eor.pipeline.abstention import DELTA
from eor.pipeline.judging import scored_families
from eor.pipeline.members import demonstration_ids
from eor.pipeline.pool import pool_identity, runs_pool
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import MemberCosts, training_costs, with_replay
from eor.runs.run_data import RunData, load_runs, named_runs, read_runs, run_paths
from voters.cascade_points import LastStep
from voters.judge_selector import JudgeSelector, JudgeVoter
from voters.judge_step import LAST_STEP
from voters.loading import load_voter

log = logging.getLogger(__name__)


@dataclass
class TrainedJudgedCascade(Trained):
    """What `train_judged_cascade` gives back: the cascade and its weights file's meta, the judge's fit that answers
    its last step (`fit`), what the file says of that step (`entry`: its cost, held-out EM, risk thresholds), its
    P(right) and thresholds out of fold (`found`), the reader's rates, and the number of training questions."""

    fit: JudgeSelector
    entry: dict[str, Any]
    found: JudgedCalibration
    rates: dict[str, float]
    questions: int


def train_judged_cascade(records: Path | Sequence[Path], judge: Path, options: TrainOptions) -> TrainedJudgedCascade:
    """The cascade ending with the judge voter of `judge`, trained on `records` (several runs: read as one, their
    pools the same), with what its weights file records."""
    config, voter = pool_and_judge(options, judge)
    runs = run_paths(records)
    source = ", ".join(map(str, runs))
    data, ordered = training_runs(runs, config)
    settings = options.vote_settings()
    arrays = vote_arrays(data, settings)
    costs = token_costs(arrays, source)
    rates = costs.rates or {}
    questions = judged(ordered, source, voter)
    scored = scored_families(with_judge(config))
    fit = voter.fit_scoring(scored)
    reader = build_reader(config.reader)
    if options.cost_order == "cascade":  # each member charged right after the one before it (eor.runs.costs)
        costs = with_replay(costs, data, reader_tokens(reader, config))
        arrays = replace(arrays, costs=costs)
    cascade = build_candidate("cascade", settings).template(arrays)
    cascade.stop_on = "right"  # a step stops when its leader is likely right; else the judge weighs the candidates
    log.info("the judge's held-out choices on %d training questions (%s)", len(questions), fit.label)
    cost = (  # what live answering pays: scores under the members' prompts, and the passages alone if it scores them
        scoring_costs(ordered, config, chat_tokenizer(reader), rates, passages="passages" in scored)
        if "scores" in scored
        else np.zeros(len(ordered))
    )
    ending = last_step(questions, fit, cost, folds=cascade.folds, seed=cascade.seed)
    log.info("the cascade's order, steps and threshold, held out with the judge as its last step")
    cascade.fit(arrays.take(np.arange(arrays.questions)), last=ending)
    cascade.train_score_ = cascade.chosen_point_.accuracy  # held out (a replay would not count the judge)
    kinds = ", every kind of question" if options.beyond_corpus else ""
    log.info("P(right) of the steps' and the judge's answers, out of fold%s", kinds)
    found = calibrated(data, arrays, questions, config, voter, fit, replace(settings, rates=rates), ending, options)
    entry = {**last_step_meta(judge, fit, ending), "risk": risk_document(found.late)}
    meta: dict[str, Any] = {
        "records": named_runs(runs),
        **options.beyond_meta(),
        "chosen_voter": "cascade",
        "probability": found.stopped.model.to_dict(),
        LAST_STEP: entry,
        "costs": training_costs(costs, data.names),
        "pool": pool_identity(config, reader),
        "top_r_train": voter.metadata_.get("top_r_train"),
    }
    return TrainedJudgedCascade(cascade, meta, fit, entry, found, rates, data.questions)


def pool_and_judge(options: TrainOptions, judge: Path) -> tuple[EnsembleConfig, JudgeVoter]:
    """The pool's config (validated) and the judge voter, checked to suit each other and the options
    (ConfigError naming what does not; InputError for a judge trained on answerable questions alone, beyond the
    corpus)."""
    if options.voter != "cascade":
        raise ConfigError(
            f"--judge trains a cascade whose last step is the judge: use it with --voter cascade, "
            f"not --voter {options.voter}"
        )
    if options.pool_config is None:
        raise ConfigError("--judge needs --config: the pool, what its judge scores and the reader whose tokens count")
    config = load_valid_config(options.pool_config)  # the door
    voter = load_voter(judge, kind="judge")
    if sorted(voter.members_) != sorted(config.members):
        raise ConfigError(
            f"the judge {judge} weighs {', '.join(voter.members_)}; {options.pool_config} has "
            f"{', '.join(config.members)}"
        )
    if options.beyond_corpus and not all(fit.unanswerable_ for fit in voter.fits_):
        raise InputError(
            f"the judge {judge} was trained on answerable questions alone: train it with --ablated or "
            "--nocorpus too, for a cascade ending with it beyond the corpus"
        )
    return config, voter


def token_costs(arrays: VoteArrays, source: str) -> MemberCosts:
    """The members' costs, checked to be reader seconds from token counts at known rates, as the judge's scoring
    is priced (InputError otherwise)."""
    costs = arrays.costs
    if costs is None or costs.unit != "tokens" or not costs.rates:
        raise InputError(
            f"{source}: the judge's scoring is priced in reader seconds from token counts, and so are "
            "the members' here: records with token counts, --cost tokens or auto"
        )
    return costs


def risk_document(chosen: list[dict[str, Any]]) -> dict[str, Any]:
    """The abstention thresholds (eor.pipeline.abstention, learn then test, at δ) of every answer of the cascade,
    the steps' and the judge's alike (eor.learning.judge_cascade.joint_thresholds; each of the steps' fits in
    `meta.probability` holds the same), under `judged` as the judge's step reads them."""
    return {"procedure": "learn-then-test", "delta": DELTA, "correctness": "em", "judged": chosen}


def calibrated(
    data: RunData,
    arrays: VoteArrays,
    questions: list[JudgedQuestion],
    config: EnsembleConfig,
    voter: JudgeVoter,
    fit: JudgeSelector,
    settings: VoteSettings,
    ending: LastStep,
    options: TrainOptions,
) -> JudgedCalibration:
    """The cascade's P(right) and thresholds (eor.learning.judge_cascade.calibrate_judged) on the training
    questions (`data`, `arrays`, `questions`), with the questions the corpus cannot answer of `options` beside them
    where it names some: their members' answers and the judge's scores, judged as the judge voter's training
    judged them."""
    if not options.beyond_corpus:
        mix = mix_records(data, None, None)
        return calibrate_judged(arrays, mix, settings, ending, questions, fit, options.unanswerable_share, log.info)
    paths = {ABLATED: options.ablated, NOCORPUS: options.nocorpus}
    runs = {kind: None if path is None else beyond_records(path, data.names, config) for kind, path in paths.items()}
    mix = mix_records(data, runs[ABLATED], runs[NOCORPUS])
    every = list(questions)
    for kind, path in paths.items():
        run = runs[kind]
        if path is not None and run is not None and run.questions:
            every += judged(ordered_records(run_paths(path), run.ids), ", ".join(map(str, run_paths(path))), voter)
    arrays = vote_arrays(mix.data, settings, retrieval=True)
    return calibrate_judged(arrays, mix, settings, ending, every, fit, options.unanswerable_share, log.info)


def with_judge(config: EnsembleConfig) -> EnsembleConfig:
    """The config with its `judge:` section, or the defaults' scoring without passages alone when it has none."""
    return config if config.judge is not None else replace(config, judge=JudgeConfig(passages=False))


def training_runs(runs: list[Path], config: EnsembleConfig) -> tuple[RunData, list[Any]]:
    """The runs read as one (their pool the same) for the pool config's members, less its worked examples (a
    warning when they are few), and their records in the same order."""
    runs_pool(runs)  # before any work: runs of different pools are refused
    data = load_runs(runs, config.members).without(demonstration_ids(config))
    if warning := small_data_warning(data.questions, "training a cascade"):
        log.warning(warning)
    return data, ordered_records(runs, data.ids)


def ordered_records(runs: list[Path], ids: list[str]) -> list[Any]:
    """The records of `ids` in `runs`, in that order (InputError naming a missing one)."""
    by_id = {record.id: record for record in read_runs(runs)}
    missing = [question for question in ids if question not in by_id]
    if missing:
        raise InputError(f"{', '.join(map(str, runs))}: no record for {len(missing)} question(s), e.g. {missing[0]}")
    return [by_id[question] for question in ids]


def judged(ordered: list[Any], source: str, voter: JudgeVoter) -> list[Any]:
    """The judged questions (eor.learning.judge_training) of the records `ordered` (of `source`), in that order,
    candidates made as the judge voter's training made them (refused otherwise); every one must hold the reader's
    scores."""
    unscored = [record.id for record in ordered if record.judge is None]
    if unscored:
        raise InputError(
            f"{source}: {len(unscored)} question(s) hold no scores of the judge, e.g. {unscored[0]} "
            "(eor run with a judge: section grows them)"
        )
    rule, k = candidate_rule(voter, ordered, source)
    questions = judged_questions(ordered, voter.members_, rule, k, relevance=voter.reads_retrieval)
    if len(questions) != len(ordered):
        raise InputError(f"{source}: every training question needs gold answers")
    return questions
