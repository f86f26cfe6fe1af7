"""Training a voter from run records, one pipeline of named steps (what `eor train` runs and prints):

1. **records**: the members trained on, less the questions a pool config's prompt variants show as worked
   examples (`training_records`);
2. **candidates**: the vote's arrays over them (eor.learning.crossval.vote_arrays), the members' costs
   (`with_costs`);
3. **cross-validated choice** (`choose`): the reader's confidence kept as selector features only where
   cross-validation says it helps, every candidate's K-fold figures against Top R when asked, and `auto`'s
   choice by inner cross-validation;
4. **fit** (`fit`): the choice on every training question, as a voter that can be saved;
5. **calibration** (`calibrated`): its P(right) and abstention thresholds, fitted out of fold
   (eor.learning.calibration);
6. **report**: the baselines, one uniform voter (`uniform_baseline`) scored on training and on dev with the
   same metrics and pooling, Top R (train), and the held-out figures on dev (`dev_figures`);
7. **weights file**: what each step found, made into the weights file's metadata (eor.learning.trained).

`train_voter` runs them in order; eor.commands.train_command prints what each found and saves the file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import small_data_warning
from eor.evaluation import upper_bound
from eor.evaluation.stats import Bootstrap, paired_test
from eor.learning.beyond_corpus import MixCalibrated, calibrate_mix, mix_records
from eor.learning.calibration import Calibrated, calibrate
from eor.learning.crossval import (
    AUTO,
    Progress,
    VoteArrays,
    VoteSettings,
    auto_names,
    build_candidate,
    candidate_names,
    choose_candidate,
    compare_with_top,
    out_of_fold,
    run_batch,
    vote_arrays,
    without_confidence,
)
from eor.learning.judge_cascade import reader_tokens
from eor.learning.train_options import TrainOptions
from eor.learning.trained import Trained, choice_meta, dev_meta, pool_meta, run_meta
from eor.pipeline.members import demonstration_ids
from eor.pipeline.pool import runs_pool
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import token_counts, training_costs, with_replay
from eor.runs.run_data import RunData, load_run, load_runs, named_runs, run_paths
from voters import Voter, correctness_matrix
from voters.scoring import mean_correctness

log = logging.getLogger(__name__)

#: P(right) and its thresholds are fitted only from this many training questions per fold up
PROBABILITY_QUESTIONS_PER_FOLD = 10
#: the voters whose features may hold the reader's confidence (`auto` may choose one of them): for these,
#: training keeps the confidence features only when cross-validation says they help.
CONFIDENCE_VOTERS = (AUTO, "selector", "cascade")
#: bootstrap resamples of the paired tests on dev
DEV_RESAMPLES = 2000


def confidence_choice(arrays: VoteArrays, settings: VoteSettings, k: int, seed: int) -> dict[str, Any]:
    """Whether the selector's features keep the reader's confidence, by k-fold cross-validation of the
    selector with and without it on the same folds: kept only when strictly better (simpler on a tie).
    `{"used": bool, "with": mean, "without": mean, "folds": k}`."""
    means = {
        label: float(
            out_of_fold(arrays, ["selector"], replace(settings, confidence=used), k, seed).scores["selector"].mean()
        )
        for label, used in (("with", True), ("without", False))
    }
    return {"used": means["with"] > means["without"], **means, "folds": k}


def training_records(
    records: Sequence[Path], members: list[str] | None, pool: EnsembleConfig | None, confidence: bool
) -> RunData:
    """The records of the members trained on (`members`, else the pool config's, else all), from one run or several
    read as one (eor.runs.run_data.load_runs), less the questions the pool config's prompt variants show as worked
    examples; a warning when they are few."""
    demonstrations: set[str] = set()
    if pool is not None:
        members = pool.members if members is None else members  # records that grew beyond it: its members
        demonstrations = demonstration_ids(pool)  # its prompt variants' worked examples never train
    data = load_runs(records, members).without(demonstrations)
    with_confidence = " (with the reader's confidence)" if confidence and data.has_confidence else ""
    log.info(
        "similarities and features of %d training questions × %d members%s",
        data.questions,
        len(data.names),
        with_confidence,
    )
    if warning := small_data_warning(data.questions, "training and cross-validation"):
        log.warning(warning)
    return data


def with_costs(arrays: VoteArrays, costs: Any) -> VoteArrays:
    """The arrays with `costs` (eor.runs.costs.MemberCosts) in place of the records' own, when given."""
    if costs is None:
        return arrays
    expected = (arrays.data.questions, len(arrays.data.names))
    if costs.matrix.shape != expected:
        raise InputError(
            f"costs for {costs.matrix.shape[0]} questions × {costs.matrix.shape[1]} members; the records give "
            f"{expected[0]} × {expected[1]}"
        )
    return replace(arrays, costs=costs)


@dataclass
class Choice:
    """What the cross-validated choice found: the voter to fit (`name`), with the arrays and settings to fit it
    on; the confidence features' verdict (None: not asked), every candidate's K-fold table (None: no `cv`) and
    `auto`'s inner-CV means (None: a named voter)."""

    name: str
    arrays: VoteArrays
    settings: VoteSettings
    confidence: dict[str, Any] | None = None
    cv: dict[str, dict[str, Any]] | None = None
    selection: dict[str, float] | None = None
    folds: int = 0
    seed: int = 0
    cv_folds: int | None = None


def choose(name: str, arrays: VoteArrays, settings: VoteSettings, folds: int, seed: int, cv: int | None) -> Choice:
    """The voter to fit: the reader's confidence features kept only where cross-validation says they help,
    the `cv`-fold table of every candidate against Top R first (when `cv`), then `auto`'s choice."""
    choice = Choice(name, arrays, settings, folds=folds, seed=seed, cv_folds=cv)
    if arrays.blocks.confidence is not None and name in CONFIDENCE_VOTERS:
        choice.confidence = confidence_choice(arrays, settings, folds, seed)
        if not choice.confidence["used"]:
            choice.arrays, choice.settings = without_confidence(arrays), replace(settings, confidence=False)
    if cv:
        choice.cv = cross_validation(
            choice.arrays,
            choice.settings,
            cv,
            seed,
            with_auto=name == AUTO,
            inner_folds=folds,
            cascade=name == "cascade",
        )
    if name == AUTO:
        candidates = auto_names(choice.settings)
        with fold_progress("choosing the voter", folds * len(candidates)) as step:
            choice.name, choice.selection = choose_candidate(
                choice.arrays, candidates, choice.settings, folds, seed, progress=step
            )
    return choice


def cross_validation(
    arrays: VoteArrays,
    settings: VoteSettings,
    k: int,
    seed: int,
    *,
    with_auto: bool,
    inner_folds: int,
    cascade: bool = False,
) -> dict[str, dict[str, Any]]:
    """K-fold figures of every candidate (and of `auto`, nested) against Top R chosen in each fold; the
    cost-aware candidates when `auto` may choose them or `cascade` is asked for."""
    names = candidate_names(cost_aware=cascade or settings.max_loss is not None or settings.budget is not None)
    names = [*names, AUTO] if with_auto else names
    with fold_progress(f"{k}-fold cross-validation", k * len(names)) as step:
        result = out_of_fold(arrays, names, settings, k, seed, inner_folds=inner_folds, progress=step)
    return compare_with_top(result)


@contextmanager
def fold_progress(label: str, total: int) -> Iterator[Progress]:
    """A progress bar (on stderr) of a cross-validation's candidate folds; yields the step callback."""
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=label, unit="fold", leave=False) as bar:

        def step(done: str) -> None:
            bar.set_postfix_str(done, refresh=False)
            bar.update()

        yield step


def fit(choice: Choice) -> Any:
    """The chosen candidate fitted on every training question, as a voter that can be saved (Top R: the
    uniform voter that keeps only its member)."""
    arrays, settings = choice.arrays, choice.settings
    rows = np.arange(arrays.questions)
    candidate = build_candidate(choice.name, settings).fit(arrays, rows)
    if candidate.estimator is not None:
        if getattr(candidate.estimator, "train_score_", None) is None:
            candidate.estimator.train_score_ = mean_correctness(arrays.correctness, candidate.predict(arrays, rows))
        return candidate.estimator
    assert hasattr(candidate, "member")  # no estimator: Top R (crossval.TopCandidate), which chose a member
    voter = Voter.uniform(
        len(arrays.data.names),
        only=candidate.member,
        metrics=settings.metrics,
        pooling=settings.pooling,
        correctness=settings.correctness,
        metric_params=settings.metric_params,
        members=arrays.data.names,
    )
    voter.train_score_ = float(arrays.correctness[:, candidate.member].mean())
    return voter


def calibrated(choice: Choice) -> Calibrated | None:
    """P(right) of the chosen voter's choices and its abstention thresholds, fitted out of fold; None with fewer
    than PROBABILITY_QUESTIONS_PER_FOLD training questions per fold."""
    if choice.arrays.data.questions < PROBABILITY_QUESTIONS_PER_FOLD * choice.folds:
        return None
    with fold_progress("P(right) out of fold", choice.folds) as step:
        return calibrate(choice.arrays, choice.name, choice.settings, choice.folds, choice.seed, step)


def beyond_records(paths: Path | Sequence[Path], names: list[str], pool: EnsembleConfig | None) -> RunData:
    """Records of questions the corpus cannot answer (one run, or several read as one), for `calibrated_beyond`:
    the training members, less any question made from one the pool config's prompt variants show as a worked
    example."""
    data = load_runs(run_paths(paths), names)
    shown = demonstration_ids(pool) if pool is not None else set()
    kept = [
        i for i, (qid, origin) in enumerate(zip(data.ids, data.origin_ids, strict=True)) if not {qid, origin} & shown
    ]
    return data if len(kept) == data.questions else data.subset(kept)


def calibrated_beyond(
    choice: Choice, ablated: RunData | None, nocorpus: RunData | None, share: float
) -> MixCalibrated | None:
    """P(right) of the chosen voter fitted out of fold with questions the corpus cannot answer beside the training
    ones, its thresholds for a mix with `share` of them, and P(unanswerable) (eor.learning.beyond_corpus); None
    with fewer than PROBABILITY_QUESTIONS_PER_FOLD training questions per fold. Token costs are priced at the
    training records' rates, so that the voter refitted on the folds is the one `calibrated` would refit."""
    if choice.arrays.data.questions < PROBABILITY_QUESTIONS_PER_FOLD * choice.folds:
        return None
    mix = mix_records(choice.arrays.data, ablated, nocorpus)
    costs = choice.arrays.costs
    settings = replace(choice.settings, rates=choice.settings.rates or (costs.rates if costs is not None else None))
    with fold_progress("P(right) out of fold, every kind of question", choice.folds) as step:
        return calibrate_mix(mix, choice.name, settings, choice.folds, choice.seed, share, progress=step)


def uniform_baseline(names: list[str], settings: VoteSettings) -> Voter:
    """The one uniform baseline of a training, scored on training and on dev alike: equal weights over `names`
    with the settings' metrics and pooling (mean where the pooling is searched)."""
    return Voter.uniform(
        len(names),
        metrics=settings.metrics,
        pooling="mean" if settings.pooling == "search" else settings.pooling,
        metric_params=settings.metric_params,
        members=names,
    )


def train_baselines(arrays: VoteArrays, uniform: Voter) -> dict[str, Any]:
    """Top R (train), the member most often right on the training records, and the uniform baseline there."""
    accuracy = arrays.correctness.mean(axis=0)
    top = upper_bound.top_member(arrays.correctness)  # the one home of Top R's choice
    return {
        "top_r_train": {"member": arrays.data.names[top], "train": float(accuracy[top])},
        "uniform": {"train": mean_correctness(arrays.correctness, uniform.predict(arrays.batch))},
    }


@dataclass
class DevFigures:
    """The held-out figures on dev: the voter's score and F1, the baselines' scores, the oracle, the paired
    tests against Top R (train) and Top R (dev) (`tests`), and the F1 of each Top R."""

    questions: int
    score: float
    f1: float
    uniform: float
    top_train: tuple[str, float, float]  # member, score, F1
    top_dev: tuple[str, float, float]
    oracle: float
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def gap_closed(self) -> float | None:
        """The share of the Top R (train)–oracle gap the voter closes."""
        gap = self.oracle - self.top_train[1]
        return (self.score - self.top_train[1]) / gap if gap > 0 else None


def dev_figures(voter: Any, dev: RunData, top_member: str, uniform: Voter, metric: str, seed: int) -> DevFigures:
    """The voter, the uniform baseline and Top R (train) on the dev records, Top R (dev), and the paired tests
    of the voter against both Top Rs (bootstrap 95% interval of the difference, exact McNemar when
    correctness is 0/1)."""
    correctness = correctness_matrix(dev.answers, dev.golds, metric)
    f1 = correctness_matrix(dev.answers, dev.golds, "f1")
    batch = run_batch(dev)
    picks = np.asarray(voter.predict(batch), dtype=int)
    rows = np.arange(dev.questions)
    index, best = dev.names.index(top_member), upper_bound.top_member(correctness)
    chosen = correctness[rows, picks]
    shared = Bootstrap.draw(dev.questions, DEV_RESAMPLES, seed)
    tests = {}
    for key, column in (("top_r_train", index), ("top_r_dev", best)):
        test = paired_test(chosen, correctness[:, column], shared)
        tests[key] = {name: test[name] for name in ("difference", "ci", "p_value", "test")}
    return DevFigures(
        questions=dev.questions,
        score=mean_correctness(correctness, picks),
        f1=float(f1[rows, picks].mean()),
        uniform=mean_correctness(correctness, uniform.predict(batch)),
        top_train=(top_member, float(correctness[:, index].mean()), float(f1[:, index].mean())),
        top_dev=(dev.names[best], float(correctness[:, best].mean()), float(f1[:, best].mean())),
        oracle=upper_bound.oracle_accuracy(correctness.T),
        tests=tests,
    )


@dataclass
class TrainedVoter(Trained):
    """What `train_voter` gives back: the fitted voter and its weights file's meta, the choice it was fitted from,
    its P(right) (None: too few questions), the dev figures (None: no dev records) and what a cascade's members were
    charged (None: no cascade trained)."""

    choice: Choice
    probability: Calibrated | None
    figures: DevFigures | None
    charged: str | None


def train_voter(records: Path | Sequence[Path], options: TrainOptions) -> TrainedVoter:
    """The voter `options` asks for, trained on the run records `records` (several: read as one, their pools the
    same) by the steps above, in order, with what its weights file records of them."""
    runs = run_paths(records)
    name = options.checked_voter()
    pool = pool_config(options)
    recorded = runs_pool(runs)  # before any work: runs of different pools are refused
    data = training_records(runs, options.members, pool, options.confidence)
    if options.rates is not None and token_counts(data) is None:  # before any similarity is computed
        raise InputError(
            f"--rates prices token counts, and {', '.join(map(str, runs))} lack them for some member (old records)"
        )
    settings = options.vote_settings()
    arrays, charged = in_cascade_order(with_costs(vote_arrays(data, settings), options.costs), data, pool, options)
    choice = choose(name, arrays, settings, options.inner_folds, options.seed, options.cv)
    fitted = fit(choice)
    probability: Calibrated | None
    if options.beyond_corpus:
        ablated, nocorpus = (
            None if path is None else beyond_records(path, data.names, pool)
            for path in (options.ablated, options.nocorpus)
        )
        probability = calibrated_beyond(choice, ablated, nocorpus, options.unanswerable_share)
    else:
        probability = calibrated(choice)
    uniform = uniform_baseline(data.names, choice.settings)
    meta: dict[str, Any] = {
        "records": named_runs(runs),
        "dev_records": str(options.dev) if options.dev else None,
        **options.beyond_meta(),
        **choice_meta(choice),
    }
    if probability is not None:
        meta["probability"] = probability.model.to_dict()
    meta["chosen_voter"] = choice.name
    meta.update(train_baselines(choice.arrays, uniform))
    meta.update(run_meta(runs[0]))
    if choice.arrays.costs is not None:  # the cost model of the training records, for bench and lazy voting
        meta["costs"] = training_costs(choice.arrays.costs, data.names)
    identity = pool_meta(recorded, options.pool_config, pool, data.names)
    if identity is not None:
        meta["pool"] = identity
    figures = None
    if options.dev is not None:
        top = meta["top_r_train"]["member"]
        figures = dev_figures(fitted, load_run(options.dev, data.names), top, uniform, options.metric, options.seed)
        fitted.dev_score_ = figures.score
        dev_meta(meta, figures, options.metric)
    cascade_charge = charged if charged and choice.name == "cascade" else None
    return TrainedVoter(fitted, meta, choice, probability, figures, cascade_charge)


def in_cascade_order(
    arrays: VoteArrays, data: RunData, pool: EnsembleConfig | None, options: TrainOptions
) -> tuple[VoteArrays, str | None]:
    """The arrays with each member's cost replayed as a cascade runs it, right after the member before it
    (eor.runs.costs.with_replay: the prefix its prompt shares with that one), where `options` may train a
    cascade (`auto` considers one only under a tolerance or a budget) and ask its own order (`cost_order`), and the
    records' token counts and prompts can be replayed in the pool's reader's own tokens; and what the cascade is
    charged, said for the report (None where no cascade is trained)."""
    costs = arrays.costs
    name = options.checked_voter()
    tolerant = options.max_loss is not None or options.budget is not None
    if not (name == "cascade" or (name == "auto" and tolerant)) or costs is None:
        return arrays, None
    if options.cost_order == "recorded":
        return arrays, "cascade costs: as recorded, in the records' order (--cost-order recorded)"
    if costs.replay is not None:
        return arrays, "cascade costs: replayed in the cascade's own order (given)"
    if pool is None or costs.unit != "tokens":
        why = "no --config names the reader" if pool is None else "the records' costs are seconds"
        return arrays, f"cascade costs: as recorded, in the records' order ({why}: no replay of prefix reuse)"
    try:
        replayed = with_replay(costs, data, reader_tokens(build_reader(pool.reader), pool))
    except (ConfigError, InputError) as error:
        return arrays, f"cascade costs: as recorded, in the records' order (no replay of prefix reuse: {error})"
    return replace(arrays, costs=replayed), (
        "cascade costs: each member replayed right after the member before it in the cascade's own order "
        "(prefix reuse, in the reader's tokens)"
    )


def pool_config(options: TrainOptions) -> EnsembleConfig | None:
    """The pool's config: `options.pool`, else the file of `--config` through the door (eor.pipeline.validation);
    None without one."""
    if options.pool is not None or options.pool_config is None:
        return options.pool
    return load_valid_config(options.pool_config)
