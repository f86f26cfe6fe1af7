"""`eor train`: learn a voter from run records and save it as a weights file.

`--voter auto` (the default) picks among the candidates of `eor.learning.crossval` (Top R, the paper's voter, with
grounding, with the smooth objective, the learned answer selector) by inner K-fold cross-validation on the
training records, never below Top R, then fits the choice on every training question; `--voter NAME`
trains that voter alone (`paper` is exactly the paper's voter of section 4.2). `--cv K` reports every
candidate's K-fold figures against Top R before training (with `auto` itself cross-validated, nested).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.bench.selective import summary
from eor.bench.stats import Bootstrap, paired_test
from eor.commands.train_options import TrainOptions
from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import pct, small_data_warning
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
    confidence_choice,
    out_of_fold,
    run_batch,
    vote_arrays,
    without_confidence,
)
from eor.pipeline.abstention import DELTA
from eor.pipeline.members import demonstration_ids
from eor.pipeline.pool import pool_identity
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import token_counts, training_costs, unit_label
from eor.runs.run_data import RunData, load_run
from eor.runs.run_folder import recorded_config, recorded_pool
from voters import Voter, correctness_matrix
from voters.cascade import EVENT_LABELS
from voters.cascade_fit import REPEATS
from voters.scoring import mean_correctness

log = logging.getLogger(__name__)

#: the tolerances (EM points) at which a cascade's operating points are shown.
OPERATING_LOSSES = (0.0, 0.25, 0.5, 1.0, 2.0)
#: P(right) and its thresholds are fitted only from this many training questions per fold up
PROBABILITY_QUESTIONS_PER_FOLD = 10
#: the error rates whose abstention thresholds `eor train` prints (all of eor.pipeline.abstention.ALPHAS are stored).
REPORTED_RISKS = (0.1, 0.2, 0.3, 0.4)


#: the voters whose features may hold the reader's confidence (`auto` may choose one of them): for these,
#: `eor train` keeps the confidence features only when cross-validation says they help.
CONFIDENCE_VOTERS = (AUTO, "selector", "cascade")


def train(records: Path, out: Path, options: TrainOptions) -> str:
    """Train the voter that `options` asks for on the run records `records`, save it as the weights file
    `out` and give back the report's lines."""
    name = options.checked_voter()
    pool = _pool_config(options)
    data = _training_data(records, options, pool)
    if options.rates is not None and token_counts(data) is None:  # before any similarity is computed
        raise InputError(f"--rates prices token counts, and {records} lacks them for some member (records of old runs)")
    settings = options.vote_settings()
    arrays = _with_costs(vote_arrays(data, settings), options.costs)
    lines: list[str] = []
    meta: dict[str, Any] = {"records": str(records), "dev_records": str(options.dev) if options.dev else None}
    name, arrays, settings = _choose(name, arrays, settings, options, lines, meta)
    fitted = _fit(name, arrays, settings)
    calibrated = _calibrated(name, arrays, settings, options)
    if calibrated is not None:
        meta["probability"] = calibrated.model.to_dict()
    meta["chosen_voter"] = name
    meta.update(_baselines(arrays, settings))
    meta.update(_run_meta(Path(records)))
    if arrays.costs is not None:  # the cost model of the training records (eor.runs.costs), for bench and lazy voting
        meta["costs"] = training_costs(arrays.costs, arrays.data.names)
    identity = _pool(Path(records), options.pool_config, pool, data.names)
    if identity is not None:
        meta["pool"] = identity
    lines.append(f"voter: {name}; weights written to {out}")
    lines += _scores(fitted, arrays, name, meta, options.metric)
    lines += probability_lines(calibrated, options.metric, data.questions, options.inner_folds)
    if options.dev is not None:
        lines += _dev_scores(fitted, load_run(options.dev, data.names), meta, options.metric, options.seed)
    fitted.save(out, **meta)
    return "\n".join(lines)


def _pool_config(options: TrainOptions) -> EnsembleConfig | None:
    """The pool's config: `options.pool`, else the file of `--config` through the door (eor.pipeline.validation);
    None without one."""
    if options.pool is not None or options.pool_config is None:
        return options.pool
    return load_valid_config(options.pool_config)


def _training_data(records: Path, options: TrainOptions, pool: EnsembleConfig | None) -> RunData:
    """The records of the members trained on (`options.members`, else the pool config's, else all), less
    the questions the pool config's prompt variants show as worked examples; a warning when they are few."""
    members, demonstrations = options.members, set()
    if pool is not None:
        members = pool.members if members is None else members  # records that grew beyond it: its members
        demonstrations = demonstration_ids(pool)  # its prompt variants' worked examples never train
    data = load_run(records, members).without(demonstrations)
    with_confidence = " (with the reader's confidence)" if options.confidence and data.has_confidence else ""
    log.info(
        "similarities and features of %d training questions × %d members%s",
        data.questions,
        len(data.names),
        with_confidence,
    )
    if warning := small_data_warning(data.questions, "training and cross-validation"):
        log.warning(warning)
    return data


def _with_costs(arrays: VoteArrays, costs: Any) -> VoteArrays:
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


def _choose(
    name: str,
    arrays: VoteArrays,
    settings: VoteSettings,
    options: TrainOptions,
    lines: list[str],
    meta: dict[str, Any],
) -> tuple[str, VoteArrays, VoteSettings]:
    """The voter to fit, with the arrays and settings to fit it on: the reader's confidence features kept
    only where cross-validation says they help, the `cv` report first, then `auto`'s choice; what each step
    found goes into the report's `lines` and the weights file's `meta`."""
    folds, seed = options.inner_folds, options.seed
    if arrays.blocks.confidence is not None and name in CONFIDENCE_VOTERS:
        choice = confidence_choice(arrays, settings, folds, seed)
        meta["confidence_features"] = choice
        lines.append(_confidence_line(choice, options.metric))
        if not choice["used"]:
            arrays, settings = without_confidence(arrays), replace(settings, confidence=False)
    if options.cv:
        cascade = name == "cascade"
        table = cross_validation(
            arrays, settings, options.cv, seed, with_auto=name == AUTO, inner_folds=folds, cascade=cascade
        )
        meta["cv"] = {"folds": options.cv, "seed": seed, "voters": table}
        lines += format_cv(table, options.cv, arrays.data.questions, options.metric)
    if name == AUTO:
        candidates = auto_names(settings)
        with fold_progress("choosing the voter", folds * len(candidates)) as step:
            name, means = choose_candidate(arrays, candidates, settings, folds, seed, progress=step)
        meta["selection"] = {"folds": folds, "seed": seed, "means": means}
        lines.append(_selection_line(name, means, folds, options.metric))
    return name, arrays, settings


def _calibrated(name: str, arrays: VoteArrays, settings: VoteSettings, options: TrainOptions) -> Calibrated | None:
    """P(right) of the voter's choices and its abstention thresholds, fitted out of fold; None with fewer than
    PROBABILITY_QUESTIONS_PER_FOLD training questions per fold."""
    folds = options.inner_folds
    if arrays.data.questions < PROBABILITY_QUESTIONS_PER_FOLD * folds:
        return None
    with fold_progress("P(right) out of fold", folds) as step:
        return calibrate(arrays, name, settings, folds, options.seed, step)


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


def format_cv(table: dict[str, dict[str, Any]], k: int, questions: int, metric: str) -> list[str]:
    lines = [
        f"{k}-fold cross-validation over {questions} training questions ({metric}, Top R chosen in each fold):",
        f"  {'voter':<18} {metric:>6}  {'− Top R':>8}  95% interval      p        cost/question",
    ]
    for name, row in table.items():
        low, high = row["ci"]
        extra = f"  (chose {', '.join(row['chosen_per_fold'])})" if row.get("chosen_per_fold") else ""
        cost = f"{row['cost']:8.2f} s" if row.get("cost") is not None else f"{'-':>10}"
        lines.append(
            f"  {name:<18} {100 * row['mean']:6.1f}  {100 * row['minus_top']:+8.1f}  "
            f"[{100 * low:+5.1f}, {100 * high:+5.1f}]  {row['p_value']:<8.3g} {cost}{extra}"
        )
    return lines


def _selection_line(name: str, means: dict[str, float], k: int, metric: str) -> str:
    ranked = ", ".join(f"{n} {100 * v:.1f}" for n, v in sorted(means.items(), key=lambda item: -item[1]))
    return f"auto chose {name} by {k}-fold cross-validation on the training records ({metric}: {ranked})"


def _fit(name: str, arrays: VoteArrays, settings: VoteSettings) -> Any:
    """The named candidate fitted on every training question, as a voter that can be saved."""

    rows = np.arange(arrays.questions)
    candidate = build_candidate(name, settings).fit(arrays, rows)
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


def _baselines(arrays: VoteArrays, settings: VoteSettings) -> dict[str, Any]:
    accuracy = arrays.correctness.mean(axis=0)
    top = int(np.argmax(accuracy))
    uniform = Voter.uniform(
        len(arrays.data.names),
        metrics=settings.metrics,
        pooling="mean" if settings.pooling == "search" else settings.pooling,
        metric_params=settings.metric_params,
        members=arrays.data.names,
    )
    return {
        "top_r_train": {"member": arrays.data.names[top], "train": float(accuracy[top])},
        "uniform": {"train": mean_correctness(arrays.correctness, uniform.predict(arrays.batch))},
    }


def _run_meta(records: Path) -> dict[str, Any]:
    config = recorded_config(records)
    if config is None:
        return {}
    corpus = (config.get("corpus") or {}).get("path")
    # the file name only: no machine paths in weights files
    return {"reader": config.get("reader", {}).get("model"), "dataset": Path(corpus).name if corpus else None}


def _pool(
    records: Path, pool_config: Path | None, config: EnsembleConfig | None, names: list[str]
) -> dict[str, Any] | None:
    """The identity of the records' pool: from `config`, that of `pool_config` (its reader built for its
    identity, which for llama.cpp hashes the model file without loading it), else the run's pool.json, else
    None."""

    if config is None:
        return recorded_pool(records)

    if sorted(config.members) != sorted(names):
        raise ConfigError(f"{pool_config} has members {', '.join(config.members)}; the records have {', '.join(names)}")
    return pool_identity(config, build_reader(config.reader))


def _confidence_line(choice: dict[str, Any], metric: str) -> str:
    verdict = "kept" if choice["used"] else "left out"
    return (
        f"reader confidence as selector features: {verdict} by {choice['folds']}-fold cross-validation "
        f"({metric}: selector {pct(choice['with'])} with, {pct(choice['without'])} without)"
    )


def _predict(voter: Any, data: RunData) -> np.ndarray:
    return voter.predict(run_batch(data))


def _scores(voter: Any, arrays: VoteArrays, name: str, meta: dict[str, Any], metric: str) -> list[str]:
    top = meta["top_r_train"]
    lines = [
        f"{metric} on train ({arrays.questions} questions, %): {name} {pct(voter.train_score_)}, "
        f"uniform {pct(meta['uniform']['train'])}, best single member {top['member']} {pct(top['train'])}"
    ]
    if hasattr(voter, "order_"):
        lines += cascade_lines(voter, metric, arrays.costs.rates if arrays.costs is not None else None)
    if hasattr(voter, "active_members_"):
        kept = [f"{arrays.data.names[i]} ({voter.retriever_weights_[i]:.2f})" for i in voter.active_members_]
        lines.append(f"members kept: {', '.join(kept)}; pooling {voter.pooling_}")
    return lines


def cascade_lines(cascade: Any, metric: str, rates: dict[str, float] | None) -> list[str]:
    """The cascade's order, threshold and operating points (held out on the training records); costs from
    tokens at `rates`."""
    chosen = cascade.chosen_point_
    unit = unit_label(cascade.cost_unit_, rates)
    threshold = "never early" if np.isinf(chosen.threshold) else f"P ≥ {chosen.threshold:.3f}"
    tried = "; ".join(
        f"{name}: P ≥ {_threshold(point['threshold'])}, {point['cost']:.2f} s"
        for name, point in cascade.stop_targets_.items()
    )
    lines = [
        f"cascade order: {' > '.join(cascade.order_)}; stops at the first step with {threshold}",
        f"stop rule: {EVENT_LABELS.get(cascade.stop_on_, cascade.stop_on_)} (held-out cost by stop target: {tried})",
        f"held out on train ({REPEATS}× {cascade.folds}-fold): {metric} {100 * chosen.accuracy:.1f} "
        f"(full pool {100 * cascade.full_accuracy_:.1f}, loss {100 * chosen.loss:+.2f}) at {chosen.cost:.2f} {unit} "
        f"per question, {100 * chosen.cost / cascade.full_cost_:.0f}% of the full pool's {cascade.full_cost_:.2f}; "
        f"{chosen.members_run:.2f} members run",
        f"operating points (held out on train): {'max loss':>8}  threshold  {metric:>5}  {'cost':>6}  members",
    ]
    for loss in OPERATING_LOSSES:
        point = cascade.at_loss(loss / 100)
        figures = f"{100 * point.accuracy:5.1f}  {point.cost:6.2f}  {point.members_run:7.2f}"
        lines.append(f"{'':38}{loss:8.2f}  {_threshold(point.threshold):>9}  {figures}")
    return lines


def probability_lines(calibrated: Calibrated | None, metric: str, questions: int, folds: int) -> list[str]:
    """P(right) out of fold on the training records, and the abstention thresholds chosen on it."""
    if calibrated is None:
        least = PROBABILITY_QUESTIONS_PER_FOLD * folds
        return [f"P(right): not fitted: {questions} training questions, fewer than {least} ({folds} folds)"]
    figures = summary(calibrated.probability, calibrated.right)
    skill = figures["brier_skill"]
    lines = [
        f"P(right) ({metric}) out of fold on {figures['questions']} training questions: ECE {figures['ece']:.3f}, "
        f"Brier skill {'-' if skill is None else f'{skill:.3f}'}, AURC {figures['aurc']:.3f} "
        f"(a constant's {figures['aurc_constant']:.3f})",
        f"abstention thresholds (Learn then Test, δ {DELTA:g}; error rate: threshold (coverage)), per fit:",
    ]
    for fit in calibrated.model.fits.values():
        levels = ", ".join(
            f"{row['alpha']:g}: "
            + ("none" if row["threshold"] is None else f"P ≥ {row['threshold']:.2f} ({pct(row['coverage'])}%)")
            for row in fit.thresholds
            if row["alpha"] in REPORTED_RISKS
        )
        own = calibrated.by_fit[fit.name]
        alone = summary(own[~np.isnan(own)], calibrated.right[~np.isnan(own)])
        scored = int((calibrated.fits == fit.name).sum())
        lines.append(
            f"  {fit.name} (fitted on {fit.questions}, scores {scored} above; alone ECE {alone['ece']:.3f}, "
            f"AURC {alone['aurc']:.3f}): {levels}"
        )
    return lines


def _threshold(value: float | None) -> str:
    return "inf" if value is None or np.isinf(value) else f"{value:.3f}"


def _dev_scores(voter: Any, dev: RunData, meta: dict[str, Any], metric: str, seed: int = 0) -> list[str]:
    """The held-out report: the voter, uniform weights, Top R (train) and Top R (dev) on the dev records, the
    paired tests of the voter against both Top Rs (bootstrap 95% interval of the difference, exact McNemar
    when correctness is 0/1), token F1 of the same choices, and the share of the Top R (train)–oracle gap the
    voter closes."""

    correctness = correctness_matrix(dev.answers, dev.golds, metric)
    picks = np.asarray(_predict(voter, dev), dtype=int)
    rows = np.arange(dev.questions)
    voter.dev_score_ = mean_correctness(correctness, picks)
    index = dev.names.index(meta["top_r_train"]["member"])
    meta["top_r_train"]["dev"] = float(correctness[:, index].mean())
    uniform = Voter.uniform(
        len(dev.names), metrics=voter.metric_names_, metric_params=voter.metric_params, members=dev.names
    )
    meta["uniform"]["dev"] = mean_correctness(correctness, uniform.predict(run_batch(dev)))
    best = int(np.argmax(correctness.mean(axis=0)))
    meta["top_r_dev"] = {"member": dev.names[best], "dev": float(correctness[:, best].mean())}
    f1 = correctness_matrix(dev.answers, dev.golds, "f1")
    oracle = float(correctness.max(axis=1).mean())
    gap = oracle - meta["top_r_train"]["dev"]
    chosen = correctness[rows, picks]
    shared = Bootstrap.draw(dev.questions, 2000, seed)
    tests = {}
    for key, column in (("top_r_train", index), ("top_r_dev", best)):
        test = paired_test(chosen, correctness[:, column], shared)
        tests[key] = {name: test[name] for name in ("difference", "ci", "p_value", "test")}
    meta["dev"] = {
        "questions": dev.questions,
        metric: voter.dev_score_,
        "f1": float(f1[rows, picks].mean()),
        "oracle": oracle,
        "gap_closed": (voter.dev_score_ - meta["top_r_train"]["dev"]) / gap if gap > 0 else None,
        "vs": tests,
    }
    lines = [
        f"{metric} on dev ({dev.questions} questions, %): voter {pct(voter.dev_score_)}, "
        f"uniform {pct(meta['uniform']['dev'])}, {meta['top_r_train']['member']} {pct(meta['top_r_train']['dev'])}, "
        f"best on dev {meta['top_r_dev']['member']} {pct(meta['top_r_dev']['dev'])}",
        f"f1 on dev (%): voter {pct(meta['dev']['f1'])}, {meta['top_r_train']['member']} {pct(f1[:, index].mean())}, "
        f"{dev.names[best]} {pct(f1[:, best].mean())}; oracle {metric} {pct(oracle)}",
    ]
    for key, label in (("top_r_train", "Top R (train)"), ("top_r_dev", "Top R (dev)")):
        test = tests[key]
        low, high = test["ci"]
        lines.append(
            f"voter − {label}: {100 * test['difference']:+.1f} points, 95% interval [{100 * low:+.1f}, "
            f"{100 * high:+.1f}], {test['test']} p {test['p_value']:.3g}"
        )
    if meta["dev"]["gap_closed"] is not None:
        lines.append(f"share of the Top R (train) to oracle gap closed: {100 * meta['dev']['gap_closed']:.0f}%")
    return lines
