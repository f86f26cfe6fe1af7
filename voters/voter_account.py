"""What a fitted `Voter` tells of itself, as functions of it: its description for reports, the account of
one vote (`explain_row`), and its weights-file document (voters.weights_file) both ways."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from eor.core.errors import ConfigError
from voters.grounding import Passages, grounding_features
from voters.nelder_mead import Weights
from voters.pooling import POOLINGS
from voters.scoring import VoteScorer
from voters.similarity import similarity_tensor
from voters.weights_file import header, member_order

if TYPE_CHECKING:
    from voters.voter import Voter


def describe(voter: Voter) -> dict[str, Any]:
    """The fitted voter for reports: its kind, metrics, pooling and every learned weight."""
    names = voter.members_ or [f"member{m}" for m in range(voter.n_members_)]
    return {
        "voter": voter.kind,
        "metrics": list(voter.metric_names_),
        "pooling": voter.pooling_,
        "retriever_weights": {name: float(w) for name, w in zip(names, voter.retriever_weights_, strict=True)},
        "metric_weights": {name: float(w) for name, w in zip(voter.metric_names_, voter.metric_weights_, strict=True)},
        "grounding_weight": voter.grounding_weight_,
        "member_threshold": float(voter.member_threshold),
        "active": [names[i] for i in voter.active_members_],
    }


def explain_row(voter: Voter, answers: Sequence[str], passages: Sequence[Passages], index: list[int]) -> dict[str, Any]:
    """Why the vote went as it did for one question: per answering member (positions `index`) its weight
    ω^r, whether the weight drops it, its similarity to every other member per metric and combined (eq. 6),
    its pooled similarity and decision score (eq. 7), and whether it is grounded."""
    tensor = similarity_tensor(
        [list(answers)], list(voter.metrics), cache=voter.cache_dir, metric_params=voter.metric_params
    )
    grounding = grounding_features([list(answers)], [list(passages)]) if voter.needs_passages else None
    scorer = VoteScorer(tensor, grounding)
    weights = voter.retriever_weights_[index]
    active = weights > voter.member_threshold
    combined = scorer.combined(voter.metric_weights_)[0]
    pooled = scorer.pooled(voter.metric_weights_, active, voter.pooling_, float(voter.threshold))[0]
    scores = voter._scores(tensor, grounding, index)[0]
    rows = []
    for m in range(len(answers)):
        row = {
            "weight": float(weights[m]),
            "dropped": not bool(active[m]),
            "similarity": {
                n: {
                    **{metric: float(tensor[0, m, n, k]) for k, metric in enumerate(voter.metrics)},
                    "combined": float(combined[m, n]),
                }
                for n in range(len(answers))
                if n != m
            },
            "pooled": float(pooled[m]) if active[m] else None,
            "score": float(scores[m]) if np.isfinite(scores[m]) else None,
        }
        if grounding is not None:
            row["grounded"] = bool(grounding[0, m])
        rows.append(row)
    return {
        "voter": voter.kind,
        "pooling": voter.pooling_,
        "metric_weights": {metric: float(w) for metric, w in zip(voter.metrics, voter.metric_weights_, strict=True)},
        "grounding_weight": voter.grounding_weight_,
        "member_threshold": float(voter.member_threshold),
        "members": rows,
    }


def document(voter: Voter, **meta: Any) -> dict[str, Any]:
    """The weights-file document of a fitted voter. `meta`: reader, dataset, objective, ... (JSON values)."""
    meta.setdefault("objective", voter.correctness)
    # the hyper-parameters in the order of __init__'s signature, as weights files have always listed them
    names = [name for name in inspect.signature(type(voter).__init__).parameters if name != "self"]
    params = {name: getattr(voter, name) for name in names}
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
        "train_score": getattr(voter, "train_score_", None),
        "dev_score": getattr(voter, "dev_score_", None),
        "params": params,
        "meta": {**voter.metadata_, **meta},
    }


def from_document(
    cls: type[Voter], document: Mapping[str, Any], source: str, members: Sequence[str] | None = None
) -> Voter:
    """A fitted voter of class `cls` from a weights-file document (see `voters.load_voter`)."""
    if document.get("voter", cls.kind) != cls.kind:
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
    voter = cls()
    voter.set_params(**params)
    voter._check_params()
    if len(metric_weights) != len(voter.metrics) or pooling not in POOLINGS:
        raise ConfigError(f"weights file {source!r} is inconsistent: metric weights or pooling do not match")
    grounding = document.get("grounding_weight")
    voter.set_weights(
        Weights(
            np.array(metric_weights),
            np.array(retriever_weights)[order],
            None if grounding is None else float(grounding),
            pooling,
        )
    )
    voter.train_score_ = document.get("train_score")
    voter.dev_score_ = document.get("dev_score")
    voter.metadata_ = dict(document.get("meta") or {})
    return voter
