"""`cosine` and `bertscore` with the real packaged MiniLM-L6 (offline)."""

from __future__ import annotations

import numpy as np
import pytest

from voters.similarity import build_metric, similarity_tensor

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module", autouse=True)
def minilm():
    from eor.core.errors import ModelNotFoundError
    from eor.core.models import resolve_model

    try:
        return resolve_model("minilm-l6")
    except ModelNotFoundError as exc:
        pytest.skip(f"packaged MiniLM not installed: {exc}")


PAIRS = [
    ("Paris", "Paris"),
    ("Paris", "paris, France"),
    ("Paris", "banana bread"),
    ("William Shakespeare", "Shakespeare"),
]


def test_cosine_with_minilm():
    metric = build_metric("cosine")
    scores = metric.score_pairs(PAIRS)
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert scores[1] > 0.8 > 0.3 > scores[2]  # same answer, other surface form > unrelated answer
    assert scores[3] > 0.7
    assert np.all((scores >= 0) & (scores <= 1))
    np.testing.assert_allclose(metric.score_pairs([(b, a) for a, b in PAIRS]), scores, atol=1e-6)
    shifted = build_metric("cosine", negative="shift").score_pairs(PAIRS)
    np.testing.assert_allclose(shifted, (scores + 1) / 2, atol=1e-6)  # no clipping happened here


def test_bertscore_with_minilm():
    metric = build_metric("bertscore")
    scores = metric.score_pairs(PAIRS)
    assert scores[0] == pytest.approx(1.0, abs=1e-4)
    assert scores[1] > 0.7 > 0.3 > scores[2]
    np.testing.assert_allclose(metric.score_pairs([(b, a) for a, b in PAIRS]), scores, atol=1e-5)  # F1
    np.testing.assert_allclose(metric.score_pairs([("", ""), ("", "Paris")]), [1.0, 0.0])


def test_bertscore_layers_default_to_the_last_one():
    explicit = build_metric("bertscore", num_layers=6).score_pairs(PAIRS[1:3])
    np.testing.assert_allclose(build_metric("bertscore").score_pairs(PAIRS[1:3]), explicit, atol=1e-6)


def test_model_metrics_in_the_tensor_with_cache(tmp_path):
    answers = [["Paris", "paris", "Lyon"], ["Shakespeare", "William Shakespeare", "Shakespeare"]]
    tensor = similarity_tensor(answers, ["em", "cosine", "bertscore"], cache=tmp_path)
    assert tensor.shape == (2, 3, 3, 3)
    assert tensor[1, 0, 2, 1] == pytest.approx(1.0, abs=1e-5)  # identical strings
    again = similarity_tensor(answers, ["em", "cosine", "bertscore"], cache=tmp_path)
    np.testing.assert_allclose(again, tensor)
