"""Retriever inconsistency (EoR paper, section 2.1): the Relative Win Ratio and its row and column means.

`correct` is a (members × questions) array of correctness indicators I^m(n), 0/1 or graded in [0, 1].

    RWR(i, j) = Σ_n I^i(n) (1 − I^j(n)) / Σ_n (1 − I^j(n))          (eq. 1)
    MRWR(i)   = mean_{j≠i} RWR(i, j)                                  (eq. 2)
    MRLR(i)   = mean_{j≠i} RWR(j, i)                                  (eq. 3)

RWR(i, j) is the share of r_j's failures that r_i answers correctly. A ratio whose denominator is zero (r_j
is never wrong) is undefined and reported as NaN, never as 0; `eor.core.json_ready` turns NaN into JSON null. The
means skip undefined entries and are NaN when every entry is undefined (or there is no other member).

The diagonal is what eq. 1 gives: RWR(i, i) = Σ I^i(1 − I^i) / Σ (1 − I^i), which is 0 for 0/1 indicators
whenever r_i is wrong at least once and NaN when it never is. (With graded indicators it need not be 0.)
MRWR and MRLR exclude j = i, so the diagonal never enters them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from eor.core.errors import InputError


def as_indicator_matrix(values: Any, name: str = "correct") -> np.ndarray:
    """`values` as a float (members × questions) array in [0, 1]; raise InputError otherwise."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a numeric (members × questions) array: {exc}") from exc
    if array.ndim != 2:
        raise InputError(
            f"{name} must be a 2-D (members × questions) array, got shape {array.shape}; "
            "use one row per member and one column per question"
        )
    if not np.all(np.isfinite(array)) or np.any(array < 0) or np.any(array > 1):
        raise InputError(f"{name} must hold indicators in [0, 1] (no NaN); rescale or threshold the scores")
    return array


def as_indicator_vector(values: Any, name: str) -> np.ndarray:
    """`values` as a float (questions,) array in [0, 1]; raise InputError otherwise."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a numeric array with one entry per question: {exc}") from exc
    if array.ndim != 1:
        raise InputError(f"{name} must be a 1-D array with one entry per question, got shape {array.shape}")
    return as_indicator_matrix(array[np.newaxis, :], name)[0]


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator elementwise, NaN where the denominator is zero (no warning)."""
    numerator, denominator = np.broadcast_arrays(numerator, denominator)
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean ignoring NaN along `axis`, NaN where every value is NaN (no warning, unlike np.nanmean)."""
    defined = ~np.isnan(values)
    total = np.where(defined, values, 0.0).sum(axis=axis)
    return _safe_divide(total, defined.sum(axis=axis).astype(float))


def rwr_matrix(correct: np.ndarray) -> np.ndarray:
    """The (members × members) matrix of RWR(i, j) (eq. 1); NaN where r_j is never wrong."""
    indicators = as_indicator_matrix(correct)
    wrong = 1.0 - indicators
    wins = indicators @ wrong.T  # wins[i, j] = Σ_n I^i(n) (1 − I^j(n))
    return _safe_divide(wins, wrong.sum(axis=1)[np.newaxis, :])


def _square(matrix: np.ndarray) -> np.ndarray:
    array = np.asarray(matrix, dtype=float)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise InputError(f"an RWR matrix must be square (members × members), got shape {array.shape}")
    return array


def _off_diagonal(matrix: np.ndarray) -> np.ndarray:
    array = _square(matrix).copy()
    np.fill_diagonal(array, np.nan)
    return array


def mrwr(matrix: np.ndarray) -> np.ndarray:
    """MRWR(i) = mean over j ≠ i of RWR(i, j) (eq. 2), skipping undefined entries; one value per member."""
    return _nanmean(_off_diagonal(matrix), axis=1)


def mrlr(matrix: np.ndarray) -> np.ndarray:
    """MRLR(i) = mean over j ≠ i of RWR(j, i) (eq. 3), skipping undefined entries; one value per member."""
    return _nanmean(_off_diagonal(matrix), axis=0)


def _system_against(system_correct: np.ndarray, members_correct: np.ndarray) -> np.ndarray:
    """RWR over the members with the system appended as the last row."""
    system = as_indicator_vector(system_correct, "system_correct")
    members = as_indicator_matrix(members_correct, "members_correct")
    if members.shape[1] != system.shape[0]:
        raise InputError(
            f"system_correct has {system.shape[0]} questions but members_correct has {members.shape[1]}; "
            "both must cover the same questions in the same order"
        )
    return rwr_matrix(np.vstack([members, system]))


def mrlr_against(system_correct: np.ndarray, members_correct: np.ndarray) -> float:
    """Mean over members j of RWR(j, system): the share of the system's failures a member gets right.

    Used for an extra system such as the ensemble, which is not one of the members. NaN when the system is
    never wrong or there are no members.
    """
    matrix = _system_against(system_correct, members_correct)
    return float(_nanmean(matrix[:-1, -1], axis=0))


def mrwr_against(system_correct: np.ndarray, members_correct: np.ndarray) -> float:
    """Mean over members j of RWR(system, j): the share of a member's failures the system gets right.

    Members that are never wrong (undefined RWR) are skipped; NaN when all are.
    """
    matrix = _system_against(system_correct, members_correct)
    return float(_nanmean(matrix[-1, :-1], axis=0))
