"""The four-way error breakdown and the error RWR (EoR paper, section 3 and appendix B), worked by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from eor.core.answers import contains
from eor.core.errors import InputError
from eor.evaluation.error_breakdown import (
    ERROR_TYPES,
    breakdown_report,
    decompose,
    error_indicators,
    error_rwr,
    error_rwr_matrices,
    long_answer_mask,
    summarize_errors,
    text_contains,
)

NAN = float("nan")
MEMBERS = ["Wiki", "SE", "ReFree"]
GOLDS = [
    ["Paris"],
    ["George Washington"],
    ["1969"],
    ["blue whale"],
    ["Mount Everest", "Everest"],
    ["Jupiter"],
]
# q5 is dropped: SE's answer has 7 words (> 5).
ANSWERS = [
    ["Paris", "John Adams", "1968", "blue whale", "K2", "Jupiter"],
    ["Paris", "George Washington", "November", "whale", "Everest", "The answer to the question is Jupiter"],
    ["Paris", "Thomas Jefferson", "1969", "Shark", "Everest", "Jupiter"],
]
RETRIEVED = [
    [
        "Paris is the capital of France.",
        "George Washington was the first president; John Adams followed.",
        "The moon landing happened in July.",
        "Elephants are large.",
        "Everest is the highest mountain.",
        "Jupiter is the largest planet.",
    ],
    [
        "Paris, France",
        "The first president was George Washington.",
        "Apollo 11 landed in 1969; Apollo 12 in November.",
        "The whale is a mammal.",
        "K2 is in Pakistan.",
        "Jupiter.",
    ],
    ["", "", "", "", "", ""],  # ReFree retrieves nothing
]
# Per member over the kept q0..q4 (E_e = (1-E_r)(1-E_h)(1-A), luck = E_r E_h A):
#            E_r        E_h        A          E_e        luck
# Wiki    0 0 1 1 0  0 0 1 1 1  1 0 0 1 0  0 1 0 0 0  0 0 0 1 0
#   q1 "John Adams" is in a text holding the gold -> extraction error; q3 "blue whale" not in the text
#   but correct -> lucky guess; q4 gold alias "Everest" in the text, "K2" not -> hallucination only.
# SE      0 0 0 1 1  0 0 0 0 1  1 1 0 0 1  0 0 1 0 0  0 0 0 0 1
#   q2 "November" is in a text holding "1969" -> extraction error; q3 "whale" is a whole token of
#   "the whale is a mammal" but "blue whale" is not there -> retriever error only; q4 lucky guess.
# ReFree  1 1 1 1 1  1 1 1 1 1  1 0 1 0 1  0 0 0 0 0  1 0 1 0 1
#   empty retrieval: nothing is contained, so E_r = E_h = 1 and every correct answer is a lucky guess.
E_R = [[0, 0, 1, 1, 0], [0, 0, 0, 1, 1], [1, 1, 1, 1, 1]]
E_H = [[0, 0, 1, 1, 1], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]]
A = [[1, 0, 0, 1, 0], [1, 1, 0, 0, 1], [1, 0, 1, 0, 1]]
E_E = [[0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0]]
LUCK = [[0, 0, 0, 1, 0], [0, 0, 0, 0, 1], [1, 0, 1, 0, 1]]


@pytest.fixture(scope="module")
def indicators():
    return error_indicators(ANSWERS, RETRIEVED, GOLDS, members=MEMBERS)


def test_containment_is_normalised_whole_token():
    assert text_contains("The Eiffel Tower is in PARIS, France.", "paris")
    assert text_contains("It was the Blue-Whale", "bluewhale")  # punctuation removed, as in SQuAD
    assert not text_contains("Parisian culture", "Paris")
    assert not text_contains("anything", "The")  # normalises to nothing -> contained nowhere
    assert not text_contains("", "Paris")
    # passages: a match must not straddle a boundary
    assert not text_contains(["He met George", "Washington later"], "George Washington")
    assert text_contains(["x", "George Washington"], "George Washington")


def test_long_answer_filter_drops_questions_for_every_member(indicators):
    assert indicators.dropped == 1
    assert indicators.kept.tolist() == [0, 1, 2, 3, 4]
    assert indicators.questions == 5
    # five words are kept, six are not
    mask = long_answer_mask([["one two three four five", "one two three four five six"], ["a", "b"]])
    assert mask.tolist() == [False, True]


def test_each_error_type_per_member(indicators):
    assert indicators.members == tuple(MEMBERS)
    assert indicators.retriever_error.tolist() == E_R
    assert indicators.hallucination.tolist() == E_H
    assert indicators.correct.tolist() == A
    assert indicators.extraction_error.tolist() == E_E
    assert indicators.lucky_guess.tolist() == LUCK


def test_counts_and_rates(indicators):
    # Wiki: E_r 2, E_h 3, E_e 1, luck 1, correct 2; SE: 2, 1, 1, 1, 3; ReFree: 5, 5, 0, 3, 3 (out of N* = 5)
    summaries = {s.member: s for s in summarize_errors(indicators)}
    keys = [*ERROR_TYPES, "correct"]
    assert [summaries["Wiki"].counts[k] for k in keys] == [2, 3, 1, 1, 2]
    assert [summaries["SE"].counts[k] for k in keys] == [2, 1, 1, 1, 3]
    assert [summaries["ReFree"].counts[k] for k in keys] == [5, 5, 0, 3, 3]
    assert summaries["Wiki"].rates["hallucination"] == 3 / 5
    assert summaries["ReFree"].rates["lucky_guess"] == 3 / 5
    assert all(s.questions == 5 for s in summaries.values())


def test_plain_rwr_for_retriever_error_and_hallucination(indicators):
    matrices = error_rwr_matrices(indicators)
    # E_r: RWR(Wiki,SE): SE errs on {q3,q4}, Wiki avoids q4 -> 1/2;
    #      RWR(SE,Wiki): of {q2,q3} SE avoids q2 -> 1/2;
    #      RWR(Wiki,ReFree): of q0..q4 Wiki avoids q0,q1,q4 -> 3/5; RWR(SE,ReFree): q0,q1,q2 -> 3/5;
    #      ReFree avoids nothing -> 0.
    np.testing.assert_array_equal(matrices["retriever_error"], [[0, 1 / 2, 3 / 5], [1 / 2, 0, 3 / 5], [0, 0, 0]])
    # E_h: RWR(Wiki,SE): SE errs on {q4} where Wiki errs too -> 0/1; RWR(SE,Wiki): of {q2,q3,q4} SE avoids
    #      q2,q3 -> 2/3; RWR(Wiki,ReFree) = 2/5 (q0,q1); RWR(SE,ReFree) = 4/5 (q0..q3).
    np.testing.assert_array_equal(matrices["hallucination"], [[0, 0, 2 / 5], [2 / 3, 0, 4 / 5], [0, 0, 0]])


def test_conditioned_rwr_for_extraction_error(indicators):
    # Condition c_ij = (1-E_r^i)(1-E_r^j): 1-E_r is Wiki 1 1 0 0 1, SE 1 1 1 0 0, ReFree 0 0 0 0 0.
    # RWR(Wiki,SE): SE's only E_e is q2 where Wiki had no gold document -> 0/0 = NaN
    #   (unconditioned it would be 1/1: Wiki has no E_e on q2).
    # RWR(SE,Wiki): Wiki's E_e at q1, both have gold there, SE has no E_e -> 1/1 = 1.
    # Anything involving ReFree: its condition is 0 everywhere -> NaN; diagonal 0 where defined.
    np.testing.assert_array_equal(
        error_rwr_matrices(indicators)["extraction_error"],
        [[0, NAN, NAN], [1, 0, NAN], [NAN, NAN, NAN]],
    )
    assert error_rwr(np.array(E_E))[0, 1] == 1.0


def test_conditioned_rwr_for_lucky_guess(indicators):
    # Condition c_ij = E_r^i E_h^i E_r^j E_h^j: E_r E_h is Wiki 0 0 1 1 0, SE 0 0 0 0 1, ReFree 1 1 1 1 1.
    # RWR(Wiki,SE): SE's luck at q4, Wiki not in the regime there -> NaN; RWR(SE,Wiki): q3 likewise -> NaN.
    # RWR(Wiki,ReFree): ReFree's lucks q0,q2,q4, Wiki in regime only at q2 and not lucky -> 1/1.
    # RWR(ReFree,Wiki): Wiki's luck q3, ReFree not lucky there -> 1/1.
    # RWR(SE,ReFree): q4 only, SE lucky too -> 0/1; RWR(ReFree,SE): q4, ReFree lucky too -> 0/1.
    np.testing.assert_array_equal(
        error_rwr_matrices(indicators)["lucky_guess"],
        [[0, NAN, 1], [NAN, 0, 0], [1, 0, 0]],
    )


def test_extraction_conditioning_changes_the_fraction():
    # Member 1: E_r 0 0 0 0 1 0, E_h 0 0 0 0 1 0, A 0 0 1 1 0 1 -> E_e 1 1 0 0 0 0
    # Member 2: E_r 0 0 0 1 0 0, E_h 0 0 0 0 0 0, A 0 1 0 0 0 0 -> E_e 1 0 1 0 1 1
    # c = (1-E_r^1)(1-E_r^2) = 1 1 1 0 0 1
    # RWR(1,2) = Σ(1-E_e^1) E_e^2 c / Σ E_e^2 c: E_e^2 c on q0,q2,q5, member 1 avoids q2,q5 -> 2/3
    #   (unconditioned: E_e^2 on q0,q2,q4,q5, avoided q2,q4,q5 -> 3/4)
    # RWR(2,1): E_e^1 c on q0,q1, member 2 avoids q1 -> 1/2
    ind = decompose(
        retriever_error=[[0, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0]],
        hallucination=[[0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0]],
        correct=[[0, 0, 1, 1, 0, 1], [0, 1, 0, 0, 0, 0]],
    )
    assert ind.extraction_error.tolist() == [[1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 1, 1]]
    conditioned = error_rwr_matrices(ind)["extraction_error"]
    assert conditioned[0, 1] == 2 / 3
    assert conditioned[1, 0] == 1 / 2
    assert error_rwr(ind.extraction_error)[0, 1] == 3 / 4


def test_lucky_guess_conditioning_changes_the_fraction():
    # Member 1: E_r 1 1 1 1 0, E_h 1 1 1 0 0, A 1 0 1 1 1 -> luck 1 0 1 0 0, regime E_r E_h = 1 1 1 0 0
    # Member 2: E_r 1 1 1 1 1, E_h 1 1 1 1 1, A 1 1 0 1 0 -> luck 1 1 0 1 0, regime 1 1 1 1 1
    # RWR(1,2): luck^2 in both regimes on q0,q1 (q3 excluded: member 1 outside), member 1 avoids q1 -> 1/2
    #   (unconditioned: q0,q1,q3, avoided q1,q3 -> 2/3)
    # RWR(2,1): luck^1 on q0,q2, member 2 avoids q2 -> 1/2
    ind = decompose(
        retriever_error=[[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]],
        hallucination=[[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]],
        correct=[[1, 0, 1, 1, 1], [1, 1, 0, 1, 0]],
    )
    conditioned = error_rwr_matrices(ind)["lucky_guess"]
    assert conditioned[0, 1] == 1 / 2
    assert conditioned[1, 0] == 1 / 2
    assert error_rwr(ind.lucky_guess)[0, 1] == 2 / 3


def _appendix_b_by_loops(errors, condition_of):
    """Appendix B's sums written out literally, one pair and one question at a time."""
    m, n = errors.shape
    out = np.full((m, m), np.nan)
    for i in range(m):
        for j in range(m):
            num = sum((1 - errors[i, q]) * errors[j, q] * condition_of(i, j, q) for q in range(n))
            den = sum(errors[j, q] * condition_of(i, j, q) for q in range(n))
            if den:
                out[i, j] = num / den
    return out


def test_matrices_equal_the_literal_formulas_including_the_printed_lucky_guess_condition():
    rng = np.random.default_rng(42)
    ind = decompose(*(rng.integers(0, 2, size=(4, 40)) for _ in range(3)))
    e_r, e_h = ind.retriever_error, ind.hallucination
    matrices = error_rwr_matrices(ind)
    np.testing.assert_allclose(
        matrices["extraction_error"],
        _appendix_b_by_loops(ind.extraction_error, lambda i, j, q: (1 - e_r[i, q]) * (1 - e_r[j, q])),
    )
    intended = _appendix_b_by_loops(ind.lucky_guess, lambda i, j, q: e_r[i, q] * e_h[i, q] * e_r[j, q] * e_h[j, q])
    printed = _appendix_b_by_loops(ind.lucky_guess, lambda i, j, q: e_r[i, q] * e_h[i, q] * e_r[j, q] * e_r[j, q])
    np.testing.assert_allclose(matrices["lucky_guess"], intended)
    np.testing.assert_allclose(intended, printed)  # I_luck^j already carries I_Eh^j: both readings agree
    np.testing.assert_allclose(matrices["retriever_error"], _appendix_b_by_loops(e_r, lambda i, j, q: 1))


def test_error_never_made_gives_nan():
    # Member 2 never makes the error: column 2 is 0/0.
    np.testing.assert_array_equal(error_rwr(np.array([[1, 0], [0, 0]])), [[0, NAN], [1, NAN]])


def test_precomputed_correctness_and_other_metrics():
    # A judge says Wiki's "1968" on q2 is correct: Wiki's q2 becomes E_r E_h A = lucky guess.
    full = np.zeros((3, 6), dtype=int)  # one column per input question, the dropped q5 included
    full[:, :5] = A
    full[0, 2] = 1
    ind = error_indicators(ANSWERS, RETRIEVED, GOLDS, members=MEMBERS, correct=full)
    assert ind.lucky_guess[0].tolist() == [0, 0, 1, 1, 0]
    # containment as the correctness metric: SE's "whale" is not correct ("blue whale" not in "whale") but
    # Wiki's "blue whale" is, exactly as with EM here.
    ind = error_indicators(ANSWERS, RETRIEVED, GOLDS, members=MEMBERS, metric=lambda p, g: contains(p, g))
    assert ind.correct.tolist() == A


def test_report_is_json_ready(indicators):
    report = breakdown_report(indicators)
    assert report["questions_dropped"] == 1 and report["questions_kept"] == 5
    assert report["rwr"]["extraction_error"][0] == [0.0, None, None]
    assert report["per_member"][2]["counts"]["lucky_guess"] == 3
    json.dumps(report, allow_nan=False)


def test_all_questions_filtered_gives_nan_rates():
    ind = error_indicators([["one two three four five six"]], [["text"]], [["x"]], members=["M"])
    assert ind.dropped == 1 and ind.questions == 0
    assert math.isnan(summarize_errors(ind)[0].rates["retriever_error"])
    assert math.isnan(error_rwr_matrices(ind)["retriever_error"][0, 0])


def test_bad_input_raises_input_error():
    with pytest.raises(InputError):
        error_indicators(ANSWERS, RETRIEVED[:2], GOLDS)
    with pytest.raises(InputError):
        error_indicators(ANSWERS, RETRIEVED, GOLDS[:5])
    with pytest.raises(InputError):
        error_indicators(ANSWERS, RETRIEVED, GOLDS, members=["only one"])
    with pytest.raises(InputError):
        decompose([[0, 1]], [[0, 1]], [[0.5, 1]])
    with pytest.raises(InputError):
        decompose([[0, 1]], [[0, 1, 1]], [[0, 1]])
