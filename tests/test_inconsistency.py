"""RWR, MRWR and MRLR (EoR paper eqs. 1-3) on small examples worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.evaluation.inconsistency import (
    mrlr,
    mrlr_against,
    mrwr,
    mrwr_against,
    rwr_matrix,
)

NAN = float("nan")

# Three members A, B, C over five questions q1..q5 (1 = correct).
#   A = 1 1 0 0 1   wrong on {q3, q4}       (2 failures)
#   B = 1 0 1 0 0   wrong on {q2, q4, q5}   (3 failures)
#   C = 1 1 1 1 1   never wrong             (0 failures -> column C undefined)
# RWR(A,B): of B's failures {q2,q4,q5}, A is right on q2, q5     -> 2/3
# RWR(B,A): of A's failures {q3,q4},    B is right on q3         -> 1/2
# RWR(C,A): C is right on both of A's failures                   -> 2/2 = 1
# RWR(C,B): C is right on all three of B's failures              -> 3/3 = 1
# RWR(., C): C has no failure, 0/0                               -> NaN
# RWR(A,A) = RWR(B,B) = 0 (a member never wins on its own failures)
CORRECT = np.array(
    [
        [1, 1, 0, 0, 1],
        [1, 0, 1, 0, 0],
        [1, 1, 1, 1, 1],
    ]
)
EXPECTED = np.array(
    [
        [0, 2 / 3, NAN],
        [1 / 2, 0, NAN],
        [1, 1, NAN],
    ]
)


def test_rwr_matrix_matches_hand_computation():
    np.testing.assert_array_equal(rwr_matrix(CORRECT), EXPECTED)


def test_mrwr_averages_rows_without_diagonal_or_undefined():
    # MRWR(A) = mean{RWR(A,B)=2/3} (RWR(A,C) undefined) = 2/3
    # MRWR(B) = mean{RWR(B,A)=1/2}                        = 1/2
    # MRWR(C) = mean{RWR(C,A)=1, RWR(C,B)=1}              = 1
    np.testing.assert_array_equal(mrwr(rwr_matrix(CORRECT)), [2 / 3, 1 / 2, 1])


def test_mrlr_averages_columns_and_is_nan_when_all_undefined():
    # MRLR(A) = mean{RWR(B,A)=1/2, RWR(C,A)=1} = 3/4
    # MRLR(B) = mean{RWR(A,B)=2/3, RWR(C,B)=1} = 5/6
    # MRLR(C) = mean{} (both undefined)        = NaN
    result = mrlr(rwr_matrix(CORRECT))
    assert result[0] == pytest.approx(3 / 4)
    assert result[1] == pytest.approx(5 / 6)
    assert math.isnan(result[2])


def test_single_member_has_no_other_member_to_compare_with():
    matrix = rwr_matrix(np.array([[1, 0, 1]]))
    np.testing.assert_array_equal(matrix, [[0.0]])
    assert math.isnan(mrwr(matrix)[0])
    assert math.isnan(mrlr(matrix)[0])


def test_graded_indicators_follow_the_formula_on_the_diagonal():
    # One question, I = 0.5: RWR(0,0) = 0.5*0.5 / 0.5 = 0.5 (only 0/1 indicators give a zero diagonal).
    # RWR(0,1) with I^1 = 1.0: denominator 0 -> NaN; RWR(1,0) = 1.0*0.5/0.5 = 1.
    np.testing.assert_array_equal(rwr_matrix(np.array([[0.5], [1.0]])), [[0.5, NAN], [1.0, NAN]])


def test_extra_system_against_members():
    # System S = 1 0 0 1 1, wrong on {q2, q3}.
    # mrlr_against: RWR(A,S): A right on q2, wrong on q3 -> 1/2; RWR(B,S): q3 only -> 1/2; RWR(C,S) = 1
    #               mean = (1/2 + 1/2 + 1)/3 = 2/3
    # mrwr_against: RWR(S,A): of {q3,q4} S right on q4 -> 1/2;
    #               RWR(S,B): of {q2,q4,q5} S right on q4,q5 -> 2/3;
    #               RWR(S,C) undefined -> mean(1/2, 2/3) = 7/12
    system = np.array([1, 0, 0, 1, 1])
    assert mrlr_against(system, CORRECT) == pytest.approx(2 / 3)
    assert mrwr_against(system, CORRECT) == pytest.approx(7 / 12)


def test_extra_system_never_wrong_has_undefined_mrlr():
    system = np.ones(5)
    assert math.isnan(mrlr_against(system, CORRECT))
    # S is right on every failure of A and B: RWR(S,A) = RWR(S,B) = 1
    assert mrwr_against(system, CORRECT) == 1.0


def test_json_ready_makes_lists_and_nulls():
    converted = json_ready({"rwr": rwr_matrix(CORRECT), "mrlr": mrlr(rwr_matrix(CORRECT))[2], "n": 3})
    assert converted["rwr"][0] == [0.0, 2 / 3, None]
    assert converted["rwr"][2] == [1.0, 1.0, None]
    assert converted["mrlr"] is None
    assert converted["n"] == 3
    json.dumps(converted, allow_nan=False)
    assert json_ready((1.0, NAN, [NAN, np.float64(2.0)])) == [1.0, None, [None, 2.0]]
    assert json_ready({1: float("inf"), "p": Path("x"), "i": np.int64(3)}) == {"1": None, "p": "x", "i": 3}


@pytest.mark.parametrize(
    "bad",
    [np.array([1, 0, 1]), np.array([[1, 2]]), np.array([[1, NAN]]), np.array([[-0.5, 1]]), [["a", "b"]]],
)
def test_bad_indicators_raise_input_error(bad):
    with pytest.raises(InputError):
        rwr_matrix(bad)


def test_non_square_matrix_and_mismatched_system_raise_input_error():
    with pytest.raises(InputError):
        mrwr(np.zeros((2, 3)))
    with pytest.raises(InputError):
        mrlr_against(np.array([1, 0]), CORRECT)
