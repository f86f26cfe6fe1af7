"""P(right): the probability that a voter's chosen answer is right, for every voter kind (beyond the paper), and
P(unanswerable): the probability that the corpus does not hold the answer at all.

Both read the evidence of the choice (voters.choice_evidence). P(right) = σ(a_g + w_g · x) on standardised
features x, a logistic regression (scikit-learn, L2, C = 1) per group g of questions: "all" for a voter that runs
every member; for a cascade (voters.cascade) also "early" (it stopped before its last step) and "last" (it ran
every member because no earlier step was confident: those questions are harder than their last step says).
"all" is fitted on every row and serves a group with fewer than MIN_GROUP rows.

**Fitted out of fold** (`fit_right`). The rows are one per training question, each from a voter fitted on the
other folds of a K-fold split (eor.learning.calibration's `out_of_fold_evidence`): the shipped logistic is fitted on
every row. The out-of-fold probabilities that abstention's thresholds are chosen on (eor.pipeline.abstention) are
cross-fitted on the same folds: a question's probability comes from a logistic fitted on the other folds' rows
and from the voter fitted on the other folds, so neither saw the question itself (the other rows' evidence came
from voters that did: the usual approximation of cross-fitting, as in cross-conformal prediction).

**A fit per feature set** (voters.choice_evidence.FITS), each fitted and given its thresholds by the same
procedure on the rows that have its features. A choice is scored by the richest fit whose features it has
(`RightModel.fit_names`), and what answers says which (`Result.probability_fit`, the bench report's
`selective.fits`); a choice that no fit covers (a weights file from before fits per feature set, given no
confidence) is refused with an error naming what is missing.

**Beyond the corpus** (`UnanswerableFit`; eor.learning.beyond_corpus fits both). A P(right) trained with questions
whose answer the corpus does not hold as well says so (`RightModel.unanswerable`: the share its thresholds hold
for, the questions of each kind) and holds P(unanswerable), which names the reason of a decline. One trained
without says that too, and its guarantee covers answerable questions only.

`RightModel` is those fits with what they were fitted on, each with the thresholds of eor.pipeline.abstention; the
weights file stores it in `meta.probability` for every voter kind (`to_dict`, `from_voter`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eor.core.errors import ConfigError, InputError
from voters.choice_evidence import (
    ALL,
    CONFIDENCE,
    FEATURES,
    FITS,
    GROUPS,
    RETRIEVAL,
    WITH_CONFIDENCE,
    WITH_RETRIEVAL,
    WITHOUT_CONFIDENCE,
    Evidence,
)
from voters.folds import cross_fit

#: a group with fewer training rows has no logistic of its own: ALL's (fitted on every row) serves it
MIN_GROUP = 30


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


def fit_logistic(
    rows: np.ndarray, right: np.ndarray, features: tuple[str, ...] = FEATURES, weight: np.ndarray | None = None
) -> Logistic:
    """scikit-learn's L2 logistic regression (C = 1) on the standardised `features` of rows of FEATURES, which
    must be known, each row weighted by `weight` (None: alike); one class (or none): a constant probability (the
    share right, kept within [0.001, 0.999])."""
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
    model = LogisticRegression(C=1.0, max_iter=2000).fit((x - mean) / scale, labels, sample_weight=weight)
    coef = tuple(float(c) for c in model.coef_[0])
    return Logistic(float(model.intercept_[0]), coef, tuple(map(float, mean)), tuple(map(float, scale)), features)


def fit_groups(
    rows: Evidence, right: np.ndarray, features: tuple[str, ...] = FEATURES, weight: np.ndarray | None = None
) -> dict[str, Logistic]:
    """ALL's logistic on every row, and one per other group with at least MIN_GROUP rows (rows weighted by
    `weight`, None: alike)."""
    right = np.asarray(right, dtype=bool)
    groups = {ALL: fit_logistic(rows.features, right, features, weight)}
    for name in sorted(set(rows.group) - {ALL}):
        mask = rows.group == name
        if mask.sum() >= MIN_GROUP:
            groups[str(name)] = fit_logistic(
                rows.features[mask], right[mask], features, None if weight is None else weight[mask]
            )
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
class Platt:
    """Platt scaling of a probability: σ(slope · logit P + intercept) (eor.learning.recalibration fits it on a few
    labelled questions of one's own)."""

    slope: float
    intercept: float

    @staticmethod
    def logit(p: Any) -> Any:
        p = np.clip(np.asarray(p, dtype=float), 1e-9, 1 - 1e-9)
        return _logit(p)

    def apply(self, p: Any) -> Any:
        """The rescaled probability of each of `p` (a float for a float)."""
        out = 1.0 / (1.0 + np.exp(-(self.slope * self.logit(p) + self.intercept)))
        return float(out) if np.ndim(out) == 0 else out

    def to_dict(self) -> dict[str, float]:
        return {"slope": self.slope, "intercept": self.intercept}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Platt:
        slope, intercept = float(data["slope"]), float(data["intercept"])
        if not (np.isfinite(slope) and np.isfinite(intercept)) or slope <= 0:
            raise ValueError("a Platt scaling needs a finite slope above 0 and a finite intercept")
        return cls(slope, intercept)


@dataclass(frozen=True)
class RightFit:
    """The P(right) of one feature set (FITS): a logistic per group, the training rows it was fitted on, and the
    abstention thresholds chosen on its out-of-fold probabilities (eor.pipeline.abstention.RiskThreshold dicts),
    for `correctness` at `delta` (what eor.pipeline.abstention reads); `platt`: the Platt scaling over the logistic
    that `eor calibrate` fitted on labelled questions of one's own (the thresholds then hold for the rescaled P)."""

    name: str
    groups: dict[str, Logistic]
    questions: int
    thresholds: list[dict[str, Any]]
    correctness: str
    delta: float | None
    platt: Platt | None = None

    def probability(self, rows: Evidence) -> np.ndarray:
        """P(right) of each row by its group's logistic, rescaled by `platt` where there is one."""
        p = apply_groups(self.groups, rows)
        return p if self.platt is None else np.asarray(self.platt.apply(p), dtype=float).reshape(len(p))

    def to_dict(self) -> dict[str, Any]:
        data = {
            "features": list(FITS[self.name]),
            "questions": self.questions,
            "groups": {group: model.to_dict() for group, model in self.groups.items()},
            "risk": {"procedure": "learn-then-test", "delta": self.delta, "thresholds": self.thresholds},
        }
        if self.platt is not None:
            data["platt"] = self.platt.to_dict()
        return data

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
        platt = None if data.get("platt") is None else Platt.from_dict(data["platt"])
        return cls(name, groups, int(data["questions"]), thresholds, correctness, delta, platt)


@dataclass(frozen=True)
class UnanswerableFit:
    """P(unanswerable): a logistic on `features` of voters.right fitted on `questions` rows of which a share
    `trained_share` could not be answered; read at the share `share` (`probability`); and out of fold, at that
    share, the share of the training questions it names unanswerable and how many of those were (`precision`)."""

    logistic: Logistic
    trained_share: float
    share: float
    questions: dict[str, int]
    named: float = 0.0
    precision: float | None = None

    def probability(self, rows: np.ndarray) -> np.ndarray:
        """P(unanswerable) of each row of voters.choice_evidence.FEATURES at the share `share` (Bayes' rule: the odds
        moved by the ratio of the share's odds to the training mix's); 0 at a share of 0."""
        p = np.clip(self.logistic.probability(rows), 1e-9, 1 - 1e-9)
        if self.share <= 0:
            return np.zeros(len(p))
        shift = _logit(self.share) - _logit(self.trained_share)
        return 1.0 / (1.0 + np.exp(-(_logit(p) + shift)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(self.logistic.features),
            "logistic": self.logistic.to_dict(),
            "trained_share": self.trained_share,
            "share": self.share,
            "questions": dict(self.questions),
            "out_of_fold": {"named": self.named, "precision": self.precision},
        }

    @classmethod
    def from_dict(cls, data: Any) -> UnanswerableFit:
        features = tuple(str(name) for name in data["features"])
        found = data.get("out_of_fold") or {}
        return cls(
            Logistic.from_dict(data["logistic"], features),
            float(data["trained_share"]),
            float(data["share"]),
            {str(k): int(v) for k, v in data["questions"].items()},
            float(found.get("named", 0.0)),
            None if found.get("precision") is None else float(found["precision"]),
        )


@dataclass
class RightModel:
    """A fitted P(right): a fit per feature set it was fitted for (RightFit, FITS), the correctness they predict,
    how they were fitted (seeded K-fold split) and, when questions the corpus cannot answer were among those it
    was fitted on, P(unanswerable) and what the thresholds hold for (`unanswerable`; None: answerable questions
    only). `recalibrated`: what `eor calibrate` rescaled its fits on (eor.learning.recalibration: how many labelled
    questions of each kind, the share, and the pool that answered them, which the thresholds then hold for)."""

    correctness: str
    fits: dict[str, RightFit]
    questions: int
    folds: int
    seed: int
    unanswerable: UnanswerableFit | None = None
    recalibrated: dict[str, Any] | None = None

    @property
    def beyond_corpus(self) -> bool:
        """Whether it was fitted with questions the corpus cannot answer (its thresholds cover a mix only where
        real no-corpus questions certified them: `RiskThreshold.share`)."""
        return self.unanswerable is not None

    @property
    def reads_retrieval(self) -> bool:
        """Whether a fit it holds, or P(unanswerable), reads the retrieval family (voters.relevance: worth computing
        for a choice)."""
        return self.unanswerable is not None or any(set(RETRIEVAL) & set(FITS[name]) for name in self.fits)

    def shipped(self) -> RightModel:
        """This P(right) as trained, before any rescaling `eor calibrate` fitted (each fit's `platt` left out)."""
        return dataclasses.replace(
            self, fits={name: dataclasses.replace(fit, platt=None) for name, fit in self.fits.items()}
        )

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
            out[mask] = self.fits[str(name)].probability(rows.take(np.flatnonzero(mask)))
        return out

    def unanswerable_of(self, rows: Evidence) -> float | None:
        """P(unanswerable) of the first row (a choice), or None without a P(unanswerable) or its features."""
        if self.unanswerable is None or not has_features(rows, WITH_RETRIEVAL)[0]:
            return None
        return float(self.unanswerable.probability(rows.features[:1])[0])

    def fit(self, name: str | None = None) -> RightFit:
        """The fit called `name` (None: the richest held): what eor.pipeline.abstention reads."""
        return self.fits[name] if name is not None else self.fits[next(n for n in FITS if n in self.fits)]

    def to_dict(self) -> dict[str, Any]:
        data = {
            "correctness": self.correctness,
            "fit": {"questions": self.questions, "folds": self.folds, "seed": self.seed, "out_of_fold": True},
            "fits": {name: fit.to_dict() for name, fit in self.fits.items()},
        }
        if self.unanswerable is not None:
            data["unanswerable"] = self.unanswerable.to_dict()
        if self.recalibrated is not None:
            data["recalibrated"] = dict(self.recalibrated)
        return data

    @classmethod
    def from_dict(cls, data: Any, source: str) -> RightModel:
        """From `to_dict`'s form, or the one fit (every feature, with confidence) of weights files made before
        fits per feature set."""
        try:
            correctness, fit = str(data["correctness"]), data["fit"]
            found = data["fits"] if "fits" in data else {WITH_CONFIDENCE: {**data, "questions": fit["questions"]}}
            fits = {str(name): RightFit.from_dict(str(name), d, correctness) for name, d in found.items()}
            beyond = data.get("unanswerable")
            unanswerable = None if beyond is None else UnanswerableFit.from_dict(beyond)
            recalibrated = data.get("recalibrated")
            if recalibrated is not None and not isinstance(recalibrated, dict):
                raise TypeError("recalibrated must be a mapping")
            model = cls(
                correctness,
                fits,
                int(fit["questions"]),
                int(fit["folds"]),
                int(fit["seed"]),
                unanswerable,
                recalibrated,
            )
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
        """The P(right) a loaded voter's weights file holds (`meta.probability`), else None: the one voters.loading
        built when it loaded the file (`right_`), else built from the voter's metadata."""
        if voter.right_ is not None:
            return voter.right_
        data = voter.metadata_.get("probability")
        return None if data is None else cls.from_dict(data, voter.source_ or "(in memory)")


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

    def fitted(train: np.ndarray) -> dict[str, Logistic]:
        return fit_groups(rows.take(train), right[train], features)

    def scored(groups: dict[str, Logistic], held: np.ndarray) -> None:
        out[held] = apply_groups(groups, rows.take(held))

    cross_fit(parts, np.arange(len(rows)), fitted, scored)
    return fit_groups(rows, right, features), out


def _logit(p: Any) -> Any:
    return np.log(p) - np.log1p(-p)
