"""What `eor train` prints of each step of the training (eor.learning.training): the cross-validated choice, the
scores on training beside the baselines, a cascade's operating points, P(right) and its abstention thresholds,
and the held-out figures on dev."""

from __future__ import annotations

from typing import Any

import numpy as np

from eor.core.formatting import pct
from eor.evaluation.selective import summary
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
        cost = f"{row['cost']:8.2f} s" if row.get("cost") is not None else f"{'-':>10}"
        lines.append(
            f"  {name:<18} {100 * row['mean']:6.1f}  {100 * row['minus_top']:+8.1f}  "
            f"[{100 * low:+5.1f}, {100 * high:+5.1f}]  {row['p_value']:<8.3g} {cost}{extra}"
        )
    return lines


def _selection_line(name: str, means: dict[str, float], k: int, metric: str) -> str:
    ranked = ", ".join(f"{n} {100 * v:.1f}" for n, v in sorted(means.items(), key=lambda item: -item[1]))
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
            f"voter − {label}: {100 * test['difference']:+.1f} points, 95% interval [{100 * low:+.1f}, "
            f"{100 * high:+.1f}], {test['test']} p {test['p_value']:.3g}"
        )
    if figures.gap_closed is not None:
        lines.append(f"share of the Top R (train) to oracle gap closed: {100 * figures.gap_closed:.0f}%")
    return lines
