"""Pooling functions of appendix C.4, checked against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from eor.core.errors import ConfigError, InputError
from voters.pooling import POOLINGS, pool

# One question, four members. Off-diagonal combined similarities S[m, n]; the diagonal (1.0) never counts.
S = np.array(
    [
        [
            [1.0, 0.9, 0.2, 0.6],
            [0.9, 1.0, 0.4, 0.1],
            [0.2, 0.4, 1.0, 0.3],
            [0.6, 0.1, 0.3, 1.0],
        ]
    ]
)


def test_registry_lists_the_four_poolings_of_the_paper():
    assert list(POOLINGS)[:4] == ["mean", "max", "majority", "plurality"]


def test_unknown_pooling_names_the_available_ones():
    with pytest.raises(ConfigError, match="mean, max, majority, plurality"):
        pool("median", S)


def test_mean_pooling_by_hand():
    # m0: (0.9 + 0.2 + 0.6) / 3 = 0.5667; m1: (0.9 + 0.4 + 0.1) / 3 = 0.4667
    # m2: (0.2 + 0.4 + 0.3) / 3 = 0.3;    m3: (0.6 + 0.1 + 0.3) / 3 = 0.3333
    np.testing.assert_allclose(pool("mean", S), [[1.7 / 3, 1.4 / 3, 0.3, 1.0 / 3]])


def test_max_pooling_by_hand():
    # m0: max(0.9, 0.2, 0.6); m1: max(0.9, 0.4, 0.1); m2: max(0.2, 0.4, 0.3); m3: max(0.6, 0.1, 0.3)
    np.testing.assert_allclose(pool("max", S), [[0.9, 0.9, 0.4, 0.6]])


def test_majority_and_plurality_at_threshold_05():
    # s = 0.5: c = #{n : S_mn > 0.5} = m0: {0.9, 0.6} -> 2, m1: {0.9} -> 1, m2: {} -> 0, m3: {0.6} -> 1.
    # N = 3, so majority needs c >= 1.5: only m0.  Plurality: max c = 2: only m0.
    np.testing.assert_array_equal(pool("majority", S, threshold=0.5), [[1, 0, 0, 0]])
    np.testing.assert_array_equal(pool("plurality", S, threshold=0.5), [[1, 0, 0, 0]])


def test_majority_and_plurality_at_threshold_035():
    # s = 0.35: c = m0: {0.9, 0.6} -> 2, m1: {0.9, 0.4} -> 2, m2: {0.4} -> 1, m3: {0.6} -> 1.
    # majority (c >= 1.5): m0, m1.  plurality (c = 2): m0, m1.
    np.testing.assert_array_equal(pool("majority", S, threshold=0.35), [[1, 1, 0, 0]])
    np.testing.assert_array_equal(pool("plurality", S, threshold=0.35), [[1, 1, 0, 0]])


def test_threshold_comparison_is_strict():
    # s = 0.6: 0.6 is not > 0.6, so c = m0: {0.9} -> 1, m1: {0.9} -> 1, m2: 0, m3: 0.
    # majority: 1 >= 1.5 fails for everyone; plurality: max c = 1 -> m0, m1.
    np.testing.assert_array_equal(pool("majority", S, threshold=0.6), [[0, 0, 0, 0]])
    np.testing.assert_array_equal(pool("plurality", S, threshold=0.6), [[1, 1, 0, 0]])


def test_dropped_member_neither_scores_nor_counts():
    active = np.array([True, False, True, True])  # member 1 dropped: N = 2 for the others
    # mean: m0: (0.2 + 0.6) / 2 = 0.4; m2: (0.2 + 0.3) / 2 = 0.25; m3: (0.6 + 0.3) / 2 = 0.45; m1 -> 0
    np.testing.assert_allclose(pool("mean", S, active), [[0.4, 0.0, 0.25, 0.45]])
    # max: m0: max(0.2, 0.6); m2: max(0.2, 0.3); m3: max(0.6, 0.3)
    np.testing.assert_allclose(pool("max", S, active), [[0.6, 0.0, 0.3, 0.6]])
    # s = 0.5: c = m0: {0.6} -> 1, m2: 0, m3: {0.6} -> 1.  majority needs c >= N/2 = 1 (equality counts).
    np.testing.assert_array_equal(pool("majority", S, active, 0.5), [[1, 0, 0, 1]])
    np.testing.assert_array_equal(pool("plurality", S, active, 0.5), [[1, 0, 0, 1]])


def test_lone_active_member():
    # N = 0: mean and max are defined as 0; majority (0 >= 0) and plurality (0 = max) give 1.
    active = np.array([False, False, True, False])
    assert pool("mean", S, active)[0].tolist() == [0, 0, 0, 0]
    assert pool("max", S, active)[0].tolist() == [0, 0, 0, 0]
    assert pool("majority", S, active)[0].tolist() == [0, 0, 1, 0]
    assert pool("plurality", S, active)[0].tolist() == [0, 0, 1, 0]


def test_per_question_mask_and_vectorisation():
    both = np.concatenate([S, S])
    active = np.array([[True, True, True, True], [True, False, True, True]])
    out = pool("mean", both, active)
    np.testing.assert_allclose(out[0], pool("mean", S)[0])
    np.testing.assert_allclose(out[1], [0.4, 0.0, 0.25, 0.45])


@pytest.mark.parametrize("name", ["mean", "max", "majority", "plurality"])
def test_pooling_is_equivariant_under_member_permutation(name):
    rng = np.random.default_rng(3)
    sims = rng.uniform(size=(5, 6, 6))
    active = rng.uniform(size=6) > 0.3
    order = rng.permutation(6)
    permuted = sims[:, order][:, :, order]
    np.testing.assert_allclose(pool(name, permuted, active[order]), pool(name, sims, active)[:, order])


def test_bad_shapes_raise_input_error():
    with pytest.raises(InputError):
        pool("mean", np.zeros((2, 3, 4)))
    with pytest.raises(InputError):
        pool("mean", S, np.ones(3, dtype=bool))
