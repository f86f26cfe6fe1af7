"""The judge's per-candidate features (voters.judge_features) on a record's scores worked by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from eor.core.errors import InputError
from voters.judge_features import judge_features


def _score(total: float) -> dict:
    return {"logprob": total, "mean_logprob": total / 2, "min_logprob": total, "tokens": 2}


JUDGE = {
    "candidates": [
        {"text": "Paris", "members": ["A", "B"], "rule": "members",
         "scores": {"A": _score(-1.0), "B": _score(-2.0), "#p1": _score(-1.5)}},
        {"text": "Lyon", "members": [], "rule": "entities",
         "scores": {"A": _score(-3.0), "B": _score(-1.0), "#p1": _score(-0.5)}},
    ]
}  # fmt: skip


def test_features_by_hand():
    features = judge_features(JUDGE, ["A", "B", "C"])  # C failed: no prompt, no answer
    row = dict(zip(features.names, features.matrix.T, strict=True))
    assert features.texts == ["Paris", "Lyon"]
    assert row["wrote:A"].tolist() == [1, 0] and row["wrote:C"].tolist() == [0, 0]
    assert row["agreement"].tolist() == pytest.approx([2 / 3, 0])
    assert row["span"].tolist() == [0, 1]
    assert row["log_length"].tolist() == pytest.approx([math.log(3)] * 2)
    assert row["lp:A"].tolist() == [0, -2] and row["lp:B"].tolist() == [-1, 0] and row["lp:C"].tolist() == [0, 0]
    assert row["mean:A"].tolist() == [0, -1] and row["mean:B"].tolist() == [-0.5, 0]
    # log(e^-1 + e^-2) = -0.686738..., log(e^-3 + e^-1) = -0.873072...: Paris first by 0.186334
    gap = math.log(math.exp(-1) + math.exp(-2)) - math.log(math.exp(-3) + math.exp(-1))
    assert row["mix:members"].tolist() == pytest.approx([0, -gap])
    assert row["mix:passages"].tolist() == [-1, 0] and row["best:passages"].tolist() == [-1, 0]
    assert row["rank:members"].tolist() == [0, 1]
    assert row["margin:members"].tolist() == pytest.approx([gap, -gap])


def test_a_record_without_candidates_has_no_rows():
    features = judge_features({"candidates": []}, ["A"])
    assert features.matrix.shape == (0, len(features.names)) and np.isfinite(features.matrix).all()


def _question(right_first: bool, rng) -> tuple:
    """Two candidates; the right one is the likelier under A's prompt, by a margin drawn at random."""
    gap = float(rng.uniform(0.5, 3.0))
    totals = [-1.0, -1.0 - gap] if right_first else [-1.0 - gap, -1.0]
    judge = {"candidates": [
        {"text": "x", "members": ["A"], "rule": "members", "scores": {"A": _score(totals[0])}},
        {"text": "y", "members": [], "rule": "entities", "scores": {"A": _score(totals[1])}},
    ]}  # fmt: skip
    return judge_features(judge, ["A"]), np.array([right_first, not right_first])


def test_the_judge_selector_learns_which_likelihood_tells_and_serialises():
    from voters.judge_selector import JudgeSelector

    rng = np.random.default_rng(0)
    train = [_question(bool(i % 2), rng) for i in range(40)]
    selector = JudgeSelector(families=("lp:",)).fit([f for f, _ in train], [r for _, r in train])
    assert selector.names_ == ["lp:A"] and selector.coef_[0] > 0
    test = [_question(bool(i % 3), rng) for i in range(12)]
    assert [selector.choose(f) for f, _ in test] == [int(np.argmax(r)) for _, r in test]
    copy = JudgeSelector.from_document(json.loads(json.dumps(selector.to_document())))
    assert [copy.choose(f) for f, _ in test] == [selector.choose(f) for f, _ in test]
    members_only = JudgeSelector(families=("lp:",), spans=False).fit([f for f, _ in train], [r for _, r in train])
    assert all(members_only.choose(f) == 0 for f, _ in test)  # the span never competes
    assert selector.choose(judge_features({"candidates": []}, ["A"])) is None
    with pytest.raises(InputError, match="not fitted"):
        JudgeSelector().decision(test[0][0])
