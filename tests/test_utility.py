"""Context utility U = (P(context) − P(0-shot)) / P(0-shot) and its Pearson correlation with nDCG@k."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy import stats

from eor.core.errors import InputError
from eor.evaluation.erag.utility import evaluate_utility, pair_scorer, performance_scores, utility

ZERO_SHOT = "unknown Paris Lyon Rome"


class FirstAnswerReader:
    """The answer named by the FIRST passage of the prompt (so order matters); 0-shot: four guesses."""

    name = "first-answer"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        self.calls.append(list(prompts))
        answers = []
        for prompt in prompts:
            match = re.search(r"ANSWER: (\w+)", prompt)
            answers.append(match.group(1) if match else ZERO_SHOT)
        return answers


class IdentifiedReader(FirstAnswerReader):
    """FirstAnswerReader with an identity: the generation stage caches it."""

    identity = "first-answer:v1"


def doc(doc_id: str, answer: str) -> dict[str, str]:
    return {"id": doc_id, "title": "", "text": f"ANSWER: {answer}"}


RETRIEVAL = {
    "q1": [doc("paris", "Paris"), doc("lyon", "Lyon")],
    "q2": [doc("rome", "Rome"), doc("lyon", "Lyon")],
    "q3": [doc("rome", "Rome")],
    "q4": [doc("bard", "Shakespeare")],
}
REFERENCES = {"q1": ["Paris"], "q2": ["Lyon"], "q3": "Rome", "q4": ["Shakespeare"]}
RELEVANT = {"q1": ["paris"], "q2": ["lyon"], "q3": ["rome", "unretrieved"], "q4": []}


def run(reader_class=FirstAnswerReader, **kwargs):
    reader = reader_class()
    options = {"similarity": "f1", "ks": (1, 2), "relevant": RELEVANT} | kwargs
    return reader, evaluate_utility(RETRIEVAL, REFERENCES, reader, **options)


def test_utility_formula():
    assert utility(0.6, 0.4) == pytest.approx(0.5)
    assert utility(0.2, 0.4) == pytest.approx(-0.5)
    assert math.isnan(utility(0.5, 0.0))  # undefined: the paper never meets P(0-shot) = 0 with BERTScore
    assert utility(0.5, 0.0, epsilon=0.1) == pytest.approx(5.0)
    assert utility(0.5, 0.4, epsilon=0.1) == pytest.approx(0.25)  # epsilon only floors the denominator
    assert math.isnan(utility(math.nan, 0.4))


def test_utilities_by_hand():
    reader, result = run()
    by_id = {entry["id"]: entry for entry in result.questions}
    # 0-shot "unknown Paris Lyon Rome" against a one-word reference: token F1 = 2·(1/4)·1 / (1/4 + 1) = 0.4
    assert by_id["q1"]["zero_shot"]["p"] == pytest.approx(0.4)
    # a right answer: (1 − 0.4) / 0.4 = 1.5; a wrong one: (0 − 0.4) / 0.4 = −1
    q1, q2 = by_id["q1"]["contexts"], by_id["q2"]["contexts"]
    assert q1["ordered"][1]["utility"] == pytest.approx(1.5)  # [paris] -> Paris
    assert q1["ordered"][2]["utility"] == pytest.approx(1.5)  # [paris, lyon] -> Paris
    assert q1["reversed"][2]["utility"] == pytest.approx(-1.0)  # [lyon, paris] -> Lyon
    assert q1["reversed"][2]["documents"] == ["lyon", "paris"]
    assert q2["ordered"][2]["utility"] == pytest.approx(-1.0)  # [rome, lyon] -> Rome, gold Lyon
    assert q2["reversed"][2]["utility"] == pytest.approx(1.5)
    # nDCG@k of the retrieval order with provenance labels, ideal from all relevant ids:
    assert q1["ordered"][2]["ndcg"] == 1.0 and q1["reversed"][2]["ndcg"] == 1.0
    assert q2["ordered"][1]["ndcg"] == 0.0
    assert q2["ordered"][2]["ndcg"] == pytest.approx(1 / math.log2(3))  # relevant at rank 2, one relevant
    q3 = by_id["q3"]["contexts"]
    assert q3["ordered"][2]["ndcg"] == pytest.approx(1 / (1 + 1 / math.log2(3)))  # 2 relevant, 1 retrieved
    assert q3["ordered"][2]["documents"] == ["rome"]  # a list shorter than k: all of it
    # q4: the 0-shot answer shares no token with "Shakespeare": P(0-shot) = 0, U undefined
    assert by_id["q4"]["zero_shot"]["p"] == 0.0
    assert math.isnan(by_id["q4"]["contexts"]["ordered"][1]["utility"])
    assert result.mean["ordered"][1]["undefined"] == 1
    # means over the defined utilities: k=1 ordered: 1.5 (q1), −1 (q2), 1.5 (q3)
    assert result.mean["ordered"][1]["utility"] == pytest.approx((1.5 - 1 + 1.5) / 3)


def test_pearson_between_ndcg_and_utility():
    _, result = run()
    # k=1 ordered: nDCG 1, 0, 1 against U 1.5, −1, 1.5 (q4 left out: U undefined) -> r = 1
    assert result.correlation["ordered"][1] == {"pearson_r": pytest.approx(1.0), "n": 3}
    # k=2 reversed: nDCG 1, 1/log2 3, 1/(1 + 1/log2 3) against U −1, 1.5, 1.5
    ndcg = [1.0, 1 / math.log2(3), 1 / (1 + 1 / math.log2(3))]
    expected = stats.pearsonr(ndcg, [-1.0, 1.5, 1.5]).statistic
    assert result.correlation["reversed"][2]["pearson_r"] == pytest.approx(expected, abs=1e-12)


def test_all_prompts_in_one_reader_call_with_repeats_generated_once():
    reader, result = run()
    assert len(reader.calls) == 1
    # per question: 0-shot + ordered/reversed at k = 1, 2 -> 5 requests; k=1 ordered = reversed, and one-document
    # lists give the same context at every k: q1, q2 have 4 distinct, q3, q4 have 2 -> 12 distinct of 20
    assert (result.cost.requests, result.cost.unique, result.cost.generated) == (20, 12, 12)
    assert len(reader.calls[0]) == 12


def test_oracle_contexts_and_json(tmp_path):
    oracle = {"q1": [doc("paris", "Paris")], "q2": [doc("lyon", "Lyon")], "q3": [], "q4": [doc("bard", "Shakespeare")]}
    _, result = run(IdentifiedReader, oracle=oracle, cache=tmp_path / "cache.jsonl")
    by_id = {entry["id"]: entry for entry in result.questions}
    assert by_id["q2"]["contexts"]["oracle"][2]["utility"] == pytest.approx(1.5)
    assert by_id["q2"]["contexts"]["oracle"][2]["ndcg"] == 1.0
    assert by_id["q3"]["contexts"]["oracle"][1]["answer"] == ZERO_SHOT  # no oracle document: the 0-shot prompt
    document = json.loads(json.dumps(result.to_dict()))
    assert set(document["mean"]) == {"ordered", "reversed", "oracle"}
    assert document["questions"][3]["contexts"]["ordered"]["1"]["utility"] is None
    assert document["correlation"]["ordered"]["1"]["n"] == 3
    assert document["cost"]["unique"] == result.cost.unique and document["cost"]["generated"] == result.cost.generated
    # the same run again reads every generation from the on-disk cache
    reader, again = run(IdentifiedReader, oracle=oracle, cache=tmp_path / "cache.jsonl")
    assert reader.calls == [] and again.cost.cache_hits == again.cost.unique and again.cost.generated == 0
    # a reader without an identity is not cached (the generation stage's rule): it is asked again
    reader, anonymous = run(oracle=oracle, cache=tmp_path / "cache.jsonl")
    assert len(reader.calls) == 1 and anonymous.cost.generated == anonymous.cost.unique
    assert anonymous.questions == again.questions


def test_without_relevance_there_is_no_correlation_and_epsilon_defines_all():
    _, result = run(relevant=None, epsilon=0.1, orders=["ordered"])
    assert result.correlation == {"ordered": {}}
    assert result.mean["ordered"][1]["undefined"] == 0
    q4 = next(entry for entry in result.questions if entry["id"] == "q4")
    assert q4["contexts"]["ordered"][1]["utility"] == pytest.approx(10.0)  # (1 − 0) / max(0, 0.1)
    assert math.isnan(q4["contexts"]["ordered"][1]["ndcg"])


def test_similarities():
    pairs = [("Paris", "paris"), ("Paris France", "Paris")]
    assert pair_scorer("f1")(pairs) == pytest.approx([1.0, 2 / 3])  # the voters registry
    assert pair_scorer(lambda a, b: float(a == b))(pairs) == [0.0, 0.0]

    class Batch:
        def score_pairs(self, pairs):
            return np.full(len(pairs), 0.25)

    assert pair_scorer(Batch())(pairs) == [0.25, 0.25]
    with pytest.raises(InputError):
        pair_scorer(3)
    # P is the max over references; no reference -> NaN
    scores = performance_scores([("q", "Paris"), ("z", "x")], {"q": ["Lyon", "Paris"], "z": []}, "f1")
    assert scores[("q", "Paris")] == 1.0 and math.isnan(scores[("z", "x")])


def test_input_errors():
    reader = FirstAnswerReader()
    with pytest.raises(InputError, match="no references"):
        evaluate_utility(RETRIEVAL, {}, reader, similarity="f1")
    with pytest.raises(InputError, match="no relevant"):
        evaluate_utility(RETRIEVAL, REFERENCES, reader, similarity="f1", relevant={})
    with pytest.raises(InputError, match="order"):
        evaluate_utility(RETRIEVAL, REFERENCES, reader, similarity="f1", orders=["shuffled"])
    with pytest.raises(InputError, match="cutoffs"):
        evaluate_utility(RETRIEVAL, REFERENCES, reader, similarity="f1", ks=[0])


@pytest.fixture(scope="module")
def smollm2_one_thread():
    """SmolLM2-135M through llama.cpp on one thread: steadier than all cores on a shared, busy machine."""
    from eor.core.models import resolve_model
    from eor.readers.llamacpp import LlamaCppReader

    return LlamaCppReader(resolve_model("smollm2-135m"), name="smollm2-135m", context_tokens=2048, threads=1)


@pytest.mark.slow
def test_real_reader_with_the_papers_bertscore(smollm2_one_thread):
    # the paper's setting: P = max BERTScore F1 between the answer and the relevant passages' texts
    eiffel = {"id": "p1", "title": "Eiffel Tower", "text": "The Eiffel Tower is a landmark in Paris, France."}
    thames = {"id": "p2", "title": "Thames", "text": "The Thames is the river that flows through London."}
    retrieval = {"a": [thames, eiffel], "b": [thames, eiffel]}
    questions = {"a": "Where is the Eiffel Tower?", "b": "Which river flows through London?"}
    references = {"a": [eiffel["text"]], "b": [thames["text"]]}
    result = evaluate_utility(
        retrieval,
        references,
        smollm2_one_thread,
        questions=questions,
        ks=(1, 2),
        relevant={"a": ["p1"], "b": ["p2"]},
        max_tokens=16,
    )
    assert result.settings["similarity"] == "bertscore"
    assert result.cost.generated == 2 * (1 + 3)  # 0-shot, k=1, k=2 ordered and reversed per question
    for entry in result.questions:
        assert 0.0 < entry["zero_shot"]["p"] <= 1.0
        assert math.isfinite(entry["contexts"]["reversed"][2]["utility"])
    assert result.questions[0]["contexts"]["ordered"][1]["ndcg"] == 0.0
    assert result.correlation["ordered"][1]["n"] == 2
