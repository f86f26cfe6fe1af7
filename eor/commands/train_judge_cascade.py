"""`eor train --voter cascade --judge JUDGE.json`: a cascade whose last step is the reader as judge
(eor.learning.judge_cascade), trained on run records whose questions the reader scored, written as a cascade
weights file that names its judge (`meta.last_step`: the judge's file and digest, the fit that answers).

The members' costs are the cascade's (`--cost`, `--rates`); the judge's is the replayed seconds of scoring each
question's recorded candidates as the config's `judge:` scores them live. `--config` is required: it gives the
members, what the judge scores (`judge.passages`), the reader whose chat tokens are counted and its chunking.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.commands.train_options import TrainOptions
from eor.commands.train_report import cascade_lines
from eor.core.config import EnsembleConfig, JudgeConfig
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import fixed, pct, significant, small_data_warning
from eor.evaluation.selective import summary
from eor.learning.calibration import Calibrated, stopped_calibration
from eor.learning.crossval import build_candidate, vote_arrays
from eor.learning.judge_cascade import chat_tokenizer, last_step, last_step_meta, scoring_costs
from eor.learning.judge_training import candidate_rule, judged_questions
from eor.pipeline.abstention import DELTA, thresholds
from eor.pipeline.judging import LAST_STEP, scored_families
from eor.pipeline.members import demonstration_ids
from eor.pipeline.pool import pool_identity
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import training_costs
from eor.runs.records import read_records
from eor.runs.run_data import load_run
from voters.judge_selector import JudgeVoter

log = logging.getLogger(__name__)


def train_judge_cascade(records: Path, out: Path, judge: Path, options: TrainOptions) -> str:
    """Train the cascade ending with the judge voter of `judge` on `records`, save it as `out` and give back the
    report's lines."""
    config, voter = _pool_and_judge(options, judge)
    data = load_run(records, config.members).without(demonstration_ids(config))
    if warning := small_data_warning(data.questions, "training a cascade"):
        log.warning(warning)
    settings = options.vote_settings()
    arrays = vote_arrays(data, settings)
    rates = None if arrays.costs is None else arrays.costs.rates
    if arrays.costs is None or arrays.costs.unit != "tokens" or not rates:
        raise InputError(f"{records}: the judge's scoring is priced in reader seconds from token counts, and so are "
                         "the members' here: records with token counts, --cost tokens or auto")  # fmt: skip
    questions = _judged(records, data.ids, voter)
    scored = scored_families(_with_judge(config))
    fit = voter.fit_scoring(scored)
    reader = build_reader(config.reader)
    cascade = build_candidate("cascade", settings).template(arrays)
    cascade.stop_on = "right"  # a step stops when its leader is likely right; else the judge weighs the candidates
    log.info("the judge's held-out choices on %d training questions (%s)", len(questions), fit.label)
    ordered = _ordered(records, data.ids)
    cost = (  # what live answering pays: scores under the members' prompts, and the passages alone if it scores them
        scoring_costs(ordered, config, chat_tokenizer(reader), rates, passages="passages" in scored)
        if "scores" in scored
        else np.zeros(len(ordered))
    )
    ending = last_step(questions, fit, cost, folds=cascade.folds, seed=cascade.seed)
    log.info("the cascade's order, steps and threshold, held out with the judge as its last step")
    cascade.fit(arrays.take(np.arange(arrays.questions)), last=ending)
    cascade.train_score_ = cascade.chosen_point_.accuracy  # held out (a replay would not count the judge)
    log.info("P(right) of the steps' answers, out of fold with the judge as the last step")
    stopped = stopped_calibration(arrays, settings, ending)
    probability, right, ended = answered_held_out(cascade)
    entry = {**last_step_meta(judge, fit, ending), "risk": risk_document(probability[ended], right[ended])}
    meta: dict[str, Any] = {
        "records": str(records),
        "chosen_voter": "cascade",
        "probability": stopped.model.to_dict(),
        LAST_STEP: entry,
        "costs": training_costs(arrays.costs, data.names),
        "pool": pool_identity(config, reader),
        "top_r_train": voter.metadata_.get("top_r_train"),
    }
    cascade.save(out, **meta)
    lines = [
        f"cascade ending with the judge {judge} ({fit.label}): {data.questions} training questions; the judge's "
        f"scoring {fixed(entry['cost'], 2)} s per question it answers (replayed), its held-out EM "
        f"{pct(entry['held_out_em'])} on every question",
        *cascade_lines(cascade, "em", rates),
        *risk_lines(stopped, probability[ended], right[ended], entry["risk"]),
        f"weights written to {out}",
    ]
    return "\n".join(lines)


def _pool_and_judge(options: TrainOptions, judge: Path) -> tuple[EnsembleConfig, JudgeVoter]:
    """The pool's config (validated) and the judge voter, checked to suit each other and the options
    (ConfigError naming what does not)."""
    if options.voter != "cascade":
        raise ConfigError(f"--judge trains a cascade whose last step is the judge: use it with --voter cascade, "
                          f"not --voter {options.voter}")  # fmt: skip
    if options.pool_config is None:
        raise ConfigError("--judge needs --config: the pool, what its judge scores and the reader whose tokens count")
    config = load_valid_config(options.pool_config)  # the door
    voter = JudgeVoter.load(judge)
    if sorted(voter.members) != sorted(config.members):
        raise ConfigError(f"the judge {judge} weighs {', '.join(voter.members)}; {options.pool_config} has "
                          f"{', '.join(config.members)}")  # fmt: skip
    return config, voter


def answered_held_out(cascade: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At the cascade's chosen threshold, on the first repeat's held-out folds: each training question's
    P(right) of its answer (the stopping step's calibration, or the judge's), whether it was right, and whether
    the judge answered it (no step stopped)."""
    held = cascade.held_out_
    index = [point.threshold for point in held.points].index(cascade.threshold_)
    ended = held.steps[index, 0] == len(cascade.steps_)
    return held.probability[index, 0], held.right[index, 0], ended


def risk_document(probability: np.ndarray, right: np.ndarray) -> dict[str, Any]:
    """The abstention thresholds (eor.pipeline.abstention, learn then test) of the judge's answers, chosen on its
    held-out answers on the questions the cascade runs to its end (a harder lot than all questions, which its
    own fit's thresholds were chosen on), at δ/2: with the steps' answers' thresholds at the other δ/2
    (`meta.probability`, eor.learning.calibration.stopped_calibration), both kinds' guarantees hold at once
    with probability 1 − δ (a union bound), and then so does their union's."""
    judged = [t.to_dict() for t in thresholds(probability, right, delta=DELTA / 2)]
    return {"procedure": "learn-then-test", "delta": DELTA / 2, "correctness": "em", "judged": judged}


def risk_lines(stopped: Calibrated, probability: np.ndarray, right: np.ndarray, risk: dict[str, Any]) -> list[str]:
    """P(right)'s held-out calibration and thresholds at the reported error rates: of the steps' answers (per
    feature set's fit) and of the judge's."""
    lines = []
    kinds = [(f"the steps' answers ({fit.name})", stopped.by_fit[fit.name], stopped.right, fit.thresholds)
             for fit in stopped.model.fits.values()]  # fmt: skip
    kinds.append(("the judge's answers", probability, right, risk["judged"]))
    for kind, found, labels, chosen in kinds:
        known = ~np.isnan(found)
        figures = summary(found[known], labels[known])
        levels = ", ".join(
            f"{significant(row['alpha'])}: "
            + ("none" if row["threshold"] is None else f"P ≥ {fixed(row['threshold'], 2)} ({pct(row['coverage'])}%)")
            for row in chosen if row["alpha"] in (0.1, 0.2, 0.3, 0.4)
        )  # fmt: skip
        lines.append(
            f"P(right) of {kind}, held out on {int(known.sum())} training questions: ECE {fixed(figures['ece'], 3)}, "
            "AURC "
            f"{fixed(figures['aurc'], 3)} (a constant's {fixed(figures['aurc_constant'], 3)}); thresholds (learn "
            "then test, "
            f"δ {significant(DELTA / 2)}): {levels}"
        )
    return lines


def _with_judge(config: EnsembleConfig) -> EnsembleConfig:
    """The config with its `judge:` section, or the defaults' scoring without passages alone when it has none."""
    return config if config.judge is not None else replace(config, judge=JudgeConfig(passages=False))


def _ordered(records: Path, ids: list[str]) -> list[Any]:
    """The records of `ids`, in that order (InputError naming a missing one)."""
    by_id = {record.id: record for record in read_records(records)}
    missing = [question for question in ids if question not in by_id]
    if missing:
        raise InputError(f"{records}: no record for {len(missing)} question(s), e.g. {missing[0]}")
    return [by_id[question] for question in ids]


def _judged(records: Path, ids: list[str], voter: JudgeVoter) -> list[Any]:
    """The judged questions (eor.learning.judge_training) of `ids`, in that order, candidates made as the judge
    voter's training made them (refused otherwise); every one must hold the reader's scores."""
    ordered = _ordered(records, ids)
    unscored = [record.id for record in ordered if record.judge is None]
    if unscored:
        raise InputError(f"{records}: {len(unscored)} question(s) hold no scores of the judge, e.g. {unscored[0]} "
                         "(eor run with a judge: section grows them)")  # fmt: skip
    questions = judged_questions(ordered, voter.members, *candidate_rule(voter, ordered, records))
    if len(questions) != len(ids):
        raise InputError(f"{records}: every training question needs gold answers")
    return questions
