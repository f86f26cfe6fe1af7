"""The Voter estimator: eqs. 6-7 with given weights (worked by hand), member filtering, ties, the sklearn
protocol, grounding, and weights files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eor.core.errors import ConfigError, InputError, NotFittedError
from voters import METRICS, SimilarityMetric, VoteBatch, Voter, choose, decision_scores, load_voter, register_metric
from voters.codecs import save_voter
from voters.nelder_mead import Weights
from voters.scoring import VoteScorer

# One question, three members answering "a", "b", "c", two metrics (K = 2) whose similarities are these tables.
SIM_A = [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
SIM_B = [[1.0, 0.5, 0.8], [0.5, 1.0, 0.2], [0.8, 0.2, 1.0]]
TENSOR = np.stack([SIM_A, SIM_B], axis=-1)[np.newaxis]
BATCH = VoteBatch([["a", "b", "c"]])


def _table_metric(name: str, table: list[list[float]]) -> type[SimilarityMetric]:
    class Table(SimilarityMetric):
        cacheable = False

        def score_pairs(self, pairs):
            return np.array([table["abc".index(x)]["abc".index(y)] for x, y in pairs])

    Table.name = name
    return Table


@pytest.fixture(autouse=True)
def table_metrics():
    """`sim_a` and `sim_b`: the similarity tables above, as metrics, for the tests of this module only."""
    with METRICS.scoped():
        register_metric("sim_a")(_table_metric("sim_a", SIM_A))
        register_metric("sim_b")(_table_metric("sim_b", SIM_B))
        yield


def with_weights(metric, retriever, pooling="mean", grounding=None, **params) -> Voter:
    voter = Voter(metrics=("sim_a", "sim_b"), pooling=pooling, **params)
    voter.set_weights(Weights(np.array(metric, float), np.array(retriever, float), grounding, pooling))
    return voter


def test_the_table_metrics_give_the_tables():
    np.testing.assert_array_equal(BATCH.similarity(["sim_a", "sim_b"]), TENSOR)


def test_eq6_eq7_mean_pooling_by_hand():
    # ω^s = (0.6, 0.2): S01 = 0.6·1 + 0.2·0.5 = 0.7; S02 = 0 + 0.2·0.8 = 0.16; S12 = 0 + 0.2·0.2 = 0.04
    scorer = VoteScorer(TENSOR)
    np.testing.assert_allclose(scorer.combined([0.6, 0.2])[0][[0, 0, 1], [1, 2, 2]], [0.7, 0.16, 0.04])
    # mean pool: m0 (0.7 + 0.16)/2 = 0.43; m1 (0.7 + 0.04)/2 = 0.37; m2 (0.16 + 0.04)/2 = 0.10
    # ω^r = (0.2, 0.5, 0.6): s = (0.086, 0.185, 0.060) -> member 1
    voter = with_weights([0.6, 0.2], [0.2, 0.5, 0.6])
    np.testing.assert_allclose(voter.decision_function(BATCH), [[0.086, 0.185, 0.060]])
    assert voter.predict(BATCH).tolist() == [1]


def test_eq7_with_max_majority_plurality_by_hand():
    # S01 = 0.7, S02 = 0.16, S12 = 0.04 (as above); ω^r = (0.2, 0.5, 0.6)
    # max: m0 0.7, m1 0.7, m2 0.16 -> s = (0.14, 0.35, 0.096)
    np.testing.assert_allclose(
        with_weights([0.6, 0.2], [0.2, 0.5, 0.6], "max").decision_function(BATCH), [[0.14, 0.35, 0.096]]
    )
    # s = 0.5: c = (1, 1, 0); N = 2, majority needs c >= 1 -> (1, 1, 0); plurality max c = 1 -> (1, 1, 0)
    # -> s = (0.2, 0.5, 0)
    for pooling in ("majority", "plurality"):
        voter = with_weights([0.6, 0.2], [0.2, 0.5, 0.6], pooling)
        np.testing.assert_allclose(voter.decision_function(BATCH), [[0.2, 0.5, 0.0]])
    # with s = 0.75 nobody agrees: majority all 0 (0 >= 1 fails), plurality all 1 (0 = max 0) -> s = ω^r
    np.testing.assert_allclose(
        with_weights([0.6, 0.2], [0.2, 0.5, 0.6], "plurality", threshold=0.75).decision_function(BATCH),
        [[0.2, 0.5, 0.6]],
    )
    assert with_weights([0.6, 0.2], [0.2, 0.5, 0.6], "majority", threshold=0.75).predict(BATCH) == [0]


def test_member_filtering_changes_the_vote():
    # t = 0.05, nobody dropped: s = (0.43·0.3, 0.37·0.1, 0.10·0.6) = (0.129, 0.037, 0.060) -> member 0
    kept = with_weights([0.6, 0.2], [0.3, 0.1, 0.6], member_threshold=0.05)
    np.testing.assert_allclose(kept.decision_function(BATCH), [[0.129, 0.037, 0.060]])
    assert kept.predict(BATCH).tolist() == [0]
    # t = 0.1: member 1 (ω^r = 0.1 ≤ t) is dropped and leaves the pools:
    # m0 pools {S02} = 0.16 -> 0.048; m2 pools {S02} = 0.16 -> 0.096 -> member 2
    dropped = with_weights([0.6, 0.2], [0.3, 0.1, 0.6], member_threshold=0.1)
    np.testing.assert_allclose(dropped.decision_function(BATCH), [[0.048, -np.inf, 0.096]])
    assert dropped.predict(BATCH).tolist() == [2]
    assert dropped.active_members_ == [0, 2]


def test_all_members_dropped_falls_back_to_member_zero():
    voter = with_weights([0.5, 0.5], [0.05, 0.1, 0.0])
    assert np.all(np.isinf(voter.decision_function(BATCH)))
    assert voter.predict(BATCH).tolist() == [0]


def test_ties_break_to_the_lowest_index():
    voter = Voter.uniform(3, metrics=("em",))
    # "Paris" twice: members 0 and 1 both pool (1 + 0)/2 = 0.5, member 2 pools 0 -> tie 0/1 -> 0
    assert voter.predict(VoteBatch([["Paris", "paris", "Lyon"], ["Lyon", "Paris", "Paris"]])).tolist() == [0, 1]
    # all different: every score 0 -> member 0
    assert voter.predict(VoteBatch([["a", "b", "c"]])).tolist() == [0]
    # float noise does not break a tie: (0.1 + 0.2) + 0.3 != 0.1 + (0.2 + 0.3) in binary floating point
    assert choose(np.array([[(0.1 + 0.2) + 0.3, 0.1 + (0.2 + 0.3)], [0.6, 0.6 + 1e-6]])).tolist() == [0, 1]


def test_uniform_voter_is_fitted_and_averages_metrics():
    voter = Voter.uniform(3, metrics=("sim_a", "sim_b"), pooling="mean", members=["a", "b", "c"])
    np.testing.assert_allclose(voter.metric_weights_, [0.5, 0.5])
    np.testing.assert_allclose(voter.retriever_weights_, [0.5, 0.5, 0.5])
    # S01 = (1 + 0.5)/2 = 0.75, S02 = 0.4, S12 = 0.1 -> pools (0.575, 0.425, 0.25) · 0.5
    np.testing.assert_allclose(voter.decision_function(BATCH), [[0.2875, 0.2125, 0.125]])
    with pytest.raises(ConfigError, match="concrete pooling"):
        Voter.uniform(3, pooling="search")
    with pytest.raises(ConfigError, match="2 member names given for 3"):
        Voter.uniform(3, members=["a", "b"])


def test_decision_scores_of_answers_equal_those_of_a_batch():
    answers = [["Paris", "Paris, France", "Lyon"], ["1990", "1991", "in 1990"]]
    voter = Voter.uniform(3, metrics=("em", "f1"))
    tensor = voter.similarity_tensor(answers)
    np.testing.assert_allclose(voter.decision_scores(answers), voter.decision_function(VoteBatch(answers)))
    np.testing.assert_allclose(voter.decision_scores(answers), decision_scores(tensor, [0.5, 0.5], [0.5] * 3))
    # question 2: f1("1990", "in 1990") = 2·1·0.5/1.5 = 2/3; S = (0 + 2/3)/2 = 1/3 for that pair
    # pools: m0 (0 + 1/3)/2, m1 0, m2 (1/3 + 0)/2 -> tie 0/2 -> 0
    assert voter.predict(VoteBatch(answers)).tolist() == [0, 0]
    assert voter.score(VoteBatch(answers), [["Paris"], ["1990"]]) == 1.0
    assert voter.score(VoteBatch(answers, golds=[["Lyon"], ["1990"]])) == 0.5


def test_unfitted_voter_raises_a_clear_error():
    voter = Voter()
    for call in (
        lambda: voter.predict(VoteBatch([["a", "b"]])),
        lambda: voter.decision_function(BATCH),
        lambda: voter.decision_scores([["a", "b"]]),
        lambda: save_voter(voter, "x.json"),
        lambda: voter.active_members_,
    ):
        with pytest.raises(NotFittedError, match="Voter is not fitted.*fit\\(X, y\\).*load_voter"):
            call()


def test_sklearn_protocol():
    voter = Voter(pooling="max", restarts=2)
    params = voter.get_params()
    assert params["pooling"] == "max" and params["restarts"] == 2 and params["metrics"] == ("em", "f1", "cosine")
    assert set(params) >= {
        "metrics",
        "pooling",
        "threshold",
        "member_threshold",
        "max_weight",
        "restarts",
        "seed",
        "correctness",
        "grounding",
    }
    assert voter.set_params(threshold=0.7) is voter and voter.threshold == 0.7
    assert Voter(**voter.get_params()).get_params() == voter.get_params()
    assert repr(voter) == "Voter(pooling='max', restarts=2, threshold=0.7)"  # scikit-learn's repr
    with pytest.raises(ConfigError, match="no parameter.*colour.*valid: cache_dir, correctness"):
        voter.set_params(colour="red")
    assert not hasattr(Voter(), "retriever_weights_")  # __init__ stores hyper-parameters only


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"metrics": ("em", "bleu")}, "unknown similarity metric.*bleu.*available"),
        ({"pooling": "median"}, "unknown pooling.*mean, max, majority, plurality, search"),
        ({"correctness": "bleu"}, "unknown correctness.*em, f1, contains"),
        ({"max_weight": 0.1}, "member_threshold < max_weight"),
        ({"metrics": ("em", "em")}, "repeat"),
        ({"metric_params": {"cosine": {}}, "metrics": ("em",)}, "metric_params.*cosine"),
    ],
)
def test_bad_hyper_parameters_are_config_errors(params, message):
    with pytest.raises(ConfigError, match=message):
        Voter.uniform(3, **params)


def test_wrong_member_count_is_an_input_error():
    with pytest.raises(InputError, match="3 members"):
        Voter.uniform(3, metrics=("em",)).predict(VoteBatch([["a", "b"]]))


def test_grounding_term_by_hand():
    # s_m = ω^r_m · (pool_m + ω^g · g_m); pools (0.43, 0.37, 0.10) from the first test
    voter = with_weights([0.6, 0.2], [0.2, 0.5, 0.6], grounding=0.5)
    grounded = VoteBatch(BATCH.answers, [[["x"], ["y"], ["... c ..."]]])  # g = (0, 0, 1)
    # m2: 0.6 · (0.10 + 0.5) = 0.36 beats m1: 0.5 · 0.37 = 0.185
    np.testing.assert_allclose(voter.decision_function(grounded), [[0.086, 0.185, 0.36]])
    with pytest.raises(InputError, match="grounding"):
        voter.decision_function(BATCH)


def test_grounding_from_passages():
    voter = Voter.uniform(2, metrics=("em",), grounding=True, grounding_weight=0.5)
    answers = [["Paris", "Lyon"], ["1990", ""]]
    passages = [["Paris is the capital.", ["Marseille is large.", "Nice too."]], ["", "In 1990, ..."]]
    # q0: members disagree (pools 0); member 0 grounded -> s = 0.5·(0 + 0.5) = 0.25 vs 0 -> 0
    # q1: nobody grounded ("1990" not in "", an empty answer never is) -> tie -> 0
    np.testing.assert_allclose(voter.decision_scores(answers, passages), [[0.25, 0.0], [0.0, 0.0]])
    answers[0] = ["Lyon", "Paris"]
    assert voter.predict(VoteBatch(answers, [[["Marseille."], ["Paris!"]], [[], ["In 1990, ..."]]])).tolist() == [1, 0]
    with pytest.raises(InputError, match="passages"):
        voter.predict(VoteBatch(answers))


def test_weights_file_round_trip(tmp_path):
    voter = with_weights([0.6, 0.2], [0.3, 0.1, 0.6], members=["SE@5", "Wiki@5", "ReFree"])
    voter.train_score_, voter.dev_score_ = 0.5, 0.4
    path = save_voter(voter, tmp_path / "w" / "weights.json", reader="qwen2.5-0.5b", dataset="nq")
    document = json.loads(path.read_text())
    assert document["members"] == ["SE@5", "Wiki@5", "ReFree"] and document["metrics"] == ["sim_a", "sim_b"]
    assert document["meta"] == {"reader": "qwen2.5-0.5b", "dataset": "nq", "objective": "em"}
    assert document["train_score"] == 0.5 and document["dev_score"] == 0.4
    assert document["eor_version"] and document["active_members"] == [0, 2]
    loaded = load_voter(path, members=["SE@5", "Wiki@5", "ReFree"])
    np.testing.assert_allclose(loaded.decision_function(BATCH), voter.decision_function(BATCH))
    assert loaded.get_params() == {**voter.get_params(), "members": ["SE@5", "Wiki@5", "ReFree"]}
    assert loaded.metadata_["dataset"] == "nq" and loaded.train_score_ == 0.5


def test_weights_file_members_are_checked_and_reordered(tmp_path):
    voter = with_weights([0.6, 0.2], [0.3, 0.1, 0.6], members=["SE@5", "Wiki@5", "ReFree"])
    path = save_voter(voter, tmp_path / "weights.json")
    with pytest.raises(ConfigError, match="missing from the pool: Wiki@5; not in the weights file: BM25@5"):
        load_voter(path, members=["SE@5", "BM25@5", "ReFree"])
    with pytest.raises(ConfigError, match="missing from the pool: ReFree"):
        load_voter(path, members=["SE@5", "Wiki@5"])
    reordered = load_voter(path, members=["ReFree", "SE@5", "Wiki@5"])
    np.testing.assert_allclose(reordered.retriever_weights_, [0.6, 0.3, 0.1])
    np.testing.assert_allclose(load_voter(path).retriever_weights_, [0.3, 0.1, 0.6])


def test_bad_weights_files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_voter(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_voter(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"weights": []}')
    with pytest.raises(ConfigError, match="not an eor voter weights file"):
        load_voter(tmp_path / "other.json")


@pytest.mark.parametrize("pooling", ["mean", "max", "majority", "plurality"])
def test_fast_scorer_equals_the_generic_pooling(pooling):
    # The scorer's shortcuts (per-metric means of the active set, kept for recent sets) must give exactly
    # ω^r_m · pool(Σ_k ω^s_k sim_k) with −inf for dropped members, for many weight settings in a row.
    from voters import pool

    rng = np.random.default_rng(11)
    tensor = rng.uniform(size=(20, 6, 6, 3))
    scorer = VoteScorer(tensor)
    for _ in range(40):
        metric = rng.uniform(0, 0.6, size=3)
        retriever = rng.uniform(0, 0.6, size=6)
        active = retriever > 0.1
        combined = np.einsum("qmnk,k->qmn", tensor, metric)
        expected = np.where(active, retriever * pool(pooling, combined, active, 0.4), -np.inf)
        got = scorer.scores(metric, retriever, pooling=pooling, threshold=0.4, member_threshold=0.1)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
