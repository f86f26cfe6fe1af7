"""The `nli` similarity with a tiny BERT sequence classifier built from a config (nothing is downloaded).

The model's weights are random, so the values mean nothing; what is tested is the code around the model:
the entailment label found through config.id2label, batching, and the two directions combined.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from eor.core.errors import ConfigError
from tests.tiny_bert import build_tiny_bert
from voters.similarity import similarity_tensor
from voters.similarity.nli import NliSimilarity, entailment_index

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

WORDS = "paris france lyon city capital the of is a river seine london england shakespeare wrote".split()
LABELS = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
PAIRS = [
    ("paris", "paris france"),
    ("the capital of england is london", "london"),
    ("the shakespeare", "shakespeare wrote"),
    ("lyon", "the river seine"),
    ("paris", "paris"),
]


def build_model(folder: Path, id2label: dict[int, str]) -> Path:
    return build_tiny_bert(folder, WORDS, id2label)


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("tiny-nli"), LABELS)


@functools.cache
def load_reference(folder: Path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    return AutoTokenizer.from_pretrained(folder), AutoModelForSequenceClassification.from_pretrained(folder).eval()


def reference_entailment(folder: Path, premise: str, hypothesis: str, index: int) -> float:
    """P(entailment) computed directly with transformers, one pair at a time."""
    tokenizer, model = load_reference(folder)
    with torch.no_grad():
        logits = model(**tokenizer(premise, hypothesis, return_tensors="pt")).logits[0]
    return float(torch.softmax(logits, dim=-1)[index])


@pytest.mark.parametrize(
    ("id2label", "expected"),
    [
        ({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, 2),
        ({"0": "entailment", "1": "neutral", "2": "contradiction"}, 0),
        ({0: "not_entailment", 1: "entailment"}, 1),
        ({0: "Entails", 1: "Non-entailment"}, 0),
    ],
)
def test_entailment_label_found_in_id2label(id2label, expected):
    assert entailment_index(id2label) == expected


def test_entailment_label_missing_or_explicit():
    with pytest.raises(ConfigError, match="0=LABEL_0, 1=LABEL_1.*entailment_label"):
        entailment_index({0: "LABEL_0", 1: "LABEL_1"})
    assert entailment_index({0: "LABEL_0", 1: "LABEL_1"}, "label_1") == 1
    assert entailment_index({0: "LABEL_0", 1: "LABEL_1"}, 0) == 0
    with pytest.raises(ConfigError, match="is not one of"):
        entailment_index(LABELS, "yes")


def test_entailment_matches_direct_model_call(tiny_nli):
    metric = NliSimilarity(model=str(tiny_nli))
    got = metric.entailment(PAIRS)
    expected = [reference_entailment(tiny_nli, a, b, 2) for a, b in PAIRS]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.ptp(got) > 0.01  # the pairs really differ, so the comparison means something


def test_label_mapping_follows_the_model_config(tmp_path):
    reordered = build_model(tmp_path / "reordered", {0: "entailment", 1: "neutral", 2: "contradiction"})
    got = NliSimilarity(model=str(reordered)).entailment(PAIRS[:2])
    expected = [reference_entailment(reordered, a, b, 0) for a, b in PAIRS[:2]]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_batches_equal_one_by_one(tiny_nli):
    batched = NliSimilarity(model=str(tiny_nli), batch_size=3).score_pairs(PAIRS)
    single = np.concatenate([NliSimilarity(model=str(tiny_nli), batch_size=1).score_pairs([p]) for p in PAIRS])
    np.testing.assert_allclose(batched, single, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("combine", "function"), [("mean", lambda f, b: (f + b) / 2), ("min", min), ("max", max)])
def test_both_directions_are_combined(tiny_nli, combine, function):
    metric = NliSimilarity(model=str(tiny_nli), combine=combine)
    forward = metric.entailment([(a, b) for a, b in PAIRS])
    backward = metric.entailment([(b, a) for a, b in PAIRS])
    assert np.max(np.abs(forward - backward)) > 1e-3  # the directions differ for this model
    expected = [function(f, b) for f, b in zip(forward, backward, strict=True)]
    np.testing.assert_allclose(metric.score_pairs(PAIRS), expected, rtol=1e-6)
    np.testing.assert_allclose(metric.score_pairs([(b, a) for a, b in PAIRS]), expected, rtol=1e-6)


def test_nli_in_the_similarity_tensor_and_a_voter(tiny_nli):
    from voters import VoteBatch, Voter

    answers = [["paris", "paris france", "lyon"], ["london", "london", "seine"]]
    params = {"nli": {"model": str(tiny_nli)}}
    tensor = similarity_tensor(answers, ["em", "nli"], metric_params=params)
    metric = NliSimilarity(model=str(tiny_nli))
    assert tensor[0, 0, 1, 1] == pytest.approx(metric.score_pairs([("paris", "paris france")])[0], rel=1e-5)
    assert tensor[1, 0, 1, 1] == pytest.approx(metric.score_pairs([("london", "london")])[0], rel=1e-5)
    voter = Voter.uniform(3, metrics=("em", "nli"), metric_params=params)
    assert voter.predict(VoteBatch(answers)).tolist()[1] == 0  # two identical answers agree by em; ties go low
