"""P(right) that knows questions the corpus cannot answer (docs/abstention.md, "Beyond the corpus").

Training questions come in three kinds (`KINDS`):

- **answerable**: the voter's training records, whose answers the corpus holds;
- **ablated**: copies of them with their gold passages and every passage holding a gold answer withheld
  (eor.learning.ablation): they teach what an unanswerable question looks like, and certify nothing;
- **no corpus**: real questions whose answer the corpus does not hold (those set aside to learn from).

The voter is the one `eor train` chose and fitted on the answerable questions, unchanged. Its P(right) learns
what an unanswerable question looks like from the ablated copies (Kamath, Jia and Liang 2020: a calibrator that
has seen questions unlike the training ones; `taught_kinds`), and the real no-corpus questions certify: they teach
only when no ablated copy is given. It is fitted out of fold on folds where a question and its ablated copy fall
together (`mix_folds`): each question's evidence comes from the voter fitted on the answerable questions of the
other folds, and its out-of-fold probability, every kind's, from the logistic fitted on the other folds' rows of
the kinds that teach. The abstention thresholds hold for a mix with a share s of unanswerable questions
(eor.pipeline.abstention.mixed_risk_threshold): one test of the error among answered on the mix, from the answerable
and the real no-corpus questions at once, combined at s. Fitting on the ablated copies and certifying on the real
questions keeps the sample the test bounds out of the fit; cross-validation on the 1,566 NQ training questions
agreed (docs/abstention.md).

P(unanswerable), a logistic on the same evidence (without the reader's confidence) telling the answerable from
the unanswerable kind that teaches, names the reason of a decline: "the passages read do not seem to hold the
answer" where it reaches 1/2 at the share s (its odds moved from the training mix's share to s), else "not sure
enough".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eor.core.errors import InputError
from eor.learning.calibration import Calibrated
from eor.learning.crossval import Progress, VoteArrays, VoteSettings, build_candidate, vote_arrays
from eor.pipeline.abstention import ALPHAS, DEFAULT_SHARE, DELTA, Stratum, mixed_risk_threshold, thresholds
from eor.runs.run_data import RunData
from voters.choice_evidence import FITS, WITH_RETRIEVAL, Evidence
from voters.folds import cross_fit, fold_labels, in_row_order
from voters.right import (
    Logistic,
    RightFit,
    RightModel,
    UnanswerableFit,
    apply_groups,
    fit_groups,
    fit_logistic,
    has_features,
)

ANSWERABLE, ABLATED, NOCORPUS = "answerable", "ablated", "no corpus"
KINDS = (ANSWERABLE, ABLATED, NOCORPUS)
#: P(unanswerable)'s features: how well what was retrieved matches the question, and no reader confidence, so
#: that it serves every choice
UNANSWERABLE_FIT = WITH_RETRIEVAL
MIN_ROWS_PER_FOLD = 10


@dataclass
class Mix:
    """The training questions of every kind in one run (`data`: answerable first, then ablated, then no corpus),
    each row's kind and origin (an ablated copy's: the question it was made from)."""

    data: RunData
    kind: np.ndarray
    origin: list[str]

    def rows(self, kind: str) -> np.ndarray:
        return np.flatnonzero(self.kind == kind)


def mix_records(answerable: RunData, ablated: RunData | None, nocorpus: RunData | None) -> Mix:
    """The three kinds as one run (their members must be the same, in the same order)."""
    given = [(ANSWERABLE, answerable), (ABLATED, ablated), (NOCORPUS, nocorpus)]
    parts: list[tuple[str, RunData]] = [(kind, data) for kind, data in given if data is not None and data.questions]
    for kind, data in parts:
        if data.names != answerable.names:
            raise InputError(f"the {kind} records have members {data.names}, the training records {answerable.names}")
    ids = [i for _, data in parts for i in data.ids]
    if len(set(ids)) != len(ids):
        raise InputError("a question id repeats across the training, ablated and no-corpus records")
    merged = answerable
    for _, data in parts[1:]:
        merged = merged.concatenate(data)
    kinds = np.concatenate([np.full(data.questions, name, dtype=object) for name, data in parts]).astype(str)
    return Mix(merged, kinds, [origin for _, data in parts for origin in data.origin_ids])


def mix_folds(mix: Mix, k: int, seed: int) -> list[np.ndarray]:
    """K folds of the mix's rows: the answerable questions' seeded folds (`voters.folds.folds`, the voter's own),
    each ablated copy in its origin's fold (a seeded fold of its own when its origin is not among them), the
    no-corpus questions in seeded folds of their own."""
    fold_of = np.full(len(mix.kind), -1)
    answerable = mix.rows(ANSWERABLE)
    fold_of[answerable] = fold_labels(len(answerable), k, seed)
    by_id = {mix.data.ids[row]: int(fold_of[row]) for row in answerable}
    for kind in (ABLATED, NOCORPUS):
        rows = mix.rows(kind)
        own = fold_labels(len(rows), k, seed) if len(rows) >= k else np.arange(len(rows)) % k
        for position, row in enumerate(rows):
            fold_of[row] = by_id.get(mix.origin[row], int(own[position]))
    return [np.flatnonzero(fold_of == f) for f in range(k)]


def taught_kinds(kind: np.ndarray) -> tuple[str, ...]:
    """The kinds P(right) and P(unanswerable) are fitted on: the answerable and the ablated copies where there are
    any (the no-corpus questions then certify alone), else every kind there is."""
    present = set(np.asarray(kind).tolist())
    return (ANSWERABLE, ABLATED) if ABLATED in present else tuple(k for k in KINDS if k in present)


def cross_fitted(
    rows: Evidence,
    right: np.ndarray,
    parts: Sequence[np.ndarray],
    every: np.ndarray,
    taught: np.ndarray,
    fit: str,
    weigh: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[dict[str, Logistic], np.ndarray]:
    """(the logistic of every group of fit `fit` on the rows `taught`, the out-of-fold P(right) of the rows
    `every`): each fold's rows scored by the logistics fitted on the other folds' rows of `taught`; `weigh`: the
    weights of the rows a logistic is fitted on, given their positions (None: alike; e.g. `mix_weights`)."""

    def fitted(train: np.ndarray) -> dict[str, Logistic]:
        return fit_groups(rows.take(train), right[train], FITS[fit], None if weigh is None else weigh(train))

    p = np.full(len(rows), np.nan)

    def scored(groups: dict[str, Logistic], held: np.ndarray) -> None:
        out = np.intersect1d(every, held)
        p[out] = apply_groups(groups, rows.take(out))

    cross_fit(parts, taught, fitted, scored)
    return fitted(taught), p


def mix_weights(kind: np.ndarray, share: float) -> np.ndarray:
    """Row weights that make the unanswerable rows (ablated and no-corpus together) a share `share` of the whole
    and the answerable the rest, each kind's rows alike, averaging 1 (all 1 when a side has no row)."""
    unanswerable = np.asarray(kind) != ANSWERABLE
    n_u, n_a = int(unanswerable.sum()), int((~unanswerable).sum())
    if not n_u or not n_a:
        return np.ones(len(unanswerable))
    weight = np.where(unanswerable, share / n_u, (1 - share) / n_a)
    return weight * len(weight)


@dataclass
class MixCalibrated(Calibrated):
    """`Calibrated` over a mix: also each row's kind and out-of-fold P(unanswerable)."""

    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=str))
    unanswerable: np.ndarray = field(default_factory=lambda: np.zeros(0))


def mix_evidence(
    arrays: VoteArrays,
    mix: Mix,
    name: str,
    settings: VoteSettings,
    parts: Sequence[np.ndarray],
    progress: Progress | None,
) -> Evidence:
    """Each row's evidence from the named voter fitted on the answerable questions of the other folds."""

    def told(fold: int) -> None:
        if progress is not None:
            progress(f"{name}, fold {fold}/{len(parts)} (every kind of question)")

    pieces = cross_fit(
        parts,
        mix.rows(ANSWERABLE),
        lambda train: build_candidate(name, settings).fit(arrays, train),
        lambda candidate, held: candidate.evidence(arrays, held),
        told,
    )
    return Evidence.concatenate(pieces).take(in_row_order(parts))


def calibrate_mix(
    mix: Mix,
    name: str,
    settings: VoteSettings,
    k: int,
    seed: int,
    share: float = DEFAULT_SHARE,
    delta: float = DELTA,
    alphas: Sequence[float] = ALPHAS,
    progress: Progress | None = None,
) -> MixCalibrated:
    """The named voter's P(right) over the mix (see the module), each feature set's thresholds for the share
    `share` (mixed strata when the mix holds no-corpus questions; the answerable alone otherwise), and
    P(unanswerable)."""
    if not 0 <= share < 1:
        raise InputError(f"the unanswerable share must lie in [0, 1), got {share}")
    arrays = vote_arrays(mix.data, settings, retrieval=True)  # settings.rates: the answerable records' (below)
    parts = mix_folds(mix, k, seed)
    rows = mix_evidence(arrays, mix, name, settings, parts, progress)
    right = arrays.correctness[np.arange(len(rows)), rows.pick] >= 0.5
    return calibrate_mix_rows(rows, right, mix.kind, parts, share, settings.correctness, k, seed, delta, alphas)


def calibrate_mix_rows(
    rows: Evidence,
    right: np.ndarray,
    kind: np.ndarray,
    parts: Sequence[np.ndarray],
    share: float,
    correctness: str,
    k: int,
    seed: int,
    delta: float = DELTA,
    alphas: Sequence[float] = ALPHAS,
    answers: np.ndarray | None = None,
) -> MixCalibrated:
    """P(right) over the out-of-fold evidence `rows` of a mix (each row's `kind`; folds `parts`): each feature
    set's logistic fitted on the rows of the kinds that teach, cross-fitted, its thresholds for the share `share`
    at `delta`, and P(unanswerable). `answers`: the rows whose answers this P(right) speaks for (a cascade ending
    with the judge: those its steps stop at; None: every row); the others have no P(right) here, and count in the
    strata as never answered."""
    spoken = np.ones(len(rows), dtype=bool) if answers is None else np.asarray(answers, dtype=bool)
    fits: dict[str, RightFit] = {}
    by_fit: dict[str, np.ndarray] = {}
    probability, names = np.full(len(rows), np.nan), np.full(len(rows), "", dtype=object)
    teaches = np.isin(kind, taught_kinds(kind)) & spoken
    beyond = (kind != ANSWERABLE).any()
    for fit in FITS:
        every = np.flatnonzero(has_features(rows, fit))
        taught = every[teaches[every]]
        kinds = kind[taught]
        if len(taught) < MIN_ROWS_PER_FOLD * k or not (kinds == ANSWERABLE).any():
            continue
        if beyond and (kinds == ANSWERABLE).all():  # a fit that would see no unanswerable question is not made
            continue
        groups, found = cross_fitted(rows, right, parts, every, taught, fit)
        found[~spoken] = np.nan
        chosen = mix_thresholds(found[every], right[every], kind[every], share, delta, alphas)
        fits[fit] = RightFit(fit, groups, len(taught), chosen, correctness, delta)
        by_fit[fit] = found
        fresh = every[(names[every] == "") & spoken[every]]
        probability[fresh], names[fresh] = found[fresh], fit
    if not fits:
        raise InputError(
            f"P(right) beyond the corpus needs at least {MIN_ROWS_PER_FOLD * k} questions with the same features, "
            "answerable and not, for its fits; the records give fewer"
        )
    counts = {name: int((kind == name).sum()) for name in KINDS}
    unanswerable, oof = unanswerable_out_of_fold(rows, kind, parts, share, counts, spoken)
    model = RightModel(correctness, fits, len(rows), k, seed, unanswerable)
    return MixCalibrated(model, probability, right, names.astype(str), by_fit, kind, oof)


def mix_thresholds(
    found: np.ndarray, right: np.ndarray, kind: np.ndarray, share: float, delta: float, alphas: Sequence[float]
) -> list[dict[str, Any]]:
    """Each alpha's threshold: for the mix at `share` when there are no-corpus rows, else the answerable alone."""
    answerable = kind == ANSWERABLE
    if not (kind == NOCORPUS).any():
        return [t.to_dict() for t in thresholds(found[answerable], right[answerable], alphas, delta)]
    strata = Stratum(found[answerable], right[answerable]), Stratum(found[kind == NOCORPUS], right[kind == NOCORPUS])
    return [mixed_risk_threshold(*strata, alpha, share, delta).to_dict() for alpha in alphas]


def unanswerable_out_of_fold(
    rows: Evidence,
    kind: np.ndarray,
    parts: Sequence[np.ndarray],
    share: float,
    counts: dict[str, int],
    spoken: np.ndarray,
) -> tuple[UnanswerableFit | None, np.ndarray]:
    """P(unanswerable) fitted on the rows `spoken` for of the kinds that teach (`taught_kinds`) that have its
    features, and its out-of-fold values at `share` on every such row."""
    out = np.full(len(rows), np.nan)
    every = np.flatnonzero(has_features(rows, UNANSWERABLE_FIT) & spoken)
    keep = every[np.isin(kind[every], taught_kinds(kind))]  # fitted on the kinds that teach, scored on every kind
    label = kind[keep] != ANSWERABLE
    if not label.any() or label.all():
        return None, out
    features = FITS[UNANSWERABLE_FIT]
    trained = float(label.mean())

    def fold_fit(train: np.ndarray) -> UnanswerableFit:
        unanswerable = kind[train] != ANSWERABLE
        return UnanswerableFit(
            fit_logistic(rows.features[train], unanswerable, features), float(unanswerable.mean()), share, {}
        )

    def fold_scored(fold: UnanswerableFit, held: np.ndarray) -> None:
        scored = np.intersect1d(every, held)
        out[scored] = fold.probability(rows.features[scored])

    cross_fit(parts, keep, fold_fit, fold_scored)
    label = kind[every] != ANSWERABLE  # what it names, on every kind
    # what it names at the share s: its rates on each kind of question, weighted as the share weighs them
    named = out[every] >= 0.5
    caught, false_alarm = float(named[label].mean()), float(named[~label].mean())
    said = share * caught + (1 - share) * false_alarm
    precision = share * caught / said if said > 0 else None
    fitted = UnanswerableFit(
        fit_logistic(rows.features[keep], kind[keep] != ANSWERABLE, features), trained, share, counts, said, precision
    )
    return fitted, out
