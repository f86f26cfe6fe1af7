"""Weights files of each voter kind: one codec per kind turns a fitted voter into its weights-file document
(voters.weights_file: the format, its header and the member order) and back. The classes hold no file format;
`save_voter` and `voter_from_document` (what voters.loading.load_voter reads a file with) are the one way.

eor's kinds have their codecs here: `paper` (voters.voter.Voter: its weights, pooling and hyper-parameters),
`selector` (voters.selector.AnswerSelector: feature names, standardisation and coefficients, plain numbers),
`cascade` (voters.cascade.Cascade: every step's members, selector document and calibration, the threshold, the
operating points and the members' costs) and `judge` (voters.judge_selector.JudgeVoter: its fits, each with its
P(right), P(unanswerable) and thresholds). Every shipped weights file saves again to its own bytes
(tests/test_voter_contract.py). A kind another package registers (voters.loading.register_voter_kind)
keeps its own `save` and `from_document` (voters.protocol.SimpleVoter writes both): `ClassCodec`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from eor.core.errors import ConfigError, InputError
from voters.cascade import Cascade, CascadeStep
from voters.cascade_fit import Calibration
from voters.cascade_points import OperatingPoint
from voters.features import BASE_FEATURES, CONFIDENCE_FEATURES, PER_MEMBER, feature_names
from voters.judge_selector import JudgeSelector, JudgeVoter
from voters.nelder_mead import Weights
from voters.pooling import POOLINGS
from voters.selector import AnswerSelector
from voters.voter import Voter
from voters.weights_file import header, member_order, write_document

__all__ = [
    "CODECS",
    "ClassCodec",
    "Codec",
    "codec_for",
    "document_of",
    "judge_fit_document",
    "judge_fit_from_document",
    "save_voter",
    "voter_from_document",
]


class Codec(Protocol):
    def save(self, voter: Any, path: str | Path, **meta: Any) -> Path:
        """Write the fitted voter's weights file, `meta` added to its metadata."""
        ...

    def read(self, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Any:
        """The fitted voter of a weights-file document, its members in the order of `members` if given."""
        ...


class DocumentCodec:
    """A codec of eor's: `document(voter, **meta)` (a subclass's) is what `save` writes."""

    def document(self, voter: Any, **meta: Any) -> dict[str, Any]:
        raise NotImplementedError

    def save(self, voter: Any, path: str | Path, **meta: Any) -> Path:
        return write_document(path, self.document(voter, **meta))

    def read(self, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Any:
        raise NotImplementedError


class PaperCodec(DocumentCodec):
    """The paper's voter: its weights, pooling, scores and hyper-parameters (in `__init__`'s order)."""

    def document(self, voter: Voter, **meta: Any) -> dict[str, Any]:
        voter._check_fitted()
        meta.setdefault("objective", voter.correctness)
        # the hyper-parameters in the order of __init__'s signature, as weights files have always listed them
        values = voter.get_params(deep=False)
        params = {name: values[name] for name in inspect.signature(Voter.__init__).parameters if name != "self"}
        params["metrics"] = list(voter.metrics)
        params["members"] = list(voter.members) if voter.members is not None else None
        params["cache_dir"] = str(voter.cache_dir) if voter.cache_dir is not None else None
        return {
            **header(voter.kind, voter.members_, voter.metric_names_),
            "pooling": voter.pooling_,
            "metric_weights": [float(w) for w in voter.metric_weights_],
            "retriever_weights": [float(w) for w in voter.retriever_weights_],
            "grounding_weight": voter.grounding_weight_,
            "active_members": voter.active_members_,
            "train_score": voter.train_score_,
            "dev_score": voter.dev_score_,
            "params": params,
            "meta": {**voter.metadata_, **meta},
        }

    def read(self, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Voter:
        if document.get("voter", Voter.kind) != Voter.kind:
            raise ConfigError(
                f"weights file {source!r} holds a {document.get('voter')!r} voter: load it with voters.load_voter"
            )
        try:
            params = dict(document["params"])
            metric_weights = [float(w) for w in document["metric_weights"]]
            retriever_weights = [float(w) for w in document["retriever_weights"]]
            pooling = str(document["pooling"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"weights file {source!r} is incomplete or malformed: {exc!r}") from None
        order = member_order(document.get("members"), members, len(retriever_weights), source)
        params["metrics"] = tuple(params.get("metrics", ()))
        if members is not None:
            params["members"] = list(members)
        voter = Voter()
        voter.set_params(**params)
        voter._check_params()
        if len(metric_weights) != len(voter.metrics) or pooling not in POOLINGS:
            raise ConfigError(f"weights file {source!r} is inconsistent: metric weights or pooling do not match")
        grounding = document.get("grounding_weight")
        weights = Weights(
            np.array(metric_weights),
            np.array(retriever_weights)[order],
            None if grounding is None else float(grounding),
            pooling,
        )
        voter.set_weights(weights)
        voter.train_score_ = document.get("train_score")
        voter.dev_score_ = document.get("dev_score")
        voter.metadata_ = dict(document.get("meta") or {})
        return voter


class SelectorCodec(DocumentCodec):
    """The answer selector: its feature names, standardisation (mean and scale), coefficients and intercept."""

    def document(self, voter: AnswerSelector, **meta: Any) -> dict[str, Any]:
        voter._check_fitted()
        meta.setdefault("objective", voter.correctness)
        return {
            **header(voter.kind, voter.members_, voter.metric_names_),
            "feature_names": voter.feature_names_,
            "mean": [float(v) for v in voter.mean_],
            "scale": [float(v) for v in voter.scale_],
            "coefficients": [float(v) for v in voter.coef_],
            "intercept": float(voter.intercept_),
            "train_score": voter.train_score_,
            "params": _selector_params(voter),
            "meta": {**voter.metadata_, **meta},
        }

    def read(self, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> AnswerSelector:
        """Its member features in the order of `members` when given."""
        try:
            params = dict(document["params"])
            names = [str(name) for name in document["feature_names"]]
            arrays = [np.asarray(document[key], dtype=float) for key in ("mean", "scale", "coefficients")]
            intercept = float(document["intercept"])
            file_members = [str(name) for name in document["members"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"weights file {source!r} is incomplete or malformed: {exc!r}") from None
        if any(a.shape != (len(names),) or not np.all(np.isfinite(a)) for a in arrays) or np.any(arrays[1] <= 0):
            raise ConfigError(f"weights file {source!r} is inconsistent: feature arrays do not match their names")
        selector = AnswerSelector(
            metrics=tuple(params.get("metrics", ())),
            C=params.get("C", 1.0),
            correctness=params.get("correctness", "em"),
            metric_params=params.get("metric_params"),
        )
        selector._check_params()
        order = member_order(file_members, members, len(file_members), source)
        expected = feature_names(selector.metrics, file_members, CONFIDENCE_FEATURES[0] in names)
        if names != expected:
            raise ConfigError(f"weights file {source!r} lists features this eor does not compute")
        selector.feature_names_ = names
        selector.mean_, selector.scale_, selector.coef_ = arrays
        selector.intercept_ = intercept
        selector.members_ = file_members
        if members is not None:  # the pool's order: permute the member one-hot features
            _reorder(selector, order, list(members))
        selector.members = list(selector.members_)
        selector.n_members_ = len(selector.members_)
        selector.metric_names_ = list(selector.metrics)
        selector.train_score_ = document.get("train_score")
        selector.metadata_ = dict(document.get("meta") or {})
        return selector


def _selector_params(voter: AnswerSelector | Cascade) -> dict[str, Any]:
    """The hyper-parameters an answer selector's file lists, which a cascade's lists first (each step is one)."""
    return {
        "metrics": list(voter.metrics),
        "C": float(voter.C),
        "correctness": voter.correctness,
        "metric_params": voter.metric_params,
    }


def _reorder(selector: AnswerSelector, order: list[int], members: list[str]) -> None:
    """Permute the per-member features (voters.features.PER_MEMBER) of a loaded selector to `members`' order."""
    width = len(selector.members_)
    base = len(selector.metrics) + len(BASE_FEATURES)
    after = base + len(PER_MEMBER) * width  # the confidence features, when there are
    columns = list(range(base)) + [base + b * width + i for b in range(len(PER_MEMBER)) for i in order]
    columns += list(range(after, len(selector.feature_names_)))
    selector.feature_names_ = [selector.feature_names_[c] for c in columns]
    selector.mean_, selector.scale_, selector.coef_ = (
        a[columns] for a in (selector.mean_, selector.scale_, selector.coef_)
    )
    selector.members_ = members


class CascadeCodec(DocumentCodec):
    """The cascade: its description (voters.accounts), every step's selector document and calibration, and its
    hyper-parameters."""

    def document(self, voter: Cascade, **meta: Any) -> dict[str, Any]:
        voter._check_fitted()
        meta.setdefault("objective", voter.correctness)
        return {
            **header(voter.kind, voter.members_, voter.metric_names_),
            **{key: value for key, value in voter.describe().items() if key not in ("voter", "metrics", "steps")},
            "steps": [
                {
                    "members": s.members,
                    "calibration": s.calibration.to_dict(),
                    "selector": SELECTOR.document(s.selector),
                }
                for s in voter.steps_
            ],
            "train_score": voter.train_score_,
            "params": {
                **_selector_params(voter),
                "max_loss": voter.max_loss,
                "budget": voter.budget,
                "stop_on": voter.stop_on,
                "folds": voter.folds,
                "seed": voter.seed,
            },
            "meta": {**voter.metadata_, **meta},
        }

    def read(self, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Cascade:
        try:
            params = dict(document["params"])
            file_members = [str(name) for name in document["members"]]
            order = [str(name) for name in document["order"]]
            threshold = document["threshold"]
            steps = [
                CascadeStep(
                    [str(name) for name in step["members"]],
                    SELECTOR.read(step["selector"], source),
                    Calibration(**{key: float(value) for key, value in step["calibration"].items()}),
                )
                for step in document["steps"]
            ]
            points = [_point(point) for point in document["operating_points"]]
            chosen = _point(document["chosen"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"weights file {source!r} is incomplete or malformed: {exc!r}") from None
        cascade = Cascade(**params)
        cascade._check_params()
        _check_steps(steps, order, file_members, source)
        positions = member_order(file_members, members, len(file_members), source)
        cascade.members_ = [file_members[i] for i in positions]
        cascade.members = list(cascade.members_)
        cascade.n_members_ = len(cascade.members_)
        cascade.metric_names_ = list(cascade.metrics)
        cascade.order_ = order
        cascade.stop_on_ = str(document.get("stop_on", "agreement"))
        cascade.stop_targets_ = dict(document.get("stop_targets") or {})
        cascade.steps_ = steps
        cascade.threshold_ = float("inf") if threshold is None else float(threshold)
        cascade.operating_points_ = points
        cascade.chosen_point_ = chosen
        cascade.full_accuracy_ = float(document["full_accuracy"])
        cascade.full_cost_ = float(document["full_cost"])
        cascade.cost_unit_ = str(document.get("cost_unit", "seconds"))
        cascade.member_costs_ = {str(k): float(v) for k, v in dict(document.get("member_costs") or {}).items()}
        cascade.train_score_ = document.get("train_score")
        cascade.metadata_ = dict(document.get("meta") or {})
        return cascade


def _point(entry: Mapping[str, Any]) -> OperatingPoint:
    threshold = entry["threshold"]
    return OperatingPoint(
        float("inf") if threshold is None else float(threshold),
        float(entry["accuracy"]),
        float(entry["loss"]),
        float(entry["cost"]),
        float(entry["cost_p90"]),
        float(entry["members_run"]),
    )


def _check_steps(steps: list[CascadeStep], order: list[str], members: list[str], source: str) -> None:
    """The steps must be the prefixes of an order of every member, each selector over its step's members."""
    if sorted(order) != sorted(members) or len(steps) != len(order):
        raise ConfigError(f"weights file {source!r}: the cascade's order must hold every member once")
    for j, step in enumerate(steps):
        if step.members != order[: j + 1] or list(step.selector.members_) != step.members:
            raise ConfigError(f"weights file {source!r}: step {j} does not hold the first {j + 1} members of the order")


class JudgeCodec(DocumentCodec):
    """The judge voter (voters.judge_selector): its members and fits, each fit's hyper-parameters, standardisation,
    coefficients, P(right) and P(unanswerable) logistics and abstention thresholds."""

    def document(self, voter: JudgeVoter, **meta: Any) -> dict[str, Any]:
        fits = [judge_fit_document(fit) for fit in voter.fits_]
        return {**header(voter.kind, voter.members_, []), "fits": fits, "meta": {**voter.metadata_, **meta}}

    def read(self, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> JudgeVoter:
        """Its members in its training records' order; `members`, when given, must be the same names."""
        if document.get("voter") != JudgeVoter.kind:
            raise ConfigError(
                f"weights file {source!r} holds a {document.get('voter', 'paper')!r} voter, not a judge voter"
            )
        voter = JudgeVoter.of_fits([judge_fit_from_document(fit) for fit in document["fits"]], document["members"])
        if members is not None and sorted(members) != sorted(voter.members_):
            raise ConfigError(f"weights file {source!r} holds a judge voter of members {', '.join(voter.members_)}")
        voter.metadata_ = dict(document.get("meta") or {})
        return voter


def judge_fit_document(fit: JudgeSelector) -> dict[str, Any]:
    """One fit of a judge voter as its weights file holds it (a cascade ending with the judge names it by fit)."""
    if "coef_" not in vars(fit):
        raise InputError("this JudgeSelector is not fitted yet: call fit first")
    return {
        "families": list(fit.families),
        "spans": fit.spans,
        "C": fit.C,
        **({"retrieval": True} if fit.retrieval else {}),  # files from before them do not say them
        **({"null": True} if fit.null else {}),
        "features": fit.names_,
        "mean": fit.mean_.tolist(),
        "scale": fit.scale_.tolist(),
        "coef": fit.coef_.tolist(),
        "intercept": fit.intercept_,
        "calibration": None if fit.calibration_ is None else _plain(fit.calibration_),
        **({} if fit.unanswerable_ is None else {"unanswerable": _plain(fit.unanswerable_)}),
        "thresholds": fit.thresholds_,
        "delta": fit.delta_,
    }


def judge_fit_from_document(document: Mapping[str, Any]) -> JudgeSelector:
    """The fit of a judge voter's weights file entry (`judge_fit_document`'s)."""
    fit = JudgeSelector(
        document["families"],
        int(document["spans"]),
        float(document["C"]),
        bool(document.get("retrieval")),
        bool(document.get("null")),
    )
    fit.names_ = list(document["features"])
    fit.mean_, fit.scale_ = np.asarray(document["mean"]), np.asarray(document["scale"])
    fit.coef_, fit.intercept_ = np.asarray(document["coef"]), float(document["intercept"])
    calibration, unanswerable = document.get("calibration"), document.get("unanswerable")
    fit.calibration_ = None if calibration is None else _logistic_arrays(calibration)
    fit.unanswerable_ = (
        None
        if unanswerable is None
        else {
            **_logistic_arrays(unanswerable),
            "trained_share": float(unanswerable["trained_share"]),
            "share": float(unanswerable["share"]),
        }
    )
    fit.thresholds_ = list(document.get("thresholds") or [])
    fit.delta_ = document.get("delta")
    return fit


def _logistic_arrays(fit: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "mean": np.asarray(fit["mean"], dtype=float),
        "scale": np.asarray(fit["scale"], dtype=float),
        "coef": np.asarray(fit["coef"], dtype=float),
        "intercept": float(fit["intercept"]),
    }


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value.tolist() if isinstance(value, np.ndarray) else value for key, value in values.items()}


class ClassCodec:
    """A kind another package registers: its class's own `save` and `from_document` (voters.protocol)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def save(self, voter: Any, path: str | Path, **meta: Any) -> Path:
        return Path(voter.save(path, **meta))

    def read(self, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Any:
        return self.cls.from_document(document, source, members)  # type: ignore[attr-defined]


SELECTOR = SelectorCodec()
#: the codec of each of eor's voter kinds, by the weights file's `voter` field
CODECS: dict[str, DocumentCodec] = {
    Voter.kind: PaperCodec(),
    AnswerSelector.kind: SELECTOR,
    Cascade.kind: CascadeCodec(),
    JudgeVoter.kind: JudgeCodec(),
}


def codec_for(kind: str, cls: type | None = None) -> Codec:
    """The codec of voter kind `kind`: eor's, else that of its registered class `cls` (ConfigError without one)."""
    if kind in CODECS:
        return CODECS[kind]
    if cls is None:
        raise ConfigError(f"no codec reads or writes a {kind!r} voter")
    return ClassCodec(cls)


def document_of(voter: Any, **meta: Any) -> dict[str, Any]:
    """The weights-file document of one of eor's fitted voters (what `save_voter` writes), `meta` added."""
    if voter.kind not in CODECS:
        raise ConfigError(f"a {voter.kind!r} voter writes its own weights file (save)")
    return CODECS[voter.kind].document(voter, **meta)


def save_voter(voter: Any, path: str | Path, **meta: Any) -> Path:
    """Write the fitted voter's weights file, `meta` (reader, dataset, objective, ... as JSON values) added to its
    metadata; the path written."""
    return codec_for(voter.kind, type(voter)).save(voter, path, **meta)


def voter_from_document(
    document: Mapping[str, Any], source: str, members: Sequence[str] | None = None, cls: type | None = None
) -> Any:
    """The fitted voter of a weights-file document of its kind (`cls`: a registered class, for another package's
    kind), its members in the order of `members` if given."""
    return codec_for(str(document.get("voter", Voter.kind)), cls).read(document, source, members)
