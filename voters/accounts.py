"""What a fitted voter tells of itself: its parameters for reports (`*_description`, a voter's `describe`) and the
account of one vote (`*_account`, a voter's `explain_row`): for the paper's voter, each member's weight, its
similarities and its pooled score (eqs. 6-7); for a cascade, the covering step's selector's account with the
step named. The answer selector's account, each feature's contribution, is its own (voters.selector)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from voters.grounding import Passages, grounding_features
from voters.protocol import confidence_kwargs
from voters.scoring import VoteScorer
from voters.similarity import similarity_tensor


def paper_description(voter: Any) -> dict[str, Any]:
    """The fitted paper's voter (voters.voter) for reports: its kind, metrics, pooling and every learned weight."""
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


def paper_account(
    voter: Any, answers: Sequence[str], passages: Sequence[Passages], members: Sequence[int]
) -> dict[str, Any]:
    """Why the paper's voter voted as it did for one question: per answering member (positions `members`) its
    weight ω^r, whether the weight drops it, its similarity to every other member per metric and combined (eq. 6),
    its pooled similarity and decision score (eq. 7), and whether it is grounded."""
    index = voter._positions(members)
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


def _finite_or_none(value: float) -> float | None:
    return None if np.isinf(value) else float(value)


def cascade_description(cascade: Any) -> dict[str, Any]:
    """The fitted cascade (voters.cascade) for reports: its order, stop rule, steps, costs and operating points."""
    return {
        "voter": cascade.kind,
        "metrics": list(cascade.metric_names_),
        "order": list(cascade.order_),
        "stop_on": cascade.stop_on_,
        "stop_targets": dict(cascade.stop_targets_),
        "threshold": _finite_or_none(cascade.threshold_),
        "steps": [{"members": list(s.members), "calibration": s.calibration.to_dict()} for s in cascade.steps_],
        "cost_unit": cascade.cost_unit_,
        "member_costs": dict(cascade.member_costs_),
        "full_accuracy": cascade.full_accuracy_,
        "full_cost": cascade.full_cost_,
        "chosen": cascade.chosen_point_.to_dict(),
        "operating_points": [point.to_dict() for point in cascade.operating_points_],
    }


def cascade_account(
    cascade: Any,
    answers: Sequence[str],
    passages: Sequence[Sequence[str]],
    question: str,
    members: Sequence[int],
    confidence: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The covering step's selector account (each feature's contribution), with the step named."""
    names = [cascade.members_[int(m)] for m in members]
    j = cascade.covering_step(names)
    step = cascade.steps_[j]
    index = [step.members.index(n) for n in names]
    account = step.selector.explain_row(
        answers, passages, question, index, **confidence_kwargs(step.selector, confidence)
    )
    return {**account, "voter": cascade.kind, "step": j, "step_members": list(step.members)}
