"""P(right): the probability that a voter's chosen answer is right, for every voter kind (beyond the paper).

**Evidence of a vote.** Whatever the voter, its decision scores over the members that voted choose the
answer (argmax, ties to the first; a cascade's scores are those of the step it stopped at). What the choice
is judged on is the same for every voter, computed from the scores and what the voting members gave:

    score            the chosen answer's decision score z
    margin           z minus the best score of an answer that differs once normalised (0 when none does)
    alone            1 when no voting member gave another answer
    agreement        the share of voting members giving the chosen answer (normalised)
    distinct         the number of different answers over the number of voting members
    log_length       log(1 + tokens of the normalised chosen answer)
    refusal          the chosen answer declines ("sorry", "unknown", ...; voters.features)
    grounded         the chosen answer occurs in its member's own passages
    support          the share of voting members whose passages hold the chosen answer
    conf:mean, conf:min, conf:margin       the reader's confidence in the chosen answer (eor.core.confidence):
                     mean and minimum token log-probability, the first token's margin
    conf:agreeing_best, conf:agreeing_mean the best and the mean of conf:mean over the members giving it

and P(right) = σ(a_g + w_g · x) on standardised features x, a logistic regression (scikit-learn, L2, C = 1) per
group g of questions: "all" for a voter that runs every member; for a cascade (voters.cascade) also "early" (it
stopped before its last step) and "last" (it ran every member because no earlier step was confident: those
questions are harder than their last step says). "all" is fitted on every row and serves a group with fewer
than MIN_GROUP rows.

**Fitted out of fold** (`fit_right`). The rows are one per training question, each from a voter fitted on the
other folds of a K-fold split (eor.learning.calibration's `out_of_fold_evidence`): the shipped logistic is fitted on
every row. The out-of-fold probabilities that abstention's thresholds are chosen on (eor.pipeline.abstention) are
cross-fitted on the same folds: a question's probability comes from a logistic fitted on the other folds' rows
and from the voter fitted on the other folds, so neither saw the question itself (the other rows' evidence came
from voters that did: the usual approximation of cross-fitting, as in cross-conformal prediction).

**A fit per feature set** (`FITS`). Records made before the reader's confidence was recorded, and a reader that
reports none (an OpenAI-compatible server without log-probabilities), give a choice without the conf features.
No feature is filled in: P(right) holds a fit for each feature set it may meet, each fitted and given its
thresholds by the same procedure on the rows that have its features: "confidence" (every feature, on the rows
whose chosen answer has the reader's confidence) and "no confidence" (the conf features left out, on every row).
A choice is scored by the richest fit whose features it has (`RightModel.fit_names`), and what answers says
which (`Result.probability_fit`, the bench report's `selective.fits`); a choice that no fit covers (a weights
file from before fits per feature set, given no confidence) is refused with an error naming what is missing.

`RightModel` is those fits with what they were fitted on, each with the thresholds of eor.pipeline.abstention; the
weights file stores it in `meta.probability` for every voter kind (`to_dict`, `from_voter`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eor.core.answers import contains, normalize_answer
from eor.core.errors import ConfigError, InputError
from voters.batch import VoteBatch
from voters.features import is_refusal
from voters.scoring import choose

#: the features of a vote's choice, in order (module docstring)
FEATURES = (
    "score",
    "margin",
    "alone",
    "agreement",
    "distinct",
    "log_length",
    "refusal",
    "grounded",
    "support",
    "conf:mean",
    "conf:min",
    "conf:margin",
    "conf:agreeing_best",
    "conf:agreeing_mean",
)
#: the reader's confidence in the chosen answer and in the answers agreeing with it
CONFIDENCE = ("conf:mean", "conf:min", "conf:margin", "conf:agreeing_best", "conf:agreeing_mean")
#: the feature sets a P(right) is fitted for, richest first: a choice is scored by the first whose features it has
WITH_CONFIDENCE, WITHOUT_CONFIDENCE = "confidence", "no confidence"
FITS = {WITH_CONFIDENCE: FEATURES, WITHOUT_CONFIDENCE: tuple(f for f in FEATURES if f not in CONFIDENCE)}
#: the group of a voter that runs every member, and a cascade's two groups
ALL, EARLY, LAST = "all", "early", "last"
GROUPS = (ALL, EARLY, LAST)
#: a group with fewer training rows has no logistic of its own: ALL's (fitted on every row) serves it
MIN_GROUP = 30

Texts = Sequence[str]


@dataclass(frozen=True)
class Evidence:
    """Per question: the chosen member's position, the features of the choice (Q, len(FEATURES); NaN where the
    reader's confidence is unknown) and the group (ALL, EARLY or LAST)."""

    pick: np.ndarray
    features: np.ndarray
    group: np.ndarray

    def __len__(self) -> int:
        return len(self.pick)

    def take(self, rows: np.ndarray) -> Evidence:
        return Evidence(self.pick[rows], self.features[rows], self.group[rows])

    @staticmethod
    def concatenate(parts: Sequence[Evidence]) -> Evidence:
        width = len(FEATURES)
        return Evidence(
            np.concatenate([p.pick for p in parts]).astype(int),
            np.concatenate([p.features.reshape(-1, width) for p in parts]),
            np.concatenate([p.group for p in parts]).astype(str),
        )


def evidence(
    scores: np.ndarray,
    answers: Sequence[Texts],
    passages: Sequence[Sequence[Texts]],
    confidence: Sequence[Sequence[Mapping[str, Any] | None]] | None = None,
    group: str | Sequence[str] = ALL,
    pick: Sequence[int] | None = None,
) -> Evidence:
    """The evidence of each question's choice: decision scores (Q, M) over the members' `answers` (Q, M),
    their `passages` (Q, M, texts) and the reader's `confidence` summaries (eor.core.confidence; None: unknown).
    Members with a score of −inf (dropped by their weight, or not run) are not in the vote. `pick`: the
    chosen positions when the voter chose otherwise than the argmax of `scores` (ties to the first)."""
    values = np.asarray(scores, dtype=float).reshape(len(answers), -1)
    chosen = choose(values) if pick is None else np.asarray(pick, dtype=int)
    rows = [
        _row(values[q], answers[q], passages[q], None if confidence is None else confidence[q], int(chosen[q]))
        for q in range(len(answers))
    ]
    groups = np.broadcast_to(np.asarray(group, dtype=object), (len(answers),)).astype(str)
    return Evidence(chosen, np.array(rows, dtype=float).reshape(len(answers), len(FEATURES)), groups)


def _row(
    scores: np.ndarray,
    answers: Texts,
    passages: Sequence[Texts],
    confidence: Sequence[Mapping[str, Any] | None] | None,
    pick: int,
) -> list[float]:
    """The features of one question's choice (module docstring)."""
    voting = [m for m in range(len(answers)) if np.isfinite(scores[m]) or m == pick]
    normal = {m: normalize_answer(answers[m]) for m in voting}
    agreeing = [m for m in voting if normal[m] == normal[pick]]
    rivals = [scores[m] for m in voting if normal[m] != normal[pick] and np.isfinite(scores[m])]
    top = float(scores[pick]) if np.isfinite(scores[pick]) else 0.0
    tokens = normal[pick].split()
    found = [bool(tokens) and contains("\n".join(passages[m]), answers[pick]) == 1.0 for m in voting]
    known = [dict(confidence[m] or {}) if confidence is not None else {} for m in range(len(answers))]
    own = known[pick]
    agreeing_conf = [float(known[m]["mean_logprob"]) for m in agreeing if known[m].get("mean_logprob") is not None]
    return [
        top,
        top - max(rivals) if rivals else 0.0,
        float(not rivals),
        len(agreeing) / len(voting),
        len(set(normal.values())) / len(voting),
        math.log1p(len(tokens)),
        float(is_refusal(answers[pick])),
        float(bool(tokens) and contains("\n".join(passages[pick]), answers[pick]) == 1.0),
        sum(found) / len(voting),
        _number(own.get("mean_logprob")),
        _number(own.get("min_logprob")),
        _number(own.get("first_margin")),
        max(agreeing_conf) if agreeing_conf else math.nan,
        sum(agreeing_conf) / len(agreeing_conf) if agreeing_conf else math.nan,
    ]


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def choice_evidence(voter: Any, X: VoteBatch) -> Evidence:
    """The evidence of a fitted voter's choices on batch X (recorded answers of every member, voters.batch):
    from the scores and groups of its `vote_scores` where it has one (a cascade: the step it stops at), else
    from its decision function (group ALL); the features read X's passages and the reader's confidence."""
    if X.passages is None:
        raise InputError("the evidence of a vote reads each member's passages: give them (passages=...)")
    own = getattr(voter, "vote_scores", None)
    if own is not None:
        scores, groups, picks = own(X)
        return evidence(scores, X.answers, X.passages, X.confidence, groups, picks)
    return evidence(voter.decision_function(X), X.answers, X.passages, X.confidence)


@dataclass(frozen=True)
class Logistic:
    """σ(intercept + coef · (x − mean) / scale) on the named `features` of a row of FEATURES."""

    intercept: float
    coef: tuple[float, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    features: tuple[str, ...] = FEATURES

    def probability(self, rows: np.ndarray) -> np.ndarray:
        """P per row of FEATURES (Q, len(FEATURES)); the logistic's own features must be known."""
        x = np.asarray(rows, dtype=float).reshape(-1, len(FEATURES))[:, _columns(self.features)]
        if np.isnan(x).any():
            raise InputError("a row lacks a feature its P(right) fit was fitted on (RightModel.fit_names chooses)")
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return 1.0 / (1.0 + np.exp(-(self.intercept + z @ np.asarray(self.coef))))

    def to_dict(self) -> dict[str, Any]:
        arrays = {"coef": self.coef, "mean": self.mean, "scale": self.scale}
        return {
            "intercept": self.intercept,
            **{key: dict(zip(self.features, values, strict=True)) for key, values in arrays.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], features: tuple[str, ...]) -> Logistic:
        arrays = {key: tuple(float(data[key][name]) for name in features) for key in ("coef", "mean", "scale")}
        if not all(np.isfinite(v).all() for v in arrays.values()) or min(arrays["scale"]) <= 0:
            raise ValueError("coefficients, means and scales must be finite, scales above 0")
        return cls(float(data["intercept"]), arrays["coef"], arrays["mean"], arrays["scale"], features)


def _columns(features: Sequence[str]) -> list[int]:
    return [FEATURES.index(name) for name in features]


def fit_logistic(rows: np.ndarray, right: np.ndarray, features: tuple[str, ...] = FEATURES) -> Logistic:
    """scikit-learn's L2 logistic regression (C = 1) on the standardised `features` of rows of FEATURES, which
    must be known; one class (or none): a constant probability (the share right, kept within [0.001, 0.999])."""
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(rows, dtype=float).reshape(-1, len(FEATURES))[:, _columns(features)]
    if np.isnan(x).any():
        raise InputError("P(right) is fitted on rows that have its features (fit_right keeps them)")
    labels = np.asarray(right, dtype=bool)
    mean = x.mean(axis=0) if len(x) else np.zeros(len(features))
    scale = x.std(axis=0) if len(x) else np.ones(len(features))
    scale[scale == 0] = 1.0
    if labels.all() or not labels.any():
        share = float(np.clip(labels.mean() if len(labels) else 0.5, 1e-3, 1 - 1e-3))
        zero = (0.0,) * len(features)
        intercept = float(np.log(share / (1 - share)))
        return Logistic(intercept, zero, tuple(map(float, mean)), tuple(map(float, scale)), features)
    model = LogisticRegression(C=1.0, max_iter=2000).fit((x - mean) / scale, labels)
    coef = tuple(float(c) for c in model.coef_[0])
    return Logistic(float(model.intercept_[0]), coef, tuple(map(float, mean)), tuple(map(float, scale)), features)


def fit_groups(rows: Evidence, right: np.ndarray, features: tuple[str, ...] = FEATURES) -> dict[str, Logistic]:
    """ALL's logistic on every row, and one per other group with at least MIN_GROUP rows."""
    right = np.asarray(right, dtype=bool)
    groups = {ALL: fit_logistic(rows.features, right, features)}
    for name in sorted(set(rows.group) - {ALL}):
        mask = rows.group == name
        if mask.sum() >= MIN_GROUP:
            groups[str(name)] = fit_logistic(rows.features[mask], right[mask], features)
    return groups


def apply_groups(groups: Mapping[str, Logistic], rows: Evidence) -> np.ndarray:
    """P(right) per row by its group's logistic, ALL's for a group without one."""
    out = np.zeros(len(rows))
    for name in set(rows.group):
        mask = rows.group == name
        out[mask] = groups.get(str(name), groups[ALL]).probability(rows.features[mask])
    return out


def has_features(rows: Evidence, name: str) -> np.ndarray:
    """Per row: whether it has every feature of fit `name` (FITS)."""
    return ~np.isnan(rows.features[:, _columns(FITS[name])]).any(axis=1)


@dataclass(frozen=True)
class RightFit:
    """The P(right) of one feature set (FITS): a logistic per group, the training rows it was fitted on, and the
    abstention thresholds chosen on its out-of-fold probabilities (eor.pipeline.abstention.RiskThreshold dicts),
    for `correctness` at `delta` (what eor.pipeline.abstention reads)."""

    name: str
    groups: dict[str, Logistic]
    questions: int
    thresholds: list[dict[str, Any]]
    correctness: str
    delta: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(FITS[self.name]),
            "questions": self.questions,
            "groups": {group: model.to_dict() for group, model in self.groups.items()},
            "risk": {"procedure": "learn-then-test", "delta": self.delta, "thresholds": self.thresholds},
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any], correctness: str) -> RightFit:
        if name not in FITS:
            raise ValueError(f"fit {name!r} is not among this eor's: {', '.join(FITS)}")
        if list(data["features"]) != list(FITS[name]):
            raise ValueError(f"fit {name!r} has features {data['features']}, not this eor's {list(FITS[name])}")
        groups = {str(group): Logistic.from_dict(d, FITS[name]) for group, d in data["groups"].items()}
        risk = data.get("risk") or {}
        delta = None if risk.get("delta") is None else float(risk["delta"])
        thresholds = [dict(row) for row in risk.get("thresholds") or []]
        return cls(name, groups, int(data["questions"]), thresholds, correctness, delta)


@dataclass
class RightModel:
    """A fitted P(right): a fit per feature set it was fitted for (RightFit, FITS), the correctness they predict
    and how they were fitted (seeded K-fold split)."""

    correctness: str
    fits: dict[str, RightFit]
    questions: int
    folds: int
    seed: int

    def fit_names(self, rows: Evidence) -> np.ndarray:
        """Per row, the fit that scores it: the richest this model holds whose features the row has. InputError
        naming what is missing when a row has the features of none."""
        names = np.full(len(rows), "", dtype=object)
        for name in FITS:
            if name in self.fits:
                names[(names == "") & has_features(rows, name)] = name
        if (names == "").any():
            lacking = sorted(set(CONFIDENCE) - set(FITS[WITHOUT_CONFIDENCE]))
            raise InputError(
                f"this P(right) was fitted only with the reader's confidence ({', '.join(self.fits)}), and "
                f"{int((names == '').sum())} of {len(rows)} choices lack it ({', '.join(lacking)}): records made "
                "before confidence was recorded, or a reader that reports none; train the voter again with this eor "
                "(its P(right) then holds a fit without confidence) or answer without a risk"
            )
        return names.astype(str)

    def probability(self, rows: Evidence, names: np.ndarray | None = None) -> np.ndarray:
        """P(right) per row by the fit `names` gives it (default: `fit_names`)."""
        names = self.fit_names(rows) if names is None else names
        out = np.zeros(len(rows))
        for name in set(names):
            mask = names == name
            out[mask] = apply_groups(self.fits[str(name)].groups, rows.take(np.flatnonzero(mask)))
        return out

    def fit(self, name: str | None = None) -> RightFit:
        """The fit called `name` (None: the richest held): what eor.pipeline.abstention reads."""
        return self.fits[name] if name is not None else self.fits[next(n for n in FITS if n in self.fits)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "correctness": self.correctness,
            "fit": {"questions": self.questions, "folds": self.folds, "seed": self.seed, "out_of_fold": True},
            "fits": {name: fit.to_dict() for name, fit in self.fits.items()},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str) -> RightModel:
        """From `to_dict`'s form, or the one fit (every feature, with confidence) of weights files made before
        fits per feature set."""
        try:
            correctness, fit = str(data["correctness"]), data["fit"]
            found = data["fits"] if "fits" in data else {WITH_CONFIDENCE: {**data, "questions": fit["questions"]}}
            fits = {str(name): RightFit.from_dict(str(name), d, correctness) for name, d in found.items()}
            model = cls(correctness, fits, int(fit["questions"]), int(fit["folds"]), int(fit["seed"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"weights file {source!r}: its probability section is malformed: {exc!r}") from None
        for one in fits.values():
            if not all(_threshold_row(row) for row in one.thresholds):
                raise ConfigError(
                    f"weights file {source!r}: each abstention threshold needs an alpha in (0, 1), a threshold in "
                    "[0, 1] or null and its training coverage"
                )
            if ALL not in one.groups or any(name not in GROUPS for name in one.groups):
                raise ConfigError(
                    f"weights file {source!r}: probability groups must include {ALL!r}, among {', '.join(GROUPS)}"
                )
        if not fits:
            raise ConfigError(f"weights file {source!r}: its probability section holds no fit")
        return model

    @classmethod
    def from_voter(cls, voter: Any) -> RightModel | None:
        """The P(right) a loaded voter's weights file holds (`meta.probability`), else None."""
        data = (getattr(voter, "metadata_", None) or {}).get("probability")
        return None if data is None else cls.from_dict(data, getattr(voter, "source_", "(in memory)"))


def _threshold_row(row: Mapping[str, Any]) -> bool:
    alpha, threshold, coverage = row.get("alpha"), row.get("threshold"), row.get("coverage")
    number = (int, float)
    return (
        isinstance(alpha, number)
        and 0 < alpha < 1
        and (threshold is None or (isinstance(threshold, number) and 0 <= threshold <= 1))
        and isinstance(coverage, number)
        and 0 <= coverage <= 1
    )


def fit_right(
    rows: Evidence, right: np.ndarray, parts: Sequence[np.ndarray], features: tuple[str, ...] = FEATURES
) -> tuple[dict[str, Logistic], np.ndarray]:
    """(the logistic of every group on `features` fitted on every row, the cross-fitted out-of-fold P(right)
    per row): each part's probabilities from the logistics fitted on the other parts' rows."""
    right = np.asarray(right, dtype=bool)
    if len(right) != len(rows):
        raise InputError(f"{len(rows)} rows of evidence but {len(right)} labels")
    out = np.zeros(len(rows))
    every = np.arange(len(rows))
    for held in parts:
        train = np.setdiff1d(every, held)
        out[held] = apply_groups(fit_groups(rows.take(train), right[train], features), rows.take(held))
    return fit_groups(rows, right, features), out
