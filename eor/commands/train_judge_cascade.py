"""`eor train --voter cascade --judge JUDGE.json`: a cascade whose last step is the reader as judge
(eor.learning.judge_cascade), trained on run records whose questions the reader scored, written as a cascade
weights file that names its judge (`meta.last_step`: the judge's file and digest, the fit that answers).

The members' costs are the cascade's (`--cost`, `--rates`); the judge's is the replayed seconds of scoring each
question's recorded candidates as the config's `judge:` scores them live. `--config` is required: it gives the
members, what the judge scores (`judge.passages`), the reader whose chat tokens are counted and its chunking.
P(right) and one threshold for every answer, the steps' and the judge's (eor.learning.judge_cascade
`calibrate_judged`), are chosen out of fold; with `--ablated`/`--nocorpus` (a judge trained beyond the corpus
too) they hold for a mix of questions the corpus can and cannot answer; the cascade is the same.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.commands.train_options import TrainOptions
from eor.commands.train_report import REPORTED_RISKS, answered_by_kind, cascade_lines
from eor.core.config import EnsembleConfig, JudgeConfig
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import fixed, pct, significant, small_data_warning
from eor.evaluation.selective import summary
from eor.learning.beyond_corpus import ABLATED, ANSWERABLE, KINDS, NOCORPUS, mix_records
from eor.learning.calibration import Calibrated
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
from eor.learning.training import beyond_records
from eor.pipeline.abstention import DELTA, Stratum, sequence_end
from eor.pipeline.judging import scored_families
from eor.pipeline.members import demonstration_ids
from eor.pipeline.pool import pool_identity, runs_pool
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import MemberCosts, training_costs, with_replay
from eor.runs.run_data import RunData, load_runs, named_runs, read_runs, run_paths
from voters.cascade_points import LastStep
from voters.codecs import save_voter
from voters.judge_selector import JudgeSelector, JudgeVoter
from voters.judge_step import LAST_STEP
from voters.loading import load_voter

log = logging.getLogger(__name__)


def train_judge_cascade(records: Path | Sequence[Path], out: Path, judge: Path, options: TrainOptions) -> str:
    """Train the cascade ending with the judge voter of `judge` on `records` (several runs: read as one, their
    pools the same), save it as `out` and give back the report's lines."""
    config, voter = _pool_and_judge(options, judge)
    runs = run_paths(records)
    source = ", ".join(map(str, runs))
    data, ordered = _training_runs(runs, config)
    settings = options.vote_settings()
    arrays = vote_arrays(data, settings)
    costs = _token_costs(arrays, source)
    rates = costs.rates or {}
    questions = _judged(ordered, source, voter)
    scored = scored_families(_with_judge(config))
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
    found = _calibrated(data, arrays, questions, config, voter, fit, replace(settings, rates=rates), ending, options)
    stopped = found.stopped
    probability, right = found.judge_probability[found.ended], found.judge_right[found.ended]
    entry = {**last_step_meta(judge, fit, ending), "risk": risk_document(found.late)}
    meta: dict[str, Any] = {
        "records": named_runs(runs),
        **options.beyond_meta(),
        "chosen_voter": "cascade",
        "probability": stopped.model.to_dict(),
        LAST_STEP: entry,
        "costs": training_costs(costs, data.names),
        "pool": pool_identity(config, reader),
        "top_r_train": voter.metadata_.get("top_r_train"),
    }
    save_voter(cascade, out, **meta)
    lines = [
        f"cascade ending with the judge {judge} ({fit.label}): {data.questions} training questions; the judge's "
        f"scoring {fixed(entry['cost'], 2)} s per question it answers (replayed), its held-out EM "
        f"{pct(entry['held_out_em'])} on every question",
        *cascade_lines(cascade, "em", rates),
        *risk_lines(stopped, probability, right, entry["risk"]),
        *(beyond_lines(options.unanswerable_share, found) if options.beyond_corpus else []),
        f"weights written to {out}",
    ]
    return "\n".join(lines)


def _pool_and_judge(options: TrainOptions, judge: Path) -> tuple[EnsembleConfig, JudgeVoter]:
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


def _token_costs(arrays: VoteArrays, source: str) -> MemberCosts:
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


def risk_lines(stopped: Calibrated, probability: np.ndarray, right: np.ndarray, risk: dict[str, Any]) -> list[str]:
    """P(right)'s held-out calibration of the steps' answers (per feature set's fit) and of the judge's, then the
    thresholds at the reported error rates, said once: one for every answer, whichever gave it (`risk_document`)."""
    kinds = [
        (f"the steps' answers ({fit.name})", stopped.by_fit[fit.name], stopped.right)
        for fit in stopped.model.fits.values()
    ]
    kinds.append(("the judge's answers", probability, right))
    lines = []
    for kind, found, labels in kinds:
        known = ~np.isnan(found)
        figures = summary(found[known], labels[known])
        lines.append(
            f"P(right) of {kind}, held out on {int(known.sum())} training questions: ECE {fixed(figures['ece'], 3)}, "
            f"AURC {fixed(figures['aurc'], 3)} (a constant's {fixed(figures['aurc_constant'], 3)})"
        )
    levels = ", ".join(
        f"{significant(row['alpha'])}: "
        + ("none" if row["threshold"] is None else f"P ≥ {fixed(row['threshold'], 2)} ({pct(row['coverage'])}%)")
        for row in risk["judged"]
        if row["alpha"] in REPORTED_RISKS
    )
    lines.append(
        f"thresholds, one for every answer, the steps' and the judge's (learn then test, δ "
        f"{significant(risk['delta'])}): {levels}"
    )
    return lines


def _calibrated(
    data: RunData,
    arrays: VoteArrays,
    judged: list[JudgedQuestion],
    config: EnsembleConfig,
    voter: JudgeVoter,
    fit: JudgeSelector,
    settings: VoteSettings,
    ending: LastStep,
    options: TrainOptions,
) -> JudgedCalibration:
    """The cascade's P(right) and thresholds (eor.learning.judge_cascade.calibrate_judged) on the training
    questions (`data`, `arrays`, `judged`), with the questions the corpus cannot answer of `options` beside them
    where it names some: their members' answers and the judge's scores, judged as the judge voter's training
    judged them."""
    if not options.beyond_corpus:
        mix = mix_records(data, None, None)
        return calibrate_judged(arrays, mix, settings, ending, judged, fit, options.unanswerable_share, log.info)
    paths = {ABLATED: options.ablated, NOCORPUS: options.nocorpus}
    runs = {kind: None if path is None else beyond_records(path, data.names, config) for kind, path in paths.items()}
    mix = mix_records(data, runs[ABLATED], runs[NOCORPUS])
    questions = list(judged)
    for kind, path in paths.items():
        run = runs[kind]
        if path is not None and run is not None and run.questions:
            questions += _judged(_ordered(run_paths(path), run.ids), ", ".join(map(str, run_paths(path))), voter)
    arrays = vote_arrays(mix.data, settings, retrieval=True)
    return calibrate_judged(arrays, mix, settings, ending, questions, fit, options.unanswerable_share, log.info)


def beyond_lines(share: float, found: JudgedCalibration) -> list[str]:
    """Out of fold, at each reported error rate: the share of each kind of question the cascade answers (a step's
    answer whose P(right) reaches the threshold, or the judge's), how many of the answerable ones answered are the
    judge's, and the error among answered on the mix."""
    kind = found.stopped.kind
    right = np.where(found.ended, found.judge_right, found.stopped.right)
    lines = [
        f"beyond the corpus, out of fold: one threshold over the steps' and the judge's answers, for a mix "
        f"with a share {significant(share)} of questions the corpus cannot answer (δ {significant(DELTA)})"
    ]
    for alpha in REPORTED_RISKS:
        answered = _answered(found, alpha)
        covers = {name: float(answered[kind == name].mean()) for name in KINDS if (kind == name).any()}
        wrongs = {name: float((answered & ~right)[kind == name].mean()) for name in covers}
        among = answered & (kind == ANSWERABLE)
        shown = f"{answered_by_kind(answered, kind)} (the judge gives {int((among & found.ended).sum())} of the "
        shown += f"{int(among.sum())} answerable answered)"
        covered = (1 - share) * covers[ANSWERABLE] + share * covers.get(NOCORPUS, 0.0)
        mixed = ((1 - share) * wrongs[ANSWERABLE] + share * wrongs.get(NOCORPUS, 0.0)) / covered if covered else None
        error = "" if mixed is None else f"; error among answered on the mix {pct(mixed)}%"
        lines.append(f"  α {significant(alpha)}: answers {shown}{error}{_why_none(found, share, alpha)}")
    return lines


def _why_none(found: JudgedCalibration, share: float, alpha: float) -> str:
    """Where the mixed test for `alpha` stopped when it certified no threshold (eor.pipeline.abstention
    `sequence_end`): the λ, what it answered of each stratum, the p-value and the error certified there ("": a
    threshold, or no no-corpus rows)."""
    kind = found.stopped.kind
    if any(abs(float(row["alpha"]) - alpha) < 1e-9 and row["threshold"] is not None for row in found.late):
        return ""
    if not (kind == NOCORPUS).any():
        return ""
    probability = np.where(found.ended, found.judge_probability, found.stopped.probability)
    right = np.where(found.ended, found.judge_right, found.stopped.right)
    answerable = Stratum(probability[kind == ANSWERABLE], right[kind == ANSWERABLE])
    nocorpus = Stratum(probability[kind == NOCORPUS], right[kind == NOCORPUS])
    end = sequence_end(answerable, nocorpus, alpha, share)
    if end is None:
        return ""
    threshold, p_value, bound = end
    (n, wrong, answered_right), (m, wrong_nocorpus, _) = answerable.counts(threshold), nocorpus.counts(threshold)
    return (
        f"; no threshold: the test stops at P ≥ {significant(threshold)} ({wrong + answered_right} of {n} "
        f"answerable answered, {wrong} wrong; {wrong_nocorpus} of {m} no-corpus answered wrongly), p "
        f"{fixed(p_value, 3)} > δ {significant(DELTA)}, the error certified there {fixed(bound, 3)} > "
        f"{significant(alpha)}"
    )


def _answered(found: JudgedCalibration, alpha: float) -> np.ndarray:
    """Per row of the mix, whether the cascade answers it at `alpha` out of fold."""

    def threshold(rows: list[dict[str, Any]]) -> float:
        chosen = next((row["threshold"] for row in rows if abs(float(row["alpha"]) - alpha) < 1e-9), None)
        return math.inf if chosen is None else float(chosen)

    steps = {name: threshold(fit.thresholds) for name, fit in found.stopped.model.fits.items()}
    bar = np.array([steps.get(name, math.inf) for name in found.stopped.fits])
    early = ~found.ended & (np.nan_to_num(found.stopped.probability, nan=-1.0) >= bar)
    late = found.ended & (np.nan_to_num(found.judge_probability, nan=-1.0) >= threshold(found.late))
    return early | late


def _with_judge(config: EnsembleConfig) -> EnsembleConfig:
    """The config with its `judge:` section, or the defaults' scoring without passages alone when it has none."""
    return config if config.judge is not None else replace(config, judge=JudgeConfig(passages=False))


def _training_runs(runs: list[Path], config: EnsembleConfig) -> tuple[RunData, list[Any]]:
    """The runs read as one (their pool the same) for the pool config's members, less its worked examples (a
    warning when they are few), and their records in the same order."""
    runs_pool(runs)  # before any work: runs of different pools are refused
    data = load_runs(runs, config.members).without(demonstration_ids(config))
    if warning := small_data_warning(data.questions, "training a cascade"):
        log.warning(warning)
    return data, _ordered(runs, data.ids)


def _ordered(runs: list[Path], ids: list[str]) -> list[Any]:
    """The records of `ids` in `runs`, in that order (InputError naming a missing one)."""
    by_id = {record.id: record for record in read_runs(runs)}
    missing = [question for question in ids if question not in by_id]
    if missing:
        raise InputError(f"{', '.join(map(str, runs))}: no record for {len(missing)} question(s), e.g. {missing[0]}")
    return [by_id[question] for question in ids]


def _judged(ordered: list[Any], source: str, voter: JudgeVoter) -> list[Any]:
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
