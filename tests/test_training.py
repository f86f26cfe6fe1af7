"""Learning the voter's weights (section 4.2): Nelder-Mead with deterministic restarts on a batch's
similarity tensor, computed once."""

from __future__ import annotations

import logging
import zlib

import numpy as np
import pytest

from eor.core.errors import InputError
from voters import METRICS, SimilarityMetric, VoteBatch, Voter, correctness_matrix, register_metric


def synthetic(n_questions: int, accuracies: list[float], seed: int):
    """Answers of members who are right with the given probabilities (1.0: always right); wrong answers are
    drawn from three distractors per question, so wrong members often agree with each other."""
    rng = np.random.default_rng(seed)
    answers, golds = [], []
    for q in range(n_questions):
        gold = f"gold {q}"
        row = []
        for accuracy in accuracies:
            row.append(gold if rng.uniform() < accuracy else f"wrong {q} {rng.integers(3)}")
        answers.append(row)
        golds.append([gold])
    return answers, golds


def test_fit_recovers_the_always_right_member():
    accuracies = [0.3, 0.5, 1.0, 0.4, 0.2]
    answers, golds = synthetic(80, accuracies, seed=1)
    voter = Voter(metrics=("em", "f1"), restarts=2).fit(VoteBatch(answers), golds)
    assert voter.train_score_ == 1.0
    assert int(np.argmax(voter.retriever_weights_)) == 2
    test_answers, test_golds = synthetic(200, accuracies, seed=2)
    assert voter.predict(VoteBatch(test_answers)).tolist() == [2] * 200
    assert voter.score(VoteBatch(test_answers), test_golds) == 1.0
    assert voter.score(VoteBatch(test_answers, golds=test_golds)) == 1.0


class Noise(SimilarityMetric):
    """A similarity that carries no information: a pseudo-random number per pair of answers."""

    cacheable = False

    def score_pairs(self, pairs):
        return np.array(
            [np.random.default_rng(zlib.crc32(f"{self.name}|{a}|{b}".encode())).uniform() for a, b in pairs]
        )


@pytest.fixture
def noise_metrics():
    with METRICS.scoped():
        for name in ("noise1", "noise2"):
            register_metric(name)(type(name, (Noise,), {"name": name}))
        yield


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("pooling", ["mean", "majority"])
def test_fit_never_ends_below_the_best_single_member(noise_metrics, seed, pooling):
    # Random similarities carry no information, so voting cannot beat the best member by design.
    rng = np.random.default_rng(seed)
    correct = rng.uniform(size=(150, 6)) < rng.uniform(0.2, 0.6, size=6)
    answers = [[f"{'right' if ok else 'wrong'} {q} {m}" for m, ok in enumerate(row)] for q, row in enumerate(correct)]
    golds = [[answer for answer in row if answer.startswith("right")] for row in answers]
    batch = VoteBatch(answers, golds=golds)
    voter = Voter(metrics=("noise1", "noise2"), pooling=pooling, restarts=1, max_evals=60).fit(batch)
    assert voter.train_score_ >= correct.mean(axis=0).max()
    assert voter.score(batch) == pytest.approx(voter.train_score_)


def test_weights_stay_in_bounds_and_fit_is_deterministic():
    answers, golds = synthetic(60, [0.6, 0.5, 0.4, 0.55], seed=3)
    first = Voter(metrics=("em", "f1"), restarts=3, seed=7).fit(VoteBatch(answers), golds)
    second = Voter(metrics=("em", "f1"), restarts=3, seed=7).fit(VoteBatch(answers), golds)
    np.testing.assert_array_equal(first.retriever_weights_, second.retriever_weights_)
    np.testing.assert_array_equal(first.metric_weights_, second.metric_weights_)
    for weights in (first.retriever_weights_, first.metric_weights_):
        assert np.all((weights >= 0) & (weights <= 0.6))
    assert first.best_start_ == second.best_start_


def test_voting_beats_single_members_when_agreement_is_informative():
    # Right members agree (same gold string); wrong members scatter over three distractors.
    answers, golds = synthetic(150, [0.45, 0.45, 0.45, 0.45, 0.45], seed=4)
    best_single = correctness_matrix(answers, golds).mean(axis=0).max()
    voter = Voter(metrics=("em",), restarts=1).fit(VoteBatch(answers), golds)
    assert voter.train_score_ > best_single + 0.1


def test_progress_callback_logging_and_dev_score(caplog):
    answers, golds = synthetic(50, [0.3, 1.0, 0.5], seed=5)
    dev_answers, dev_golds = synthetic(40, [0.3, 1.0, 0.5], seed=6)
    events = []
    with caplog.at_level(logging.DEBUG, logger="voters"):  # each start's fit line is at debug level
        voter = Voter(metrics=("em",), restarts=1).fit(
            VoteBatch(answers), golds, dev=VoteBatch(dev_answers, golds=dev_golds), callback=events.append
        )
    starts = [event["start"] for event in events]
    assert starts == ["uniform", "accuracy", "single:0", "single:1", "single:2", "random:0"]
    assert all(event["dev_score"] is not None for event in events)
    assert voter.dev_score_ == 1.0 and voter.train_score_ == 1.0
    assert "dev" in caplog.text and "voter fitted" in caplog.text
    assert events[-1]["best_train_score"] == voter.train_score_


def test_pooling_search_keeps_the_best_pooling():
    answers, golds = synthetic(60, [0.5, 0.5, 0.5, 0.5], seed=8)
    searched = Voter(metrics=("em",), pooling="search", restarts=1).fit(VoteBatch(answers), golds)
    assert searched.pooling == "search" and searched.pooling_ in {"mean", "max", "majority", "plurality"}
    for pooling in ("mean", "max", "majority", "plurality"):
        single = Voter(metrics=("em",), pooling=pooling, restarts=1).fit(VoteBatch(answers), golds)
        assert searched.train_score_ >= single.train_score_
    assert {event["pooling"] for event in searched.fit_history_} == {"mean", "max", "majority", "plurality"}


def test_grounding_weight_is_learned():
    # Member 0 is right 60% of the time and grounded exactly when right; member 1 always grounded.
    rng = np.random.default_rng(9)
    answers, golds, passages = [], [], []
    for q in range(80):
        right = rng.uniform() < 0.6
        first = f"gold {q}" if right else f"wrong {q}"
        second = f"gold {q}" if rng.uniform() < 0.3 else f"other {q}"
        answers.append([first, second])
        golds.append([f"gold {q}"])
        passages.append([[f"... {first} ..."] if right else ["nothing"], [f"... {second} ..."]])
    correct = correctness_matrix(answers, golds)
    oracle_rule = (correct[:, 0] + (1 - correct[:, 0]) * correct[:, 1]).mean()  # member 0 if grounded, else 1
    voter = Voter(metrics=("em",), grounding=True, restarts=1).fit(VoteBatch(answers, passages), golds)
    plain = Voter(metrics=("em",), restarts=1).fit(VoteBatch(answers), golds)
    assert voter.grounding_weight_ > 0
    assert voter.train_score_ == pytest.approx(oracle_rule)  # 0.6875 here
    assert plain.train_score_ == pytest.approx(correct.mean(axis=0).max())  # 0.6125: voting alone gains 0
    assert voter.train_score_ > plain.train_score_
    assert voter.score(VoteBatch(answers, passages), golds) == pytest.approx(voter.train_score_)
    with pytest.raises(InputError, match="passages"):
        Voter(metrics=("em",), grounding=True).fit(VoteBatch(answers), golds)


def test_fit_input_errors():
    with pytest.raises(InputError, match="gold answers for 1"):
        Voter(metrics=("em",)).fit(VoteBatch([["a", "b"], ["a", "b"]]), [["a"]])
    with pytest.raises(InputError, match="no gold answers"):
        Voter(metrics=("em",)).fit(VoteBatch([["a", "b"]]))
    with pytest.raises(InputError, match="zero questions"):
        Voter(metrics=("em",)).fit(VoteBatch([]), [])
    with pytest.raises(InputError, match="1 member names but answers from 2 members"):
        Voter(metrics=("em",), members=["A"]).fit(VoteBatch([["a", "b"]]), [["a"]])
