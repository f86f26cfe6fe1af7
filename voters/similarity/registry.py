"""The similarity-metric registry (eor.core.registry): name -> factory. eor's own metrics (`em`, `f1`, `cosine`,
`bertscore`, `nli`) are registered here, below the registry, whatever was imported before; Python code adds
more with the `register_metric` decorator, and installed packages through entry points `eor.metrics`.

A metric (voters.similarity.metric.SimilarityMetric) scores a batch of answer pairs with values in [0, 1]
(`score_pairs`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from eor.core.errors import ConfigError
from eor.core.registry import Registry
from voters.similarity.bertscore import BertScoreSimilarity
from voters.similarity.cosine import CosineSimilarity
from voters.similarity.lexical import ExactMatchSimilarity, TokenF1Similarity
from voters.similarity.metric import SimilarityMetric
from voters.similarity.nli import NliSimilarity

MetricFactory = Callable[..., SimilarityMetric]
METRICS: Registry[MetricFactory] = Registry(
    "similarity metric", group="eor.metrics", accept=callable, expected="a metric factory"
)
for _factory in (BertScoreSimilarity, CosineSimilarity, ExactMatchSimilarity, TokenF1Similarity, NliSimilarity):
    METRICS.register(_factory.name, _factory)


def register_metric(name: str, *, replace: bool = False) -> Callable[[MetricFactory], MetricFactory]:
    """Register a metric factory (usually the class) under `name` (a decorator)."""
    return METRICS.add(name, replace=replace)


def available_metrics() -> list[str]:
    return sorted(METRICS)


def build_metric(name: str, **params: Any) -> SimilarityMetric:
    """The metric registered as `name`, built with `params`; unknown names or parameters raise ConfigError."""
    if name not in METRICS:
        raise ConfigError(f"unknown similarity metric {name!r}; available: {', '.join(available_metrics())}")
    factory = METRICS[name]
    signature = inspect.signature(factory)
    try:
        signature.bind(**params)
    except TypeError:
        valid = [p for p in signature.parameters if p != "self"]
        unknown = sorted(set(params) - set(valid))
        detail = f"unknown parameter(s) {', '.join(unknown)}" if unknown else "bad parameters"
        raise ConfigError(f"similarity metric {name!r}: {detail}; valid: {', '.join(valid) or '(none)'}") from None
    return factory(**params)


def build_metrics(
    metrics: Sequence[str | SimilarityMetric],
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[SimilarityMetric]:
    """Metric objects for names (with `params[name]` as keyword arguments) or ready-made metric objects."""
    params = dict(params or {})
    names = [m for m in metrics if isinstance(m, str)]
    stray = sorted(set(params) - set(names))
    if stray:
        raise ConfigError(
            f"metric_params given for metric(s) not in use: {', '.join(stray)}; metrics: {', '.join(names)}"
        )
    built: list[SimilarityMetric] = []
    for metric in metrics:
        if isinstance(metric, SimilarityMetric):
            built.append(metric)
        elif isinstance(metric, str):
            built.append(build_metric(metric, **dict(params.get(metric, {}))))
        else:
            raise ConfigError(f"a metric must be a registered name or a SimilarityMetric, got {metric!r}")
    return built


def parse_metric_spec(spec: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(metric names, metric_params) from a command-line value: either names separated by commas
    (`em,f1,cosine`) or a YAML mapping of name to parameters, as in a config's `voter.metric_params`
    (`{em: {}, bertscore: {model: minilm-l6, num_layers: 6}, nli: {model: PATH, combine: max}}`)."""
    import yaml

    text = spec.strip()
    if not text.startswith("{"):
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names:
            raise ConfigError("--metrics: name at least one similarity metric, e.g. em,f1,cosine")
        return names, {}
    try:
        mapping = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--metrics: not a YAML mapping of metric to parameters ({exc})") from None
    if not isinstance(mapping, dict) or not mapping:
        raise ConfigError("--metrics: expected a non-empty mapping such as {em: {}, bertscore: {num_layers: 6}}")
    params: dict[str, dict[str, Any]] = {}
    for name, value in mapping.items():
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"--metrics: the parameters of {name!r} must be a mapping, got {value!r}")
        if value:
            params[str(name)] = dict(value)
    return [str(name) for name in mapping], params
