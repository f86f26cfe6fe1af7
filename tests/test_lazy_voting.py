"""Exact lazy voting (voters.lazy): hand-worked bounds, and the lazy choice equals the full vote's."""

from __future__ import annotations

import numpy as np
import pytest

from voters import Voter
from voters.lazy import lazy_decision, needed_members, simulate, supports_lazy_voting


def voter(weights: list[float], metrics=("em",), pooling: str = "mean", grounding: float | None = None) -> Voter:
    built = Voter.uniform(
        len(weights), metrics=metrics, pooling=pooling, grounding=grounding is not None, grounding_weight=grounding
    )
    built.retriever_weights_ = np.array(weights, dtype=float)
    return built


def test_bounds_by_hand():
    # em only: ω^s = 0.6 (uniform, capped at max_weight), N = 3 others for each member.
    v = voter([0.6, 0.6, 0.6, 0.2])
    # m0: known similarities 0.6 + 0.6, pending one in [0, 0.6]: pool in [0.4, 0.6], score ≥ 0.24;
    # the pending member scores at most 0.2 · 0.6 = 0.12 < 0.24: stop with "a".
    state = lazy_decision(v, {0: "a", 1: "a", 2: "a"}, {}, [3])
    assert state.stop and state.answer == "a" and state.leader == 0
    # m2 answers "b": m0's pool ≥ 0.6 / 3, score ≥ 0.12, and the pending member may reach 0.12 too: go on.
    assert not lazy_decision(v, {0: "a", 1: "a", 2: "b"}, {}, [3]).stop
    # with every weight equal, a pending member can always still win
    assert not lazy_decision(voter([0.5] * 4), {0: "a", 1: "a", 2: "a"}, {}, [3]).stop
    # nothing pending: the full vote
    assert lazy_decision(v, {0: "a", 1: "b", 2: "b", 3: "c"}, {}, []).answer == "b"


def test_dropped_members_need_not_run_and_plurality_never_stops_early():
    v = voter([0.6, 0.05, 0.6, 0.6])
    assert needed_members(v) == [0, 2, 3]
    assert lazy_decision(v, {0: "a", 2: "a"}, {}, [1]).stop  # member 1 is dropped: nothing is pending
    assert not supports_lazy_voting(voter([0.6] * 3, pooling="plurality"))
    assert not lazy_decision(voter([0.6, 0.6, 0.2], pooling="plurality"), {0: "a", 1: "a"}, {}, [2]).stop


def test_grounding_counts_in_the_bounds():
    # ω^g = 0.5; m0 grounded. m0's pool over 2 others: [0.6/2, 1.2/2]; score ≥ 0.6 · (0.3 + 0.5) = 0.48.
    # The pending member: ≤ 0.3 · (0.6 + 0.5) = 0.33: stop.
    v = voter([0.6, 0.6, 0.3], grounding=0.5)
    state = lazy_decision(v, {0: "paris", 1: "paris"}, {0: ["paris is the capital"], 1: []}, [2])
    assert state.stop and state.answer == "paris"
    # ungrounded, m0 scores ≥ 0.6 · 0.3 = 0.18 < 0.33: go on
    assert not lazy_decision(v, {0: "paris", 1: "paris"}, {0: [], 1: []}, [2]).stop


@pytest.mark.parametrize("pooling", ["mean", "max", "majority"])
@pytest.mark.parametrize("use_grounding", [False, True])
def test_lazy_choice_equals_the_full_vote(pooling, use_grounding):
    rng = np.random.default_rng(7)
    vocabulary = ["paris", "london", "paris france", "rome", "the city of paris", ""]
    for _ in range(60):
        n = int(rng.integers(2, 7))
        weights = rng.choice([0.05, 0.2, 0.4, 0.6], size=n).tolist()
        v = voter(weights, metrics=("em", "f1"), pooling=pooling, grounding=0.3 if use_grounding else None)
        answers = [str(rng.choice(vocabulary)) for _ in range(n)]
        passages = [["paris and rome"] if rng.uniform() < 0.5 else [] for _ in range(n)]
        full = answers[int(v.predict([answers], [passages])[0])]
        order = rng.permutation(n).tolist()
        lazy, ran = simulate(v, answers, passages, order)
        assert lazy == full
        assert set(ran) <= set(needed_members(v))
