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

and P(right) = σ(a_g + w_g · x) on standardised features x (an unknown confidence: the training mean), a
logistic regression (scikit-learn, L2, C = 1) per group g of questions: "all" for a voter that runs every
member; for a cascade (voters.cascade) also "early" (it stopped before its last step) and "last" (it ran every
member because no earlier step was confident: those questions are harder than their last step says). "all" is
fitted on every row and serves a group with fewer than MIN_GROUP rows.

**Fitted out of fold** (`fit_right`). The rows are one per training question, each from a voter fitted on the
other folds of a K-fold split (eor.learning.calibration's `out_of_fold_evidence`): the shipped logistic is fitted on
every row. The out-of-fold probabilities that abstention's thresholds are chosen on (eor.pipeline.abstention) are
cross-fitted on the same folds: a question's probability comes from a logistic fitted on the other folds' rows
and from the voter fitted on the other folds, so neither saw the question itself (the other rows' evidence came
from voters that did: the usual approximation of cross-fitting, as in cross-conformal prediction).

`RightModel` is that fitted logistic with what it was fitted on, and the thresholds of eor.pipeline.abstention; the
weights file stores it in `meta.probability` for every voter kind (`to_dict`, `from_voter`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    """σ(intercept + coef · (x − mean) / scale), NaN features at their training mean."""

    intercept: float
    coef: tuple[float, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]

    def probability(self, features: np.ndarray) -> np.ndarray:
        x = np.asarray(features, dtype=float).reshape(-1, len(self.coef))
        mean = np.asarray(self.mean)
        z = (np.where(np.isnan(x), mean, x) - mean) / np.asarray(self.scale)
        return 1.0 / (1.0 + np.exp(-(self.intercept + z @ np.asarray(self.coef))))

    def to_dict(self) -> dict[str, Any]:
        return {
            "intercept": self.intercept,
            **{key: dict(zip(FEATURES, values, strict=True)) for key, values in self._arrays().items()},
        }

    def _arrays(self) -> dict[str, tuple[float, ...]]:
        return {"coef": self.coef, "mean": self.mean, "scale": self.scale}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Logistic:
        arrays = {key: tuple(float(data[key][name]) for name in FEATURES) for key in ("coef", "mean", "scale")}
        if not all(np.isfinite(v).all() for v in arrays.values()) or min(arrays["scale"]) <= 0:
            raise ValueError("coefficients, means and scales must be finite, scales above 0")
        return cls(float(data["intercept"]), arrays["coef"], arrays["mean"], arrays["scale"])


def fit_logistic(features: np.ndarray, right: np.ndarray) -> Logistic:
    """scikit-learn's L2 logistic regression (C = 1) on standardised features (NaN: the column's mean); one
    class (or none): a constant probability (the share right, kept within [0.001, 0.999])."""
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(features, dtype=float).reshape(-1, len(FEATURES))
    labels = np.asarray(right, dtype=bool)
    known = ~np.isnan(x)
    mean = np.where(known.any(axis=0), np.nansum(x, axis=0) / np.maximum(known.sum(axis=0), 1), 0.0)
    x = np.where(known, x, mean)
    scale = x.std(axis=0) if len(x) else np.ones(len(FEATURES))
    scale[scale == 0] = 1.0
    if labels.all() or not labels.any():
        share = float(np.clip(labels.mean() if len(labels) else 0.5, 1e-3, 1 - 1e-3))
        zero = (0.0,) * len(FEATURES)
        return Logistic(float(np.log(share / (1 - share))), zero, tuple(map(float, mean)), tuple(map(float, scale)))
    model = LogisticRegression(C=1.0, max_iter=2000).fit((x - mean) / scale, labels)
    return Logistic(
        float(model.intercept_[0]),
        tuple(float(c) for c in model.coef_[0]),
        tuple(map(float, mean)),
        tuple(map(float, scale)),
    )


def fit_groups(rows: Evidence, right: np.ndarray) -> dict[str, Logistic]:
    """ALL's logistic on every row, and one per other group with at least MIN_GROUP rows."""
    right = np.asarray(right, dtype=bool)
    groups = {ALL: fit_logistic(rows.features, right)}
    for name in sorted(set(rows.group) - {ALL}):
        mask = rows.group == name
        if mask.sum() >= MIN_GROUP:
            groups[str(name)] = fit_logistic(rows.features[mask], right[mask])
    return groups


def apply_groups(groups: Mapping[str, Logistic], rows: Evidence) -> np.ndarray:
    """P(right) per row by its group's logistic, ALL's for a group without one."""
    out = np.zeros(len(rows))
    for name in set(rows.group):
        mask = rows.group == name
        out[mask] = groups.get(str(name), groups[ALL]).probability(rows.features[mask])
    return out


@dataclass
class RightModel:
    """A fitted P(right): a logistic per group, the correctness it predicts, how it was fitted, and the
    abstention thresholds chosen on its out-of-fold probabilities (eor.pipeline.abstention.RiskThreshold dicts)."""

    correctness: str
    groups: dict[str, Logistic]
    questions: int
    folds: int
    seed: int
    thresholds: list[dict[str, Any]] = field(default_factory=list)
    delta: float | None = None

    def probability(self, rows: Evidence) -> np.ndarray:
        return apply_groups(self.groups, rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "correctness": self.correctness,
            "features": list(FEATURES),
            "groups": {name: model.to_dict() for name, model in self.groups.items()},
            "fit": {"questions": self.questions, "folds": self.folds, "seed": self.seed, "out_of_fold": True},
            "risk": {"procedure": "learn-then-test", "delta": self.delta, "thresholds": self.thresholds},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str) -> RightModel:
        try:
            if list(data["features"]) != list(FEATURES):
                raise ValueError(f"features {data['features']} are not this eor's {list(FEATURES)}")
            groups = {str(name): Logistic.from_dict(d) for name, d in data["groups"].items()}
            fit, risk = data["fit"], data.get("risk") or {}
            model = cls(
                str(data["correctness"]),
                groups,
                int(fit["questions"]),
                int(fit["folds"]),
                int(fit["seed"]),
                [dict(row) for row in risk.get("thresholds") or []],
                None if risk.get("delta") is None else float(risk["delta"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"weights file {source!r}: its probability section is malformed: {exc!r}") from None
        if not all(_threshold_row(row) for row in model.thresholds):
            raise ConfigError(
                f"weights file {source!r}: each abstention threshold needs an alpha in (0, 1), a threshold in "
                "[0, 1] or null and its training coverage"
            )
        if ALL not in groups or any(name not in GROUPS for name in groups):
            raise ConfigError(
                f"weights file {source!r}: probability groups must include {ALL!r}, among {', '.join(GROUPS)}"
            )
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


def fit_right(rows: Evidence, right: np.ndarray, parts: Sequence[np.ndarray]) -> tuple[dict[str, Logistic], np.ndarray]:
    """(the logistic of every group fitted on every row, the cross-fitted out-of-fold P(right) per row):
    each part's probabilities from the logistics fitted on the other parts' rows."""
    right = np.asarray(right, dtype=bool)
    if len(right) != len(rows):
        raise InputError(f"{len(rows)} rows of evidence but {len(right)} labels")
    out = np.zeros(len(rows))
    every = np.arange(len(rows))
    for held in parts:
        train = np.setdiff1d(every, held)
        out[held] = apply_groups(fit_groups(rows.take(train), right[train]), rows.take(held))
    return fit_groups(rows, right), out
