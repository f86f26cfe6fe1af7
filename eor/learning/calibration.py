"""A voter candidate's P(right) on training records (voters.right), fitted out of fold, and the abstention
thresholds chosen on it (eor.pipeline.abstention): what `eor train` stores in a weights file's `meta.probability`.

Each training question's evidence comes from the candidate (eor.learning.crossval) fitted on the other folds of a
seeded K-fold split; the logistic of every group is fitted on every question's evidence, and the
out-of-fold probabilities that the thresholds are chosen on are cross-fitted on the same folds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eor.learning.crossval import Progress, VoteArrays, VoteSettings, build_candidate
from eor.pipeline.abstention import DELTA, thresholds
from voters.folds import fold_split
from voters.right import Evidence, RightModel, fit_right


def out_of_fold_evidence(
    arrays: VoteArrays, name: str, settings: VoteSettings, k: int, seed: int, progress: Progress | None = None
) -> tuple[Evidence, list[np.ndarray]]:
    """The evidence of the named candidate's choice for every question (voters.right), each from the candidate
    fitted on the other folds of a seeded K-fold split, in question order; and the held-out folds."""
    n = arrays.questions
    parts, pieces = [], []
    for fold, (train, held) in enumerate(fold_split(n, k, seed).split(), start=1):
        pieces.append(build_candidate(name, settings).fit(arrays, train).evidence(arrays, held))
        parts.append(np.asarray(held))
        if progress is not None:
            progress(f"{name}, fold {fold}/{k}")
    order = np.argsort(np.concatenate(parts), kind="stable")
    return Evidence.concatenate(pieces).take(order), parts


@dataclass
class Calibrated:
    """A voter's fitted P(right) (voters.right.RightModel, thresholds included) and, per training question,
    its out-of-fold P(right) and whether the voter's answer was right."""

    model: RightModel
    probability: np.ndarray
    right: np.ndarray


def calibrate(
    arrays: VoteArrays, name: str, settings: VoteSettings, k: int, seed: int, progress: Progress | None = None
) -> Calibrated:
    """P(right) of the named candidate on the training `arrays` (voters.right: evidence out of fold over a
    seeded k-fold split, the logistic cross-fitted on the same folds), and the thresholds of
    eor.pipeline.abstention on its out-of-fold probabilities, for `settings.correctness`."""
    rows, parts = out_of_fold_evidence(arrays, name, settings, k, seed, progress)
    right = arrays.correctness[np.arange(len(rows)), rows.pick] >= 0.5
    groups, probability = fit_right(rows, right, parts)
    chosen = [threshold.to_dict() for threshold in thresholds(probability, right)]
    model = RightModel(settings.correctness, groups, len(rows), k, seed, chosen, DELTA)
    return Calibrated(model, probability, right)
