"""A voter candidate's P(right) on training records (voters.right), fitted out of fold, and the abstention
thresholds chosen on it (eor.pipeline.abstention): what `eor train` stores in a weights file's `meta.probability`
(for a cascade ending with the judge, that of the answers its steps stop at: eor.learning.judge_cascade).

Each training question's evidence comes from the candidate (eor.learning.crossval) fitted on the other folds of a
seeded K-fold split; the logistic of every group is fitted on every question's evidence, and the
out-of-fold probabilities that the thresholds are chosen on are cross-fitted on the same folds. This is done for
each feature set of voters.choice_evidence.ANSWERABLE_FITS on the questions whose choice has its features (the fit
with the reader's confidence only where at least MIN_ROWS_PER_FOLD of them per fold have it), so that a choice
without confidence is scored by a fit that never saw one, not by a filled-in value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eor.learning.crossval import Progress, VoteArrays, VoteSettings, build_candidate
from eor.pipeline.abstention import DELTA, thresholds
from voters.choice_evidence import ANSWERABLE_FITS, FITS, Evidence
from voters.folds import cross_fit, folds, in_row_order
from voters.right import RightFit, RightModel, fit_right, has_features

#: a feature set's P(right) is fitted only where at least this many training questions per fold have its features
MIN_ROWS_PER_FOLD = 10


def out_of_fold_evidence(
    arrays: VoteArrays, name: str, settings: VoteSettings, k: int, seed: int, progress: Progress | None = None
) -> tuple[Evidence, list[np.ndarray]]:
    """The evidence of the named candidate's choice for every question (voters.right), each from the candidate
    fitted on the other folds of a seeded K-fold split, in question order; and the held-out folds."""
    parts = folds(arrays.questions, k, seed)
    pieces = cross_fit(
        parts,
        np.arange(arrays.questions),
        lambda train: build_candidate(name, settings).fit(arrays, train),
        lambda candidate, held: candidate.evidence(arrays, held),
        None if progress is None else lambda fold: progress(f"{name}, fold {fold}/{k}"),
    )
    return Evidence.concatenate(pieces).take(in_row_order(parts)), parts


@dataclass
class Calibrated:
    """A voter's fitted P(right) (voters.right.RightModel, thresholds included) and, per training question,
    its out-of-fold P(right), the fit that scored it and whether the voter's answer was right; and each fit's
    own out-of-fold P(right) on the questions it was fitted on (NaN elsewhere)."""

    model: RightModel
    probability: np.ndarray
    right: np.ndarray
    fits: np.ndarray
    by_fit: dict[str, np.ndarray]


def calibrate(
    arrays: VoteArrays, name: str, settings: VoteSettings, k: int, seed: int, progress: Progress | None = None
) -> Calibrated:
    """P(right) of the named candidate on the training `arrays` (voters.right: evidence out of fold over a
    seeded k-fold split), calibrated on it (`calibrate_rows`) for `settings.correctness`."""
    rows, parts = out_of_fold_evidence(arrays, name, settings, k, seed, progress)
    right = arrays.correctness[np.arange(len(rows)), rows.pick] >= 0.5
    return calibrate_rows(rows, right, parts, settings.correctness, k, seed)


def calibrate_rows(
    rows: Evidence,
    right: np.ndarray,
    parts: list[np.ndarray],
    correctness: str,
    k: int,
    seed: int,
    delta: float = DELTA,
) -> Calibrated:
    """Each feature set's logistic (voters.choice_evidence.ANSWERABLE_FITS) on the out-of-fold evidence `rows` that
    have its features, cross-fitted on the folds `parts` (positions in `rows`), and the thresholds of
    eor.pipeline.abstention at `delta` on each fit's out-of-fold probabilities."""
    fits: dict[str, RightFit] = {}
    by_fit: dict[str, np.ndarray] = {}
    probability, names = np.full(len(rows), np.nan), np.full(len(rows), "", dtype=object)
    for fit in ANSWERABLE_FITS:  # richest first: a question's out-of-fold P is the fit's that would score it
        keep = np.flatnonzero(has_features(rows, fit))
        if len(keep) < MIN_ROWS_PER_FOLD * k:
            continue
        groups, found = fit_right(rows.take(keep), right[keep], within(parts, keep, len(rows)), FITS[fit])
        chosen = [threshold.to_dict() for threshold in thresholds(found, right[keep], delta=delta)]
        fits[fit] = RightFit(fit, groups, len(keep), chosen, correctness, delta)
        by_fit[fit] = np.full(len(rows), np.nan)
        by_fit[fit][keep] = found
        fresh = keep[names[keep] == ""]
        probability[fresh], names[fresh] = found[np.searchsorted(keep, fresh)], fit
    model = RightModel(correctness, fits, len(rows), k, seed)
    return Calibrated(model, probability, np.asarray(right, dtype=bool), names.astype(str), by_fit)


def within(parts: list[np.ndarray], keep: np.ndarray, n: int) -> list[np.ndarray]:
    """The folds `parts` (positions among `n` rows) as positions among the rows `keep` (ascending)."""
    position = np.full(n, -1)
    position[keep] = np.arange(len(keep))
    return [position[np.intersect1d(part, keep)] for part in parts]
