"""What `eor train` prints of each step of the training (eor.learning.training): the cross-validated choice, the
scores on training beside the baselines, a cascade's operating points, P(right) and its abstention thresholds,
and the held-out figures on dev."""

from __future__ import annotations

from typing import Any

import numpy as np

from eor.core.formatting import fixed, pct, signed, significant
from eor.evaluation.selective import summary
from eor.learning.beyond_corpus import KINDS, MixCalibrated
from eor.learning.calibration import Calibrated
from eor.learning.crossval import VoteArrays
from eor.learning.training import PROBABILITY_QUESTIONS_PER_FOLD, Choice, DevFigures
from eor.pipeline.abstention import DELTA
from eor.runs.costs import unit_label
from voters.cascade import EVENT_LABELS
from voters.cascade_fit import REPEATS

#: the tolerances (EM points) at which a cascade's operating points are shown.
OPERATING_LOSSES = (0.0, 0.25, 0.5, 1.0, 2.0)
#: the error rates whose abstention thresholds `eor train` prints (all of eor.pipeline.abstention.ALPHAS are stored).
REPORTED_RISKS = (0.1, 0.2, 0.3, 0.4)


def choice_lines(choice: Choice, metric: str) -> list[str]:
    """What the cross-validated choice found: the confidence features' verdict, the K-fold table, `auto`'s
    choice (each only where that step ran)."""
    lines = []
    if choice.confidence is not None:
        lines.append(_confidence_line(choice.confidence, metric))
    if choice.cv is not None:
        assert choice.cv_folds is not None
        lines += format_cv(choice.cv, choice.cv_folds, choice.arrays.data.questions, metric)
    if choice.selection is not None:
        lines.append(_selection_line(choice.name, choice.selection, choice.folds, metric))
    return lines


def format_cv(table: dict[str, dict[str, Any]], k: int, questions: int, metric: str) -> list[str]:
    """Every candidate's K-fold figures against Top R, one line each."""
    lines = [
        f"{k}-fold cross-validation over {questions} training questions ({metric}, Top R chosen in each fold):",
        f"  {'voter':<18} {metric:>6}  {'− Top R':>8}  95% interval      p        cost/question",
    ]
    for name, row in table.items():
        low, high = row["ci"]
        extra = f"  (chose {', '.join(row['chosen_per_fold'])})" if row.get("chosen_per_fold") else ""
        cost = f"{fixed(row['cost'], 2):>8} s" if row.get("cost") is not None else f"{'-':>10}"
        lines.append(
            f"  {name:<18} {fixed(100 * row['mean'], 1):>6}  {signed(100 * row['minus_top'], 1):>8}  "
            f"[{signed(100 * low, 1):>5}, {signed(100 * high, 1):>5}]  {significant(row['p_value'], 3):<8} "
            f"{cost}{extra}"
        )
    return lines


def _selection_line(name: str, means: dict[str, float], k: int, metric: str) -> str:
    ranked = ", ".join(f"{n} {fixed(100 * v, 1)}" for n, v in sorted(means.items(), key=lambda item: -item[1]))
    return f"auto chose {name} by {k}-fold cross-validation on the training records ({metric}: {ranked})"


def _confidence_line(choice: dict[str, Any], metric: str) -> str:
    verdict = "kept" if choice["used"] else "left out"
    return (
        f"reader confidence as selector features: {verdict} by {choice['folds']}-fold cross-validation "
        f"({metric}: selector {pct(choice['with'])} with, {pct(choice['without'])} without)"
    )


def score_lines(voter: Any, arrays: VoteArrays, name: str, meta: dict[str, Any], metric: str) -> list[str]:
    """The voter's score on the training records beside uniform weights and the best single member; a cascade's
    order and operating points; the paper's voter's members kept."""
    top = meta["top_r_train"]
    lines = [
        f"{metric} on train ({arrays.questions} questions, %): {name} {pct(voter.train_score_)}, "
        f"uniform {pct(meta['uniform']['train'])}, best single member {top['member']} {pct(top['train'])}"
    ]
    if voter.in_steps:
        lines += cascade_lines(voter, metric, arrays.costs.rates if arrays.costs is not None else None)
    if voter.active_members_ is not None:  # the paper's voter, which drops members by weight
        kept = [f"{arrays.data.names[i]} ({fixed(voter.retriever_weights_[i], 2)})" for i in voter.active_members_]
        lines.append(f"members kept: {', '.join(kept)}; pooling {voter.pooling_}")
    return lines


def cascade_lines(cascade: Any, metric: str, rates: dict[str, float] | None) -> list[str]:
    """The cascade's order, threshold and operating points (held out on the training records); costs from
    tokens at `rates`."""
    chosen = cascade.chosen_point_
    unit = unit_label(cascade.cost_unit_, rates)
    threshold = "never early" if np.isinf(chosen.threshold) else f"P ≥ {fixed(chosen.threshold, 3)}"
    tried = "; ".join(
        f"{name}: P ≥ {_threshold(point['threshold'])}, {fixed(point['cost'], 2)} s"
        for name, point in cascade.stop_targets_.items()
    )
    lines = [
        f"cascade order: {' > '.join(cascade.order_)}; stops at the first step with {threshold}",
        f"stop rule: {EVENT_LABELS.get(cascade.stop_on_, cascade.stop_on_)} (held-out cost by stop target: {tried})",
        f"held out on train ({REPEATS}× {cascade.folds}-fold): {metric} {fixed(100 * chosen.accuracy, 1)} "
        f"(full pool {fixed(100 * cascade.full_accuracy_, 1)}, loss {signed(100 * chosen.loss, 2)}) at "
        f"{fixed(chosen.cost, 2)} {unit} "
        f"per question, {fixed(100 * chosen.cost / cascade.full_cost_, 0)}% of the full pool's "
        f"{fixed(cascade.full_cost_, 2)}; "
        f"{fixed(chosen.members_run, 2)} members run",
        f"operating points (held out on train): {'max loss':>8}  threshold  {metric:>5}  {'cost':>6}  members",
    ]
    for loss in OPERATING_LOSSES:
        point = cascade.at_loss(loss / 100)
        figures = f"{fixed(100 * point.accuracy, 1):>5}  {fixed(point.cost, 2):>6}  {fixed(point.members_run, 2):>7}"
        lines.append(f"{'':38}{fixed(loss, 2):>8}  {_threshold(point.threshold):>9}  {figures}")
    return lines


def probability_lines(calibrated: Calibrated | None, metric: str, questions: int, folds: int) -> list[str]:
    """P(right) out of fold on the training records, and the abstention thresholds chosen on it."""
    if calibrated is None:
        least = PROBABILITY_QUESTIONS_PER_FOLD * folds
        return [f"P(right): not fitted: {questions} training questions, fewer than {least} ({folds} folds)"]
    figures = summary(calibrated.probability, calibrated.right)
    skill = figures["brier_skill"]
    lines = [
        f"P(right) ({metric}) out of fold on {figures['questions']} training questions: ECE "
        f"{fixed(figures['ece'], 3)}, "
        f"Brier skill {'-' if skill is None else f'{fixed(skill, 3)}'}, AURC {fixed(figures['aurc'], 3)} "
        f"(a constant's {fixed(figures['aurc_constant'], 3)})",
        f"abstention thresholds (Learn then Test, δ {significant(DELTA)}; error rate: threshold (coverage)), per fit:",
    ]
    for fit in calibrated.model.fits.values():
        levels = ", ".join(
            f"{significant(row['alpha'])}: "
            + ("none" if row["threshold"] is None else f"P ≥ {fixed(row['threshold'], 2)} ({pct(row['coverage'])}%)")
            for row in fit.thresholds
            if row["alpha"] in REPORTED_RISKS
        )
        own = calibrated.by_fit[fit.name]
        alone = summary(own[~np.isnan(own)], calibrated.right[~np.isnan(own)])
        scored = int((calibrated.fits == fit.name).sum())
        lines.append(
            f"  {fit.name} (fitted on {fit.questions}, scores {scored} above; alone ECE {fixed(alone['ece'], 3)}, "
            f"AURC {fixed(alone['aurc'], 3)}): {levels}"
        )
    if isinstance(calibrated, MixCalibrated):
        lines += beyond_lines(calibrated)
    return lines


def beyond_lines(calibrated: MixCalibrated) -> list[str]:
    """Out of fold, per kind of training question: how many, right, answered at each reported error rate (each
    question by its own fit's threshold), and what P(unanswerable) names."""
    model = calibrated.model
    unanswerable = model.unanswerable
    shares = [row["share"] for fit in model.fits.values() for row in fit.thresholds if row.get("share") is not None]
    share = shares[0] if shares else None
    lines = [
        "thresholds for a mix with a share "
        + (
            f"{significant(share)} of questions the corpus cannot answer (one test of the mix over the training and "
            "the no-corpus questions)"
            if share is not None
            else "0 (no no-corpus records: the training questions alone)"
        )
        + "; out of fold, per kind of question:"
    ]
    for kind in KINDS:
        rows = np.flatnonzero(calibrated.kind == kind)
        if not len(rows):
            continue
        answered = []
        for alpha in REPORTED_RISKS:
            taken = [  # a question no fit scored is declined
                bool(calibrated.fits[r])
                and _answers(model.fits[str(calibrated.fits[r])].thresholds, alpha, calibrated.probability[r])
                for r in rows
            ]
            answered.append(f"{significant(alpha)}: {pct(float(np.mean(taken)))}%")
        named = calibrated.unanswerable[rows]
        lines.append(
            f"  {kind}: {len(rows)} questions, {pct(float(calibrated.right[rows].mean()))}% right; answered at "
            + ", ".join(answered)
            + (f"; named unanswerable {pct(float(np.nanmean(named >= 0.5)))}%" if unanswerable is not None else "")
        )
    if unanswerable is not None:
        precision = unanswerable.precision
        lines.append(
            f"P(unanswerable) at the share {significant(unanswerable.share)}, out of fold: would name "
            f"{pct(unanswerable.named)}% of the questions of such a mix unanswerable, "
            f"{'-' if precision is None else pct(precision)}% of them rightly"
        )
    return lines


def answered_by_kind(answered: np.ndarray, kind: np.ndarray) -> str:
    """ "15.3% of the answerable, 1.2% of the ablated, 0.5% of the no corpus": the share of each kind of training
    question (eor.learning.beyond_corpus.KINDS) that `answered` marks."""
    present = [name for name in KINDS if (kind == name).any()]
    return ", ".join(f"{pct(float(answered[kind == name].mean()))}% of the {name}" for name in present)


def _answers(thresholds: list[dict[str, Any]], alpha: float, probability: float) -> bool:
    row = next((row for row in thresholds if abs(row["alpha"] - alpha) < 1e-9), None)
    return row is not None and row["threshold"] is not None and probability >= row["threshold"]


def _threshold(value: float | None) -> str:
    return "inf" if value is None or np.isinf(value) else fixed(value, 3)


def dev_lines(figures: DevFigures, metric: str) -> list[str]:
    """The held-out report: the voter, uniform weights, Top R (train) and Top R (dev) on dev, token F1 of the
    same choices, the paired tests against both Top Rs and the share of the Top R (train)–oracle gap closed."""
    top, best = figures.top_train, figures.top_dev
    lines = [
        f"{metric} on dev ({figures.questions} questions, %): voter {pct(figures.score)}, "
        f"uniform {pct(figures.uniform)}, {top[0]} {pct(top[1])}, best on dev {best[0]} {pct(best[1])}",
        f"f1 on dev (%): voter {pct(figures.f1)}, {top[0]} {pct(top[2])}, {best[0]} {pct(best[2])}; "
        f"oracle {metric} {pct(figures.oracle)}",
    ]
    for key, label in (("top_r_train", "Top R (train)"), ("top_r_dev", "Top R (dev)")):
        test = figures.tests[key]
        low, high = test["ci"]
        lines.append(
            f"voter − {label}: {signed(100 * test['difference'], 1)} points, 95% interval [{signed(100 * low, 1)}, "
            f"{signed(100 * high, 1)}], {test['test']} p {significant(test['p_value'], 3)}"
        )
    if figures.gap_closed is not None:
        lines.append(f"share of the Top R (train) to oracle gap closed: {fixed(100 * figures.gap_closed, 0)}%")
    return lines
