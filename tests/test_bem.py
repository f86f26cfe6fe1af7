"""BEM correctness with a tiny BERT answer-equivalence classifier the test builds (nothing is downloaded):
the original input layout and segment ids against a forward pass built by hand, exact matches short-cut,
question-aware scoring in correctness_matrix, and `eor bench --metric bem`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eor.cli import main
from eor.core.correctness import correctness_matrix
from eor.core.correctness.bem import BemCorrectness
from eor.core.errors import InputError
from tests.tiny_bert import build_tiny_bert

torch = pytest.importorskip("torch")
WORDS = "who wrote hamlet shakespeare william the capital of france paris lyon is".split()
ROOT = Path(__file__).resolve().parent.parent


def build_bem(folder: Path, token_types: int) -> Path:
    return build_tiny_bert(folder, WORDS, {0: "different", 1: "equivalent"}, token_types=token_types, seed=1)


@pytest.fixture(scope="module")
def bem3(tmp_path_factory) -> Path:
    return build_bem(tmp_path_factory.mktemp("bem3"), 3)


def by_hand(folder: Path, question: str, candidate: str, reference: str, third: int) -> float:
    """P(equivalent) from ids and segments written out word by word (the BEM colab's layout)."""
    from transformers import AutoModelForSequenceClassification

    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    words = [w.lower().split() for w in (candidate, reference, question)]
    ids = [vocab["[CLS]"], *[vocab[w] for w in words[0]], vocab["[SEP]"], *[vocab[w] for w in words[1]]]
    ids += [vocab["[SEP]"], *[vocab[w] for w in words[2]], vocab["[SEP]"]]
    segments = [0] * (len(words[0]) + 2) + [1] * (len(words[1]) + 1) + [third] * (len(words[2]) + 1)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([segments])).logits[0]
    return float(torch.softmax(logits, dim=-1)[1])


TRIPLES = [
    ("who wrote hamlet", "william shakespeare", "shakespeare"),
    ("the capital of france is", "lyon", "paris"),
    ("who wrote hamlet", "the capital", "william shakespeare"),
]


@pytest.mark.parametrize("token_types", [3, 2])
def test_probabilities_match_a_forward_pass_built_by_hand(tmp_path, token_types) -> None:
    folder = build_bem(tmp_path / f"bem{token_types}", token_types)
    metric = BemCorrectness(str(folder), batch_size=2)  # two batches: padding must not change a score
    third = 2 if token_types == 3 else 1
    expected = [by_hand(folder, *triple, third) for triple in TRIPLES]
    assert metric.probabilities(TRIPLES) == pytest.approx(expected, abs=1e-6)
    assert len(set(round(p, 4) for p in expected)) == 3  # the tiny model tells these inputs apart


def test_equal_answers_short_cut_and_the_threshold_decides_the_rest(bem3) -> None:
    metric = BemCorrectness(str(bem3))
    probabilities = metric.probabilities(TRIPLES)
    scores = metric.score([*TRIPLES, ("q", "The Paris.", "paris"), ("q", "", "paris")])
    assert scores == [float(p >= 0.5) for p in probabilities] + [1.0, 0.0]
    metric.threshold = 0.0
    assert metric.score(TRIPLES) == [1.0, 1.0, 1.0]


def test_correctness_matrix_scores_each_triple_once_with_its_question(bem3) -> None:
    calls = []

    class Counting(BemCorrectness):
        def probabilities(self, triples):
            calls.append(list(triples))
            return super().probabilities(triples)

    from eor.core.correctness import CORRECTNESS

    CORRECTNESS.register("bem-counting", Counting(str(bem3)))
    try:
        answers = [["william shakespeare", "william shakespeare", "lyon"], ["paris", "lyon", "is"]]
        golds = [["shakespeare", "hamlet"], ["paris"]]
        questions = ["who wrote hamlet", "the capital of france is"]
        with pytest.raises(InputError, match="judges each answer with its question"):
            correctness_matrix(answers, golds, "bem-counting")
        matrix = correctness_matrix(answers, golds, "bem-counting", questions)
    finally:
        CORRECTNESS.unregister("bem-counting")
    (judged,) = calls
    assert len(judged) == len(set(judged)) == 6  # 2 distinct answers × 2 golds + 2 non-equal answers × 1 gold
    assert matrix.shape == (2, 3) and matrix[1, 0] == 1.0  # "paris" = "paris": no model call needed
    single = BemCorrectness(str(bem3))
    for q, row in enumerate(answers):
        for m, answer in enumerate(row):
            assert matrix[q, m] == max(single.score([(questions[q], answer, gold) for gold in golds[q]]))


def test_eor_bench_reports_bem_and_says_when_the_model_is_missing(bem3, tmp_path, capsys) -> None:
    import gzip

    with gzip.open(ROOT / "docs/records/nq-dev.jsonl.gz", "rt", encoding="utf-8") as handle:
        records = [line for line in handle if '"eor_records"' not in line][:12]
    (tmp_path / "records.jsonl").write_text("".join(records))
    out = tmp_path / "report"
    argv = ["bench", str(tmp_path / "records.jsonl"), "--out", str(out), "--metrics", "em,f1", "--metric", "bem"]
    assert main(argv) == 1
    assert "--metric bem needs a BEM model: --bem-model" in capsys.readouterr().err
    assert main([*argv, "--bem-model", str(bem3)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["metric"] == "bem" and 0.0 <= report["eor"]["bem"] <= 1.0
    assert report["oracle"]["bem"] >= report["oracle"]["em"]  # equal strings always count
    assert main(argv) == 1  # --bem-model held for that command alone: nothing configured is left behind
