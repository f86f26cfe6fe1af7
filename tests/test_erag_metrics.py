"""Retrieval metrics (hand-worked values, and equality with pytrec_eval through ir-measures) and the
correlations (equality with scipy.stats)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from scipy import stats

from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.evaluation.erag import correlation as corr
from eor.evaluation.erag.metrics import (
    MetricSpec,
    default_metrics,
    is_binary,
    mean_scores,
    parse_metric,
    parse_metrics,
    score,
    score_questions,
)

L3, L4, L5, L6 = (math.log2(n) for n in (3, 4, 5, 6))


def value(name: str, labels: list[float], judged: list[float] | None = None) -> float:
    return parse_metric(name)(labels, judged)


# --- hand-worked values: binary labels ---------------------------------------------------------------
# labels by rank 1..5: 0 1 0 1 1 -> relevant at ranks 2, 4, 5; 3 relevant in the list.
BINARY = [0, 1, 0, 1, 1]


def test_precision_binary():
    assert value("P@1", BINARY) == 0.0  # rank 1 not relevant
    assert value("P@3", BINARY) == pytest.approx(1 / 3)  # 1 relevant in the top 3
    assert value("P@5", BINARY) == pytest.approx(3 / 5)
    assert value("P@10", BINARY) == pytest.approx(3 / 10)  # divided by the cutoff 10, not by the 5 retrieved
    assert value("P", BINARY) == pytest.approx(3 / 5)  # no cutoff: the whole list


def test_recall_binary():
    assert value("R@2", BINARY) == pytest.approx(1 / 3)  # 1 of the 3 relevant in the top 2
    assert value("R@4", BINARY) == pytest.approx(2 / 3)
    assert value("R@5", BINARY) == 1.0
    # qrels-style: 2 more relevant documents that were not retrieved -> 5 relevant in all
    assert value("R@5", BINARY, judged=[1, 1, 1, 1, 1]) == pytest.approx(3 / 5)


def test_average_precision_binary():
    # precision at each relevant rank: 1/2, 2/4, 3/5; sum 1.6, divided by 3 relevant
    assert value("MAP@5", BINARY) == pytest.approx((1 / 2 + 2 / 4 + 3 / 5) / 3)
    # cut at 2: only rank 2 counts, still divided by all 3 relevant (trec_eval's map_cut)
    assert value("MAP@2", BINARY) == pytest.approx((1 / 2) / 3)
    assert value("MAP@1", BINARY) == 0.0


def test_reciprocal_rank_binary():
    assert value("MRR@1", BINARY) == 0.0  # first relevant at rank 2 > cutoff 1
    assert value("MRR@5", BINARY) == 0.5  # 1 / 2
    assert value("MRR", [0, 0, 0, 1]) == 0.25


def test_ndcg_binary():
    # NDCG@3: DCG = 1/log2(3) (rank 2); ideal = 3 relevant at the top: 1 + 1/log2(3) + 1/log2(4)
    assert value("NDCG@3", BINARY) == pytest.approx((1 / L3) / (1 + 1 / L3 + 1 / L4))
    # NDCG@5: DCG = 1/log2(3) + 1/log2(5) + 1/log2(6) (ranks 2, 4, 5), same ideal
    assert value("NDCG@5", BINARY) == pytest.approx((1 / L3 + 1 / L5 + 1 / L6) / (1 + 1 / L3 + 1 / L4))
    assert value("NDCG@5", [1, 1, 1, 0, 0]) == 1.0  # already ideal


def test_hit_binary():
    assert value("Hit@1", BINARY) == 0.0
    assert value("Hit@2", BINARY) == 1.0


def test_nothing_relevant_is_zero_as_in_trec_eval():
    # R, MAP and NDCG divide by the relevant mass, 0 here: trec_eval reports 0, and so does eor (not NaN)
    for name in ("P@3", "R@3", "MAP@3", "MRR@3", "NDCG@3", "Hit@3", "R", "NDCG"):
        assert value(name, [0, 0, 0]) == 0.0
        assert value(name, []) == 0.0


# --- hand-worked values: graded labels ---------------------------------------------------------------
# labels by rank 1..4: 0.5 0 1 0.25 (e.g. eRAG labels from token F1); label mass 1.75.
GRADED = [0.5, 0, 1, 0.25]


def test_precision_graded_is_the_mean_label_over_the_cutoff():
    assert value("P@2", GRADED) == pytest.approx((0.5 + 0) / 2)
    assert value("P@4", GRADED) == pytest.approx(1.75 / 4)
    assert value("P@5", GRADED) == pytest.approx(1.75 / 5)  # divided by the cutoff, as the eRAG reference


def test_hit_graded_is_the_max_label():
    assert value("Hit@2", GRADED) == 0.5
    assert value("Hit@4", GRADED) == 1.0


def test_recall_graded_is_the_share_of_label_mass():
    assert value("R@2", GRADED) == pytest.approx(0.5 / 1.75)
    assert value("R@4", GRADED) == 1.0


def test_average_precision_graded():
    # sum over ranks of label * (label mass so far / rank): 0.5*0.5/1 + 0 + 1*1.5/3 + 0.25*1.75/4
    expected = (0.5 * 0.5 / 1 + 1 * 1.5 / 3 + 0.25 * 1.75 / 4) / 1.75
    assert value("MAP@4", GRADED) == pytest.approx(expected)
    assert expected == pytest.approx(0.859375 / 1.75)


def test_reciprocal_rank_graded_is_expected_reciprocal_rank():
    # rank 1 satisfies with 0.5 -> 0.5/1; rank 3 with 1 when rank 1 did not (0.5) -> 0.5 * 1/3; then stop
    assert value("MRR@4", GRADED) == pytest.approx(0.5 + 0.5 / 3)
    assert value("MRR@2", GRADED) == 0.5


def test_ndcg_graded_gains():
    # DCG@2 = 0.5/log2(2) + 0 = 0.5; ideal order 1, 0.5, 0.25, 0 -> IDCG@2 = 1 + 0.5/log2(3)
    assert value("NDCG@2", GRADED) == pytest.approx(0.5 / (1 + 0.5 / L3))
    # DCG@4 = 0.5 + 1/log2(4) + 0.25/log2(5); IDCG@4 = 1 + 0.5/log2(3) + 0.25/log2(4)
    expected = (0.5 + 1 / L4 + 0.25 / L5) / (1 + 0.5 / L3 + 0.25 / L4)
    assert value("NDCG@4", GRADED) == pytest.approx(expected)


def test_graded_definitions_reduce_to_binary_ones():
    rng = random.Random(3)
    for _ in range(200):
        labels = [float(rng.random() < 0.3) for _ in range(rng.randint(0, 12))]
        for spec in default_metrics(rng.randint(1, 15)):
            # MRR as ERR equals 1/rank of the first relevant document
            if spec.base == "MRR":
                first = next((i for i, label in enumerate(labels[: spec.k], start=1) if label), None)
                assert spec(labels) == (0.0 if first is None else 1 / first)
            if spec.base == "Hit":
                assert spec(labels) == float(any(labels[: spec.k]))


# --- names and inputs --------------------------------------------------------------------------------


def test_parse_names_and_aliases():
    assert parse_metric("NDCG@10") == MetricSpec("NDCG", 10)
    assert parse_metric("ndcg@10").name == "NDCG@10"
    assert parse_metric("ndcg_cut_10").name == "NDCG@10"  # pytrec_eval spelling, as the eRAG reference
    assert parse_metric("P_5").name == "P@5"
    assert parse_metric("recall_20").name == "R@20"
    assert parse_metric("map_cut_3").name == "MAP@3"
    assert parse_metric("recip_rank").name == "MRR"
    assert parse_metric("success_1").name == "Hit@1"
    assert parse_metric("hit@3").name == "Hit@3"
    assert parse_metric(" MAP ").name == "MAP"
    assert [spec.name for spec in parse_metrics("P@10, NDCG@10,P@10")] == ["P@10", "NDCG@10"]
    assert [spec.name for spec in default_metrics(10)] == ["P@10", "R@10", "MAP@10", "MRR@10", "NDCG@10", "Hit@10"]


@pytest.mark.parametrize("name", ["BLEU@10", "NDCG@ten", "NDCG@0", "@10", "", "NDCG@-1", "ndcg@10@2"])
def test_bad_names_raise(name):
    with pytest.raises(InputError) as error:
        parse_metric(name)
    assert "NDCG@10" in str(error.value) or "at least 1" in str(error.value)


def test_unknown_metric_names_the_known_ones():
    with pytest.raises(InputError, match="unknown retrieval metric 'BLEU'.*P, R, MAP, MRR, NDCG, Hit"):
        parse_metric("BLEU@10")
    with pytest.raises(InputError, match="no retrieval metric"):
        parse_metrics([])


@pytest.mark.parametrize("labels", [[0.5, 1.5], [-0.1], [math.nan], ["x"]])
def test_labels_must_be_in_unit_interval(labels):
    with pytest.raises(InputError):
        score(labels, ["P@1"])


def test_per_question_scores_and_means():
    per_question = score_questions({"a": [1, 0], "b": [0, 0], "c": [0, 1]}, ["P@2", "MRR@2"])
    assert per_question["a"] == {"P@2": 0.5, "MRR@2": 1.0}
    assert per_question["c"] == {"P@2": 0.5, "MRR@2": 0.5}
    assert mean_scores(per_question) == {"P@2": pytest.approx(1 / 3), "MRR@2": pytest.approx(0.5)}
    assert mean_scores({"a": {"P@2": 1.0}, "b": {}}) == {"P@2": 1.0}  # a question without the metric is skipped
    assert is_binary([0, 1.0, 1]) and not is_binary([0, 0.5])


# --- equality with an independent implementation: pytrec_eval (trec_eval) through ir-measures --------


def _random_runs(seed: int, queries: int, graded: bool = False):
    rng = random.Random(seed)
    runs = {}
    for q in range(queries):
        length = rng.randint(1, 25)
        rate = rng.choice([0.0, 0.1, 0.3, 0.7])
        if graded:
            runs[f"q{q}"] = [rng.choice([0, 0, 1, 2, 3]) if rng.random() < rate + 0.2 else 0 for _ in range(length)]
        else:
            runs[f"q{q}"] = [int(rng.random() < rate) for _ in range(length)]
    return runs


def _ir_measures_values(runs, measures, extra_relevant=None):
    """(query id, str(measure)) -> value from pytrec_eval. trec_eval has no cutoff for reciprocal rank
    (ir-measures' pytrec_eval provider does not support RR@k), so RR@k is trec_eval's `recip_rank` on the
    run truncated to its top k."""
    ir_measures = pytest.importorskip("ir_measures")
    qrels = []
    for qid, labels in runs.items():
        qrels += [ir_measures.Qrel(qid, f"d{rank}", int(label)) for rank, label in enumerate(labels)]
        qrels += [ir_measures.Qrel(qid, f"unretrieved{n}", 1) for n in range((extra_relevant or {}).get(qid, 0))]

    def run(depth=None):
        return [
            ir_measures.ScoredDoc(qid, f"d{rank}", float(len(labels) - rank))
            for qid, labels in runs.items()
            for rank in range(len(labels[:depth]))
        ]

    values = {}
    plain = [m for m in measures if not (m.NAME == "RR" and "@" in str(m))]
    for metric in ir_measures.pytrec_eval.iter_calc(plain, qrels, run()):
        values[(metric.query_id, str(metric.measure))] = metric.value
    for measure in (m for m in measures if m not in plain):
        for metric in ir_measures.pytrec_eval.iter_calc([ir_measures.RR], qrels, run(measure["cutoff"])):
            values[(metric.query_id, str(measure))] = metric.value
    return values


def _measures(cutoffs):
    import ir_measures

    names = {"P": ir_measures.P, "R": ir_measures.R, "MAP": ir_measures.AP, "MRR": ir_measures.RR}
    names |= {"NDCG": ir_measures.nDCG, "Hit": ir_measures.Success}
    pairs = {}
    for k in cutoffs:
        for base, measure in names.items():
            pairs[f"{base}@{k}"] = measure @ k
    for base in ("MAP", "MRR", "NDCG"):  # no cutoff: the whole ranking
        pairs[base] = names[base]
    return pairs


def test_binary_metrics_equal_pytrec_eval_on_random_runs():
    pytest.importorskip("ir_measures")
    runs = _random_runs(seed=7, queries=300)
    assert any(not any(labels) for labels in runs.values())  # queries with nothing relevant are included
    pairs = _measures([1, 2, 3, 5, 10, 20, 30])  # cutoffs below and above the list lengths (1..25)
    reference = _ir_measures_values(runs, list(pairs.values()))
    checked = 0
    for qid, labels in runs.items():
        ours = score(labels, list(pairs))
        for name, measure in pairs.items():
            assert ours[name] == pytest.approx(reference[(qid, str(measure))], abs=1e-9), (qid, name, labels)
            checked += 1
    assert checked == 300 * len(pairs)


def test_qrels_judged_labels_equal_pytrec_eval():
    # relevant documents that were not retrieved count in R, MAP and NDCG's ideal through `judged`
    pytest.importorskip("ir_measures")
    runs = _random_runs(seed=11, queries=150)
    rng = random.Random(5)
    extra = {qid: rng.randint(0, 3) for qid in runs}
    pairs = {name: measure for name, measure in _measures([1, 3, 10, 30]).items() if name.split("@")[0] != "P"}
    reference = _ir_measures_values(runs, list(pairs.values()), extra)
    for qid, labels in runs.items():
        judged = [float(label) for label in labels] + [1.0] * extra[qid]
        ours = score(labels, list(pairs), judged=judged)
        for name, measure in pairs.items():
            assert ours[name] == pytest.approx(reference[(qid, str(measure))], abs=1e-9), (qid, name)


def test_graded_ndcg_equals_pytrec_eval_with_scaled_grades():
    # NDCG is invariant to scaling the gains, so grades 0..3 divided by 3 must match trec_eval's grades 0..3
    pytest.importorskip("ir_measures")
    import ir_measures

    runs = _random_runs(seed=13, queries=200, graded=True)
    measures = {k: ir_measures.nDCG @ k for k in (1, 3, 5, 10, 30)}
    reference = _ir_measures_values(runs, list(measures.values()))
    for qid, grades in runs.items():
        labels = [grade / 3 for grade in grades]
        for k, measure in measures.items():
            assert MetricSpec("NDCG", k)(labels) == pytest.approx(reference[(qid, str(measure))], abs=1e-9)


# --- correlations: equality with scipy.stats ---------------------------------------------------------


def _samples():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 17, 100, 1500):
        yield rng.normal(size=n), rng.normal(size=n)
        # heavy ties, like per-question metric values against 0/1 end-to-end scores
        yield rng.integers(0, 4, size=n) / 3, rng.integers(0, 2, size=n).astype(float)
        x = rng.random(size=n)
        yield x, 2 * x + rng.normal(scale=0.1, size=n)


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_kendall_and_spearman_equal_scipy():
    checked = 0
    for x, y in _samples():
        tau = stats.kendalltau(x, y).statistic  # tau-b by default
        rho = stats.spearmanr(x, y).statistic
        r = stats.pearsonr(x, y).statistic
        for ours, theirs in ((corr.kendall_tau(x, y), tau), (corr.spearman_rho(x, y), rho), (corr.pearson_r(x, y), r)):
            if math.isnan(theirs):
                assert math.isnan(ours)
            else:
                assert ours == pytest.approx(theirs, abs=1e-12)
                checked += 1
    assert checked >= 40


def test_hand_worked_correlations():
    # x = 1, 0.5, 1 against y = 0, 1, 0: pairs (1,2) and (2,3) discordant, (1,3) tied in both -> tau_b = -2/2
    assert corr.kendall_tau([1, 0.5, 1], [0, 1, 0]) == pytest.approx(-1.0)
    assert corr.spearman_rho([1, 0.5, 1], [0, 1, 0]) == pytest.approx(-1.0)
    assert corr.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)  # 5 concordant, 1 discordant


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_undefined_correlations_are_nan_and_none_in_json():
    constant = [0.1, 0.1, 0.1, 0.1]
    varying = [0.0, 1.0, 0.0, 1.0]
    for name in ("kendall_tau", "spearman_rho", "pearson_r"):
        assert math.isnan(corr.CORRELATIONS[name](constant, varying))
        assert math.isnan(corr.CORRELATIONS[name]([1.0], [2.0]))
    assert math.isnan(stats.spearmanr(constant, varying).statistic)  # scipy agrees
    result = corr.correlate(constant, varying)
    assert json.loads(json.dumps(json_ready(result))) == {"kendall_tau": None, "spearman_rho": None, "n": 4}


def test_missing_values_are_dropped_pairwise():
    x = [1.0, None, 3.0, math.nan, 5.0, 2.0]
    y = [2.0, 1.0, 1.0, 4.0, 6.0, math.nan]
    result = corr.correlate(x, y, ["kendall_tau", "spearman_rho", "pearson_r"])
    assert result["n"] == 3
    assert result["kendall_tau"] == pytest.approx(stats.kendalltau([1, 3, 5], [2, 1, 6]).statistic)
    assert result["pearson_r"] == pytest.approx(stats.pearsonr([1, 3, 5], [2, 1, 6]).statistic)
    with pytest.raises(InputError):
        corr.correlate([1, 2], [1, 2, 3])
    with pytest.raises(InputError, match="unknown correlation"):
        corr.correlate([1, 2], [1, 2], ["cosine"])
