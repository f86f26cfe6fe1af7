"""The oracle upper bound of an ensemble per pool size (EoR paper, figure 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eor.core.errors import InputError
from eor.evaluation.upper_bound import oracle_accuracy, sample_subsets, top_member, upper_bound_by_pool_size

# Three members over four questions (1 = correct):
#   A = 1 0 0 0   accuracy 1/4
#   B = 0 1 0 0   accuracy 1/4
#   C = 1 1 1 0   accuracy 3/4
# Oracle (any member right): {A,B} -> 1 1 0 0 = 1/2; {A,C} -> 1 1 1 0 = 3/4; {B,C} -> 3/4; {A,B,C} -> 3/4.
CORRECT = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 1, 0]])
NAMES = ["A", "B", "C"]


def test_oracle_accuracy_is_mean_of_max_over_members():
    assert oracle_accuracy(CORRECT[[0, 1]]) == 1 / 2
    assert oracle_accuracy(CORRECT) == 3 / 4
    # graded: max(0.2, 0.6) = 0.6 and max(1, 0) = 1 -> (0.6 + 1)/2 = 0.8
    assert oracle_accuracy(np.array([[0.2, 1.0], [0.6, 0.0]])) == pytest.approx(0.8)
    assert math.isnan(oracle_accuracy(np.zeros((2, 0))))


def test_every_subset_when_under_the_cap():
    result = upper_bound_by_pool_size(CORRECT, NAMES)
    sizes = {bound.size: bound for bound in result.by_size}
    assert sorted(sizes) == [1, 2, 3]
    assert sizes[1].subsets == [("A",), ("B",), ("C",)]
    assert sizes[1].accuracies == [1 / 4, 1 / 4, 3 / 4]
    assert sizes[2].subsets == [("A", "B"), ("A", "C"), ("B", "C")]
    assert sizes[2].accuracies == [1 / 2, 3 / 4, 3 / 4]
    assert sizes[3].accuracies == [3 / 4]
    assert all(bound.exhaustive for bound in result.by_size)
    assert (result.best_single, result.best_single_accuracy) == ("C", 3 / 4)


def test_subset_counts_are_binomial_coefficients():
    correct = np.random.default_rng(7).integers(0, 2, size=(6, 20))
    result = upper_bound_by_pool_size(correct, [f"m{i}" for i in range(6)])
    # C(6,k) for k = 1..6: 6, 15, 20, 15, 6, 1
    assert [len(bound.subsets) for bound in result.by_size] == [6, 15, 20, 15, 6, 1]
    assert [bound.total_subsets for bound in result.by_size] == [math.comb(6, k) for k in range(1, 7)]


def test_best_single_tie_goes_to_earliest_member():
    result = upper_bound_by_pool_size(np.array([[1, 0], [0, 1]]), ["X", "Y"])
    assert (result.best_single, result.best_single_accuracy) == ("X", 1 / 2)


def test_sampling_over_the_cap_is_distinct_sorted_and_deterministic():
    correct = np.random.default_rng(3).integers(0, 2, size=(10, 30))
    names = [f"m{i}" for i in range(10)]
    first = upper_bound_by_pool_size(correct, names, max_subsets_per_size=10, seed=5)
    again = upper_bound_by_pool_size(correct, names, max_subsets_per_size=10, seed=5)
    other = upper_bound_by_pool_size(correct, names, max_subsets_per_size=10, seed=6)
    size5 = first.by_size[4]  # C(10,5) = 252 > 10: rejection-sampled
    assert size5.total_subsets == 252 and not size5.exhaustive
    assert len(size5.subsets) == 10 == len(set(size5.subsets))
    assert all(len(subset) == 5 for subset in size5.subsets)
    assert size5.subsets == sorted(size5.subsets, key=lambda s: [names.index(n) for n in s])
    assert [b.subsets for b in first.by_size] == [b.subsets for b in again.by_size]
    assert [b.accuracies for b in first.by_size] == [b.accuracies for b in again.by_size]
    assert size5.subsets != other.by_size[4].subsets
    # sizes 1, 9, 10 have C = 10, 10, 1 <= 10: enumerated in full
    assert [b.exhaustive for b in first.by_size] == [True] + [False] * 7 + [True, True]


def test_each_sampled_accuracy_is_the_oracle_of_its_subset():
    correct = np.random.default_rng(11).integers(0, 2, size=(8, 25))
    names = [f"m{i}" for i in range(8)]
    result = upper_bound_by_pool_size(correct, names, max_subsets_per_size=5, seed=0)
    for bound in result.by_size:
        for subset, accuracy in zip(bound.subsets, bound.accuracies, strict=True):
            rows = [names.index(n) for n in subset]
            assert accuracy == correct[rows].max(axis=0).mean()


def test_sample_subsets_near_the_total_uses_distinct_subsets():
    # C(5,2) = 10 <= 2*6: listed, then 6 distinct indices chosen
    subsets = sample_subsets(5, 2, 6, np.random.default_rng(0))
    assert len(subsets) == 6 == len(set(subsets))
    assert subsets == sorted(subsets)
    assert sample_subsets(5, 2, 6, np.random.default_rng(0)) == subsets


def test_bad_arguments_raise_input_error():
    with pytest.raises(InputError):
        upper_bound_by_pool_size(CORRECT, ["A", "B"])
    with pytest.raises(InputError):
        upper_bound_by_pool_size(CORRECT, ["A", "A", "C"])
    with pytest.raises(InputError):
        upper_bound_by_pool_size(CORRECT, NAMES, max_subsets_per_size=0)
    with pytest.raises(InputError):
        upper_bound_by_pool_size(CORRECT, NAMES, seed=-1)


def test_as_dict_is_json_ready():
    report = upper_bound_by_pool_size(CORRECT, NAMES).as_dict()
    assert report["by_size"][1]["subsets"][0] == ["A", "B"]
    assert report["best_single"] == "C"


def test_top_r_is_the_member_most_often_right_ties_to_the_first_by_hand() -> None:
    # questions × members: B is right on 2 of 3, A and C on 1; then A and B tie on 2 of 4, A comes first
    assert top_member(np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]])) == 1
    assert top_member(np.array([[1, 0], [1, 1], [0, 1], [0, 0]])) == 0
    assert top_member(np.array([[0.5, 0.25], [0.5, 1.0]])) == 1  # graded correctness: the mean decides (0.5, 0.625)
    assert top_member(np.zeros((0, 3))) == 0  # no question: the first member
    with pytest.raises(InputError, match="Top R"):
        top_member(np.zeros((3, 0)))
