"""A cascade whose last step is the reader as judge: the members run in the cascade's order and a step whose
P(right) reaches the threshold answers, as in voters.cascade; a question that no step stops has every member's
answer, and instead of the last step's selector the reader scores its candidates under the members' prompts
(the prompts it has just evaluated: eor.pipeline.judging) and the judge voter (voters.judge_selector) chooses
among them. The scoring is paid only on the questions the cascade runs to its end.

Everything is learned on the training records alone, by the cascade's own procedure (voters.cascade_fit): the
order and each step's selector and calibration (`stop_on="right"`: a step stops when its leading answer is
likely right, the judge being what it would otherwise ask), and one threshold chosen on repeated held-out
folds, where a question no step stops counts the judge's choice from a fit that did not see it (the judge
voter's own setting, chosen by its training, refitted on the other folds: `last_step`) and the scoring's
replayed seconds on top of every member's (`scoring_costs`). The judge's answers are those of its fit for
what the config scores (`passages: false`: the members' prompts alone, `scored_families`).

P(right) of the answers the steps stop at is today's cascade's (voters.right: the evidence of the stopping
step's choice, the reader's confidence included, a fit per feature set), fitted out of fold with the judge as
the last step; the judge's answers take its fit's P(right), cross-fitted on the same folds; and one threshold
serves both (`calibrate_judged`, `joint_thresholds`): on the training questions, or beyond the corpus on a mix
of them and questions the corpus cannot answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError, InputError
from eor.core.models import sha256_of
from eor.core.prompts import templates_for
from eor.learning.beyond_corpus import (
    ANSWERABLE,
    Mix,
    MixCalibrated,
    calibrate_mix_rows,
    mix_folds,
    mix_thresholds,
    taught_kinds,
)
from eor.learning.crossval import Progress, VoteArrays, VoteSettings, build_candidate
from eor.learning.judge_training import (
    JudgedQuestion,
    Setting,
    accuracy,
    choices_out_of_fold,
    cross_fitted,
    fitted_on,
    without_scores,
)
from eor.pipeline.abstention import ALPHAS, DELTA
from eor.pipeline.judging import passages_read
from eor.runs.costs import ReaderTokens, scoring_seconds
from voters.cascade_fit import REPEATS
from voters.cascade_points import LastStep
from voters.choice_evidence import EARLY, Evidence, choice_evidence
from voters.folds import cross_fit, in_row_order
from voters.folds import folds as fold_parts
from voters.judge_features import PASSAGE
from voters.judge_selector import Choice, JudgeSelector


def last_step(
    questions: Sequence[JudgedQuestion],
    fit: JudgeSelector,
    cost: np.ndarray,
    *,
    folds: int,
    seed: int,
    repeats: int = REPEATS,
) -> LastStep:
    """The judge as a cascade's last step over the training `questions` (in the cascade's row order, seen with
    the families `fit` reads): per repeat r, each question's choice by `fit`'s setting refitted on the other
    folds of the cascade's split r (voters.folds with `seed + r`), right or not; and `cost`, each question's
    scoring seconds."""
    seen = [without_scores(q, fit.needs) for q in questions]
    setting = Setting(tuple(fit.families), fit.spans, fit.retrieval, fit.null)
    right = np.zeros((repeats, len(seen)), dtype=bool)
    probability = np.full((repeats, len(seen)), np.nan)
    for repeat in range(repeats):
        parts = fold_parts(len(seen), folds, seed + repeat)
        choices = choices_out_of_fold(seen, setting, parts)
        right[repeat] = accuracy(seen, choices).astype(bool)
        probability[repeat] = cross_fitted(choices, right[repeat], parts)
    costs = np.asarray(cost, dtype=float)
    if costs.shape != (len(seen),) or not np.all(np.isfinite(costs)):
        raise InputError(f"the judge's scoring costs must be {len(seen)} finite numbers, one per question")
    return LastStep(right, costs, probability)


def chat_tokenizer(reader: Any) -> Callable[[str], Sequence[int]]:
    """The reader's chat tokens of a prompt, what the judge's scoring is counted in (ConfigError for a reader
    that cannot count them: the llama.cpp reader can)."""
    tokenize = getattr(reader, "chat_tokens", None)
    if not callable(tokenize):
        raise ConfigError(
            "the judge's scoring and prefix reuse are replayed in the reader's own chat tokens: it needs a llama.cpp "
            "reader"
        )
    return tokenize


def reader_tokens(reader: Any, config: EnsembleConfig) -> ReaderTokens:
    """What replays of prefix reuse count in: `reader`'s chat tokens (ConfigError as `chat_tokenizer`) and the
    prefix chunk of `config`'s reader."""
    return ReaderTokens(chat_tokenizer(reader), config.reader.llama_cpp.prefix_chunk)


def scoring_costs(
    records: Sequence[Any],
    config: EnsembleConfig,
    tokenize: Callable[[str], Sequence[int]],
    rates: Mapping[str, float],
    *,
    passages: bool,
) -> np.ndarray:
    """Per record, the reader seconds at `rates` of scoring its recorded candidates as the judge does live
    (eor.runs.costs.scoring_seconds): under every member's prompt, whose state the reader holds, and with
    `passages` under each passage alone in the config's reading template. `tokenize`: the reader's chat
    tokens of a prompt."""
    templates = templates_for(config)
    chunk = config.reader.llama_cpp.prefix_chunk
    seconds = []
    for record in records:
        if record.judge is None:
            raise InputError(f"question {record.id} holds no scores of the judge (eor run with a judge: section)")
        outputs = {name: record.members[name] for name in config.members if name in record.members}
        prompts = {name: output.prompt for name, output in outputs.items() if output.prompt}
        if passages:
            for passage in (p for p in passages_read(outputs) if p.get("id") is not None):
                pair = (str(passage.get("title", "")), str(passage.get("text", "")))
                prompts[PASSAGE + str(passage["id"])] = templates.answer_prompt(record.question, [pair])
        candidates = record.judge["candidates"]
        seconds.append(scoring_seconds(candidates, prompts, list(outputs), tokenize, rates, chunk))
    return np.asarray(seconds, dtype=float)


def last_step_meta(path: Path, fit: JudgeSelector, step: LastStep) -> dict[str, Any]:
    """What a cascade ending with the judge records of it: the judge's weights file (path and digest: live
    answering refuses another), the fit that answers, and the mean scoring cost on the training questions."""
    return {
        "voter": "judge",
        "weights": str(path),
        "sha256": sha256_of(path),
        "fit": fit.label,
        "scored": sorted(fit.needs),
        "cost": float(np.mean(step.cost)) if len(step.cost) else 0.0,
        "held_out_em": float(step.right.mean()) if step.right.size else 0.0,
    }


@dataclass
class JudgedCalibration:
    """P(right) of a cascade ending with the judge (`calibrate_judged`): of the answers its steps stop at
    (`stopped`, a calibration over the mix, with P(unanswerable) when it holds questions the corpus cannot answer)
    and of the judge's (its out-of-fold `judge_probability` where no step stopped, with `judge_right`); `late`:
    the thresholds, one for every answer whichever gave it (each of `stopped`'s fits holds the same), for a mix
    with the share where there are no-corpus questions; per row, whether no step stopped it (`ended`)."""

    stopped: MixCalibrated
    late: list[dict[str, Any]]
    ended: np.ndarray
    judge_probability: np.ndarray
    judge_right: np.ndarray


def calibrate_judged(
    arrays: VoteArrays,
    mix: Mix,
    settings: VoteSettings,
    ending: LastStep,
    questions: Sequence[JudgedQuestion],
    fit: JudgeSelector,
    share: float,
    progress: Progress | None = None,
) -> JudgedCalibration:
    """The judged cascade's P(right) and thresholds over the training questions, or over a mix of answerable and
    unanswerable ones (eor.learning.beyond_corpus; `arrays`: the mix's, with the retrieval family beyond the
    corpus; `questions`: every row judged, seen as `fit` reads them). On folds where a question and its ablated
    copy fall together (`mix_folds`, the cascade's K and seed), each row is run through the cascade fitted, with
    the judge as its last step (`ending`: the judge's held-out choices on the answerable rows, which come first),
    on the answerable rows of the other folds; where a step stops, the stopping step's evidence; where none does,
    the choice of the judge's setting fitted on those same rows. The steps' P(right) is a calibration over the
    rows they stop (`calibrate_mix_rows`); the judge's out-of-fold P(right) is cross-fitted on the other folds'
    choices of the kinds that teach. One threshold then serves every answer, whichever P(right) it carries
    (`joint_thresholds`): the test at δ over every row, each answered where its own P(right) reaches it."""
    shape = build_candidate("cascade", settings).template(arrays)
    k, seed = shape.folds, shape.seed
    parts = mix_folds(mix, k, seed)
    answerable = mix.rows(ANSWERABLE)
    seen = [without_scores(q, fit.needs) for q in questions]
    setting = Setting(tuple(fit.families), fit.spans, fit.retrieval, fit.null)
    choices: list[Choice | None] = [None] * len(seen)

    def fitted(train: np.ndarray) -> tuple[Any, JudgeSelector]:
        # the answerable rows come first: their positions are the ending's
        cascade = build_candidate("cascade", settings).template(arrays)
        cascade.stop_on = "right"
        given = None if ending.probability is None else ending.probability[:, train]
        cascade.fit(arrays.take(train), last=LastStep(ending.right[:, train], ending.cost[train], given))
        return cascade, fitted_on(setting, seen, train)

    def answered(steps: tuple[Any, JudgeSelector], held: np.ndarray) -> Evidence:
        cascade, judge = steps
        for row in held:
            choices[row] = judge.choose(seen[row].features)
        return choice_evidence(cascade, arrays.take(held))

    def told(fold: int) -> None:
        if progress is not None:
            progress(f"the steps and the judge out of fold, every kind of question, fold {fold}/{k}")

    pieces = cross_fit(parts, answerable, fitted, answered, told)
    rows = Evidence.concatenate(pieces).take(in_row_order(parts))
    stopped = rows.group == EARLY
    right = arrays.correctness[np.arange(len(rows)), rows.pick] >= 0.5
    steps = calibrate_mix_rows(
        rows, right, mix.kind, parts, share, settings.correctness, k, seed, DELTA, ALPHAS, answers=stopped
    )
    judge_right = accuracy(seen, choices).astype(bool)
    taught = np.isin(mix.kind, taught_kinds(mix.kind))
    judged = cross_fitted(choices, judge_right, parts, taught)
    judged[stopped] = np.nan  # the judge answers only where no step stopped
    steps, late = joint_thresholds(steps, ~stopped, judged, judge_right, share)
    return JudgedCalibration(steps, late, ~stopped, judged, judge_right)


def joint_thresholds(
    steps: MixCalibrated, ended: np.ndarray, judged: np.ndarray, judge_right: np.ndarray, share: float
) -> tuple[MixCalibrated, list[dict[str, Any]]]:
    """One threshold per error rate for every answer of a cascade ending with the judge: a row is answered where
    the P(right) its answer carries reaches it (a step's, `steps.probability`, where a step stopped; the judge's,
    `judged`, where none did: `ended`), and the test (eor.pipeline.abstention; the mixed one where there are
    no-corpus rows) runs once, at δ, over every row: no union bound between the two kinds of answer, and the bound
    is on the error among all the answers given. The steps' fits all hold those thresholds (`steps` with them),
    and so does the judge's step."""
    probability = np.where(ended, judged, steps.probability)
    right = np.where(ended, judge_right, steps.right)
    chosen = mix_thresholds(probability, right, steps.kind, share, DELTA, ALPHAS)
    fits = {name: replace(fit, thresholds=chosen, delta=DELTA) for name, fit in steps.model.fits.items()}
    return replace(steps, model=replace(steps.model, fits=fits)), chosen
