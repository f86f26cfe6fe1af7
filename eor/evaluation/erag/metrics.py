"""Retrieval metrics over one ranked list of relevance labels, found by name (`NDCG@10`) in one registry.

A question's ranked list is given as its labels in rank order, each in [0, 1]: binary (0/1) labels give
the standard definitions, graded labels (e.g. eRAG labels from token F1) the generalisations below, all
of which reduce exactly to the binary definitions on 0/1 labels. `l_i` is the label at rank i (1-based),
`k` the cutoff (the whole list when a name has no `@k`), `J` the judged labels of the question: by
default the labels of the list itself, as in eRAG, whose relevance labels exist only for retrieved
documents; pass `judged` (e.g. one 1 per gold passage) for the qrels-based definitions of IR.

- `P@k`   = Σ_{i≤k} l_i / k. Divided by the cutoff k even when the list is shorter (trec_eval, and the
  eRAG reference, whose graded precision is the mean label over the cutoff); graded: the mean label.
- `R@k`   = Σ_{i≤k} l_i / Σ J; graded: the share of the list's total label mass in the top k.
- `MAP@k` = Σ_{i≤k} l_i · (Σ_{j≤i} l_j / i) / Σ J; divided by all relevant (Σ J), not by min(k, |rel|),
  as trec_eval's `map_cut`; graded: labels act as fractional relevance (an eor extension).
- `MRR@k` = Σ_{i≤k} (l_i / i) · Π_{j<i} (1 − l_j): 1 / the rank of the first relevant document for binary
  labels; for graded labels the expected reciprocal rank with l_i the probability that rank i satisfies
  (Chapelle et al. 2009, with linear satisfaction probabilities; an eor extension).
- `NDCG@k` = DCG@k / IDCG@k, DCG@k = Σ_{i≤k} l_i / log2(i + 1) (linear gains, as trec_eval and ranx's
  `ndcg`), IDCG@k the DCG of the top k of J sorted in decreasing order (all of J without a cutoff).
- `Hit@k` = max_{i≤k} l_i: any relevant document in the top k; graded: the best label (eRAG's `success`).

Undefined ratios follow trec_eval (pytrec_eval, which the eRAG reference calls): R, MAP and NDCG are 0
for a question with nothing relevant (Σ J = 0), not NaN; so means over questions count such questions
as 0. The eRAG paper notes that its reference supports only P and Hit for non-binary labels; NDCG with
graded gains is standard; the graded R, MAP and MRR above are eor's documented choices.

Names: case-insensitive `BASE@k` or `BASE` (whole list); aliases cover pytrec_eval's spelling as the
eRAG reference takes it (`P_10`, `recall_10`, `map_cut_10`, `recip_rank`, `ndcg_cut_10`, `success_10`).
Results are keyed by the canonical name (`NDCG@10`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from eor.core.errors import InputError
from eor.core.registry import Registry

MetricFunction = Callable[[Sequence[float], int | None, Sequence[float]], float]
"""(labels in rank order, cutoff or None for the whole list, judged labels) -> value."""

RETRIEVAL_METRICS: Registry[MetricFunction] = Registry("retrieval metric")
RETRIEVAL_ALIASES: dict[str, str] = {}
DEFAULT_BASES = ("P", "R", "MAP", "MRR", "NDCG", "Hit")


def register_retrieval_metric(name: str, *aliases: str) -> Callable[[MetricFunction], MetricFunction]:
    """Register a metric function under its canonical `name` and lower-case `aliases`."""

    def register(function: MetricFunction) -> MetricFunction:
        for key in dict.fromkeys((name.lower(), *(alias.lower() for alias in aliases))):
            if key in RETRIEVAL_ALIASES:
                raise InputError(f"retrieval metric name {key!r} is already registered")
            RETRIEVAL_ALIASES[key] = name
        return RETRIEVAL_METRICS.register(name, function)

    return register


def _top(labels: Sequence[float], k: int | None) -> Sequence[float]:
    return labels if k is None else labels[:k]


@register_retrieval_metric("P", "precision")
def precision(labels: Sequence[float], k: int | None, judged: Sequence[float]) -> float:
    depth = len(labels) if k is None else k
    return sum(_top(labels, k)) / depth if depth else 0.0


@register_retrieval_metric("R", "recall")
def recall(labels: Sequence[float], k: int | None, judged: Sequence[float]) -> float:
    total = sum(judged)
    return sum(_top(labels, k)) / total if total > 0 else 0.0


@register_retrieval_metric("MAP", "ap", "map_cut")
def average_precision(labels: Sequence[float], k: int | None, judged: Sequence[float]) -> float:
    total = sum(judged)
    if total <= 0:
        return 0.0
    mass = 0.0
    value = 0.0
    for rank, label in enumerate(_top(labels, k), start=1):
        mass += label
        value += label * mass / rank
    return value / total


@register_retrieval_metric("MRR", "rr", "recip_rank")
def reciprocal_rank(labels: Sequence[float], k: int | None, judged: Sequence[float]) -> float:
    value = 0.0
    unsatisfied = 1.0
    for rank, label in enumerate(_top(labels, k), start=1):
        value += unsatisfied * label / rank
        unsatisfied *= 1.0 - label
        if unsatisfied == 0.0:
            break
    return value


def _dcg(labels: Iterable[float]) -> float:
    return sum(label / math.log2(rank + 1) for rank, label in enumerate(labels, start=1))


@register_retrieval_metric("NDCG", "ndcg_cut")
def ndcg(labels: Sequence[float], k: int | None, judged: Sequence[float]) -> float:
    ideal = _dcg(_top(sorted(judged, reverse=True), k))
    return _dcg(_top(labels, k)) / ideal if ideal > 0 else 0.0


@register_retrieval_metric("Hit", "hit_rate", "hits", "success")
def hit(labels: Sequence[float], k: int | None, judged: Sequence[float]) -> float:
    return float(max(_top(labels, k), default=0.0))


_NAME = re.compile(r"^(?P<base>[A-Za-z][A-Za-z_]*?)(?:[@_](?P<k>\d+))?$")


@dataclass(frozen=True)
class MetricSpec:
    """One named metric with its cutoff (`k=None`: the whole list); callable on a list of labels."""

    base: str
    k: int | None = None

    @property
    def name(self) -> str:
        return self.base if self.k is None else f"{self.base}@{self.k}"

    def __call__(self, labels: Sequence[float], judged: Sequence[float] | None = None) -> float:
        values = check_labels(labels)
        judged_values = values if judged is None else check_labels(judged)
        return float(RETRIEVAL_METRICS[self.base](values, self.k, judged_values))


def parse_metric(name: str | MetricSpec) -> MetricSpec:
    """`NDCG@10` / `ndcg_cut_10` / `P` -> MetricSpec; unknown names and bad cutoffs raise InputError."""
    if isinstance(name, MetricSpec):
        return name
    if not isinstance(name, str):
        raise InputError(f"a retrieval metric name must be a string, not {type(name).__name__}")
    match = _NAME.match(name.strip())
    known = ", ".join(RETRIEVAL_METRICS)
    if not match:
        raise InputError(f"cannot parse retrieval metric {name!r}: write NAME or NAME@k (e.g. NDCG@10); known: {known}")
    base = RETRIEVAL_ALIASES.get(match["base"].lower())
    if base is None:
        raise InputError(f"unknown retrieval metric {match['base']!r} in {name!r}; known: {known} (e.g. NDCG@10)")
    k = None if match["k"] is None else int(match["k"])
    if k is not None and k < 1:
        raise InputError(f"retrieval metric {name!r}: the cutoff must be at least 1")
    return MetricSpec(base, k)


def parse_metrics(names: str | Iterable[str | MetricSpec]) -> list[MetricSpec]:
    """Parse several names (a comma-separated string or an iterable), dropping repeats, keeping order."""
    if isinstance(names, str):
        names = [part for part in names.split(",") if part.strip()]
    specs: dict[str, MetricSpec] = {}
    for name in names:
        spec = parse_metric(name)
        specs.setdefault(spec.name, spec)
    if not specs:
        raise InputError("no retrieval metric given")
    return list(specs.values())


def default_metrics(k: int = 10) -> list[MetricSpec]:
    """P, R, MAP, MRR, NDCG and Hit at cutoff k: the metrics of the eRAG paper's table 1."""
    return [MetricSpec(base, k) for base in DEFAULT_BASES]


def check_labels(labels: Iterable[float]) -> list[float]:
    """Labels as floats, each finite and in [0, 1]; anything else raises InputError."""
    values = []
    for label in labels:
        try:
            value = float(label)
        except (TypeError, ValueError):
            raise InputError(f"relevance label {label!r} is not a number") from None
        if not (0.0 <= value <= 1.0):  # also rejects NaN
            raise InputError(f"relevance label {label!r} is outside [0, 1]")
        values.append(value)
    return values


def is_binary(labels: Iterable[float]) -> bool:
    return all(label in (0.0, 1.0) for label in labels)


def score(
    labels: Sequence[float],
    metrics: Iterable[str | MetricSpec],
    judged: Sequence[float] | None = None,
) -> dict[str, float]:
    """Every metric on one ranked list: canonical name -> value."""
    return {spec.name: spec(labels, judged) for spec in parse_metrics(metrics)}


def score_questions(
    labels: Mapping[str, Sequence[float]],
    metrics: Iterable[str | MetricSpec],
    judged: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, dict[str, float]]:
    """Per question id: metric name -> value."""
    specs = parse_metrics(metrics)
    return {qid: score(values, specs, None if judged is None else judged.get(qid)) for qid, values in labels.items()}


def mean_scores(per_question: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Metric name -> mean over questions (NaN for a metric when there is no question)."""
    names: dict[str, None] = {}
    for values in per_question.values():
        names.update(dict.fromkeys(values))
    means = {}
    for name in names:
        column = [values[name] for values in per_question.values() if name in values]
        means[name] = sum(column) / len(column) if column else math.nan
    return means
