"""Similarity registry, string metrics, the similarity tensor (dedup, one call per metric), its disk cache."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from eor.core.errors import ConfigError, InputError
from voters.similarity import (
    METRICS,
    PairScoreCache,
    SimilarityMetric,
    build_metric,
    build_metrics,
    similarity_tensor,
)


class CountingLength(SimilarityMetric):
    """A toy metric that records every call: 1 / (1 + |len(a) - len(b)|)."""

    name = "length"

    def __init__(self, scale: int = 1):
        self.calls: list[list[tuple[str, str]]] = []
        self.scale = scale

    def params(self):
        return {"scale": self.scale}

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.calls.append(list(pairs))
        return np.array([1.0 / (1 + self.scale * abs(len(a) - len(b))) for a, b in pairs])


def test_registry_holds_the_five_metrics():
    assert {"em", "f1", "cosine", "bertscore", "nli"} <= set(METRICS)


def test_unknown_metric_and_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="available: .*bertscore.*cosine.*em.*f1.*nli"):
        build_metric("bleu")
    with pytest.raises(ConfigError, match="unknown parameter.*colour.*valid: model, negative"):
        build_metric("cosine", colour="red")
    with pytest.raises(ConfigError, match="metric_params given for metric.*cosine"):
        build_metrics(["em"], {"cosine": {"model": "x"}})
    with pytest.raises(ConfigError, match="negative"):
        build_metric("cosine", negative="abs")
    with pytest.raises(ConfigError, match="nli needs a model"):
        build_metric("nli")


def test_em_and_f1_on_normalised_answers():
    pairs = [("The Eiffel Tower", "eiffel tower!"), ("Paris", "Lyon"), ("New York City", "York"), ("", "")]
    np.testing.assert_allclose(build_metric("em").score_pairs(pairs), [1, 0, 0, 1])
    # "new york city" vs "york": overlap 1, precision 1/3, recall 1 -> F1 = 2 * (1/3) / (4/3) = 0.5
    np.testing.assert_allclose(build_metric("f1").score_pairs(pairs), [1, 0, 0.5, 1])


def test_similarity_tensor_by_hand():
    answers = [["Paris", "paris", "Lyon"], ["x y", "y z", "x y"]]
    tensor = similarity_tensor(answers, ["em", "f1"])
    assert tensor.shape == (2, 3, 3, 2)
    np.testing.assert_array_equal(tensor[0, :, :, 0], [[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    # "x y" vs "y z": overlap 1 of 2 tokens each -> precision = recall = F1 = 0.5
    np.testing.assert_allclose(tensor[1, :, :, 1], [[1, 0.5, 1], [0.5, 1, 0.5], [1, 0.5, 1]])


def test_one_call_per_metric_with_deduplicated_pairs():
    metric = CountingLength()
    answers = [["x", "yy", "x", "yy"], ["yy", "x", "zzz", "x"], ["x", "x", "x", "x"]]
    tensor = similarity_tensor(answers, [metric])
    assert len(metric.calls) == 1
    (pairs,) = metric.calls
    # distinct unordered pairs over all questions, canonical order, including (a, a) for duplicates:
    assert sorted(pairs) == sorted([("x", "x"), ("x", "yy"), ("yy", "yy"), ("x", "zzz"), ("yy", "zzz"), ("zzz", "zzz")])
    # |len("yy") - len("zzz")| = 1 -> 0.5; |len("x") - len("zzz")| = 2 -> 1/3
    assert tensor[1, 0, 2, 0] == pytest.approx(0.5)
    assert tensor[1, 2, 1, 0] == pytest.approx(1 / 3)
    np.testing.assert_allclose(tensor[..., 0], np.transpose(tensor[..., 0], (0, 2, 1)))


def test_asymmetric_metric_gets_both_orders():
    class Prefix(SimilarityMetric):
        name = "prefix"
        symmetric = False

        def score_pairs(self, pairs):
            return np.array([float(b.startswith(a)) for a, b in pairs])

    tensor = similarity_tensor([["ab", "abc"]], [Prefix()])
    np.testing.assert_array_equal(tensor[0, :, :, 0], [[1, 1], [0, 1]])


def test_disk_cache_avoids_recomputation(tmp_path):
    answers = [["x", "yy", "zzz"], ["yy", "x", "x"]]
    first = CountingLength()
    expected = similarity_tensor(answers, [first], cache=tmp_path / "cache")
    assert len(first.calls[0]) == 6
    assert len(PairScoreCache(tmp_path / "cache")) == 6
    again = CountingLength()
    np.testing.assert_allclose(similarity_tensor(answers, [again], cache=tmp_path / "cache"), expected)
    assert again.calls == []  # every pair came from the cache
    other = CountingLength(scale=2)  # different parameters: a different cache key
    similarity_tensor(answers, [other], cache=tmp_path / "cache")
    assert len(other.calls) == 1
    more = CountingLength()
    similarity_tensor([["x", "wwww"]], [more], cache=tmp_path / "cache")
    assert sorted(more.calls[0]) == [("wwww", "wwww"), ("wwww", "x")]  # only the new pairs


def test_cheap_metrics_skip_the_cache(tmp_path):
    similarity_tensor([["a", "b"]], ["em", "f1"], cache=tmp_path)
    assert len(PairScoreCache(tmp_path)) == 0


def test_bad_answers_are_input_errors():
    with pytest.raises(InputError, match="one answer per member"):
        similarity_tensor([["a", "b"], ["a"]], ["em"])
    with pytest.raises(InputError, match="strings"):
        similarity_tensor([["a", None]], ["em"])


def test_metric_output_is_checked():
    class Broken(SimilarityMetric):
        name = "broken"

        def score_pairs(self, pairs):
            return np.array([np.nan] * len(pairs))

    with pytest.raises(InputError, match="broken"):
        similarity_tensor([["a", "b"]], [Broken()])
