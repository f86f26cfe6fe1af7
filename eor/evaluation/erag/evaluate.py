"""eRAG evaluation as a Python API: label each retrieved document by the reader's downstream score with
that document alone, G_q[d] = E(M(q, {d}), y) (eq. 1 of the eRAG paper), aggregate the labels with
retrieval metrics, and correlate them across questions with the end-to-end score M(q, R_k).

`evaluate` takes what the reference `erag.eval` takes (retrieval results, expected outputs, a text
generator, a downstream metric, retrieval metrics) but keys everything by question id, so two questions
with the same text never collide. The reader is called through eor.evaluation.erag.generators (requests to prompts,
through the generation stage and its cache; an eor Reader or a reference-style callable as the generator);
this module reads the documents, scores the outputs and correlates the scores.

Besides eRAG labels, the baselines of the paper's table 1 get the same metrics and correlations:
`containment` (1 when a normalised gold answer occurs in the passage, title included) and `provenance`
(1 when the passage id is one of the question's gold passage ids).
"""

from __future__ import annotations

import functools
import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eor.core.correctness import CORRECTNESS, score_answer
from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.core.prompts import PromptTemplates
from eor.evaluation.erag.correlation import correlate
from eor.evaluation.erag.generators import Generator, Progress, Request, as_cache, generate_on, make_generator
from eor.evaluation.erag.metrics import MetricSpec, check_labels, default_metrics, mean_scores, parse_metrics, score
from eor.pipeline.stages.generation import GenerationStage, GenerationStats
from eor.runs.generation_cache import GenerationCache

DownstreamMetric = Callable[[str, Sequence[str]], float]


def get_downstream_metric(metric: str | DownstreamMetric) -> DownstreamMetric:
    """A downstream metric `(prediction, golds) -> float`: a function, or a correctness metric's name in
    eor.core.correctness (em, f1, contains, ...), scored as the best over the gold answers (SQuAD normalisation)."""
    if callable(metric):
        return metric
    if metric not in CORRECTNESS:
        raise InputError(f"unknown downstream metric {metric!r}; known: {', '.join(CORRECTNESS)}")
    return functools.partial(score_answer, metric)


# --- documents ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Passage:
    """One retrieved document: its id (given, or `sha1:` + a hash of the text), title and text."""

    id: str
    title: str
    text: str


def as_passage(document: Any) -> Passage:
    """A document text, a dict with `text` (or `page_content`/`contents`) and optional `id`/`title`, or a
    LangChain-style Document (`page_content`, `metadata`) as a Passage."""
    if isinstance(document, Passage):
        return document
    if isinstance(document, Mapping):  # first: `text` may be None (checked below)
        text = next((document[key] for key in ("text", "page_content", "contents") if key in document), None)
        title, doc_id = document.get("title") or "", document.get("id")
    elif isinstance(document, str):
        text, title, doc_id = document, "", None
    elif hasattr(document, "page_content"):
        metadata = getattr(document, "metadata", None) or {}
        text, title, doc_id = document.page_content, metadata.get("title") or "", metadata.get("id")
    else:
        raise InputError(f"a retrieved document must be a string, a dict or a Document, not {type(document).__name__}")
    if not isinstance(text, str):
        raise InputError(f"retrieved document has no text: {document!r:.200}")
    if doc_id is None:
        doc_id = "sha1:" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]
    return Passage(str(doc_id), str(title), text)


# --- evaluation --------------------------------------------------------------------------------------


@dataclass
class ListScores:
    """One question under one labelling: document ids in rank order, one label each, metric values."""

    id: str
    documents: list[str]
    labels: list[float]
    metrics: dict[str, float]
    e2e: float | None


@dataclass
class Labelling:
    """Per-question scores of one labelling (eRAG or a baseline), their means and correlations with e2e."""

    questions: list[ListScores]
    mean: dict[str, float]
    correlation: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return json_ready(asdict(self))


@dataclass
class EragResult:
    """eRAG labels and metrics per question (with each document's answer and the end-to-end answer),
    means, correlations with the end-to-end score, the baselines, and the cost of eRAG vs end-to-end."""

    questions: list[dict[str, Any]]
    mean: dict[str, float]
    correlation: dict[str, dict[str, float]]
    baselines: dict[str, Labelling]
    cost: dict[str, GenerationStats]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: `questions`, `mean`, `correlation`, `baselines`, `cost`, `settings` (NaN -> None)."""
        return json_ready(
            {
                "questions": self.questions,
                "mean": self.mean,
                "correlation": self.correlation,
                "baselines": {name: labelling.to_dict() for name, labelling in self.baselines.items()},
                "cost": {name: cost.to_dict() for name, cost in self.cost.items()},
                "settings": self.settings,
            }
        )

    def to_reference(self) -> dict[str, Any]:
        """The reference's output shape: `per_input` (id -> metric -> value) and `aggregated` (the means)."""
        return {"per_input": {entry["id"]: entry["metrics"] for entry in self.questions}, "aggregated": self.mean}


def _labelling(
    ids: Sequence[str],
    passages: Mapping[str, Sequence[Passage]],
    labels: Mapping[str, list[float]],
    specs: Sequence[MetricSpec],
    e2e: Mapping[str, float] | None,
) -> Labelling:
    questions = [
        ListScores(
            id=qid,
            documents=[passage.id for passage in passages[qid]],
            labels=labels[qid],
            metrics=score(labels[qid], specs),
            e2e=None if e2e is None else e2e[qid],
        )
        for qid in ids
    ]
    means = mean_scores({entry.id: entry.metrics for entry in questions})
    correlation = {}
    if e2e is not None:
        target = [e2e[qid] for qid in ids]
        correlation = {
            spec.name: correlate([entry.metrics[spec.name] for entry in questions], target) for spec in specs
        }
    return Labelling(questions, means, correlation)


def _check_inputs(
    retrieval_results: Mapping[str, Sequence[Any]],
    expected_outputs: Mapping[str, Sequence[str] | str],
    questions: Mapping[str, str] | None,
    k: int | None,
    provenance: Mapping[str, Iterable[str]] | None = None,
) -> tuple[list[str], dict[str, str], dict[str, list[Passage]], dict[str, list[str]]]:
    ids = list(retrieval_results)
    if not ids:
        raise InputError("no retrieval results to evaluate")
    for table, what in (
        (expected_outputs, "no expected outputs for {n} question(s)"),
        (questions, "no question text for {n} id(s)"),
        (provenance, "no provenance (gold passage ids) for {n} question(s)"),
    ):
        missing = [qid for qid in ids if table is not None and qid not in table]
        if missing:
            raise InputError(f"{what.format(n=len(missing))}, e.g. {missing[0]!r}")
    if k is not None and k < 1:
        raise InputError("k must be at least 1")
    texts = {qid: str(qid if questions is None else questions[qid]) for qid in ids}
    empty = [qid for qid, text in texts.items() if not text.strip()]
    if empty:
        raise InputError(f"empty question text for id {empty[0]!r}")
    passages = {qid: [as_passage(doc) for doc in list(retrieval_results[qid])[:k]] for qid in ids}
    golds = {}
    for qid in ids:
        expected = expected_outputs[qid]
        golds[qid] = [expected] if isinstance(expected, str) else [str(gold) for gold in expected]
    return ids, texts, passages, golds


def evaluate(
    retrieval_results: Mapping[str, Sequence[Any]],
    expected_outputs: Mapping[str, Sequence[str] | str],
    text_generator: Any,
    downstream_metric: str | DownstreamMetric = "em",
    retrieval_metrics: str | Iterable[str | MetricSpec] | None = None,
    *,
    questions: Mapping[str, str] | None = None,
    k: int | None = None,
    provenance: Mapping[str, Iterable[str]] | None = None,
    containment: bool = True,
    end_to_end: bool = True,
    cache: GenerationCache | str | Path | None = None,
    templates: PromptTemplates | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    namespace: str | None = None,
    progress: Progress | None = None,
) -> EragResult:
    """eRAG over the retrieval results of one retriever.

    retrieval_results: question id -> ranked documents (texts, dicts with id/title/text, or Documents);
        only the first `k` are used when `k` is given.
    expected_outputs: question id -> gold answers (a bare string is one gold answer).
    text_generator: an eor Reader or a reference-style callable (see eor.evaluation.erag.generators).
    downstream_metric: `(prediction, golds) -> float` in [0, 1], or a correctness metric's name (eor.core.correctness).
    retrieval_metrics: names such as `NDCG@10` (or a comma-separated string); default P, R, MAP, MRR,
        NDCG and Hit at `k` (over the whole list when `k` is None).
    questions: question id -> question text; without it the ids are the question texts (the reference's
        convention).
    provenance: question id -> gold passage ids, for the provenance baseline (every id needs an entry).
    containment: compute the answer-containment baseline.
    end_to_end: also run the reader with all documents of each question, giving `e2e` and correlations.
    cache: a GenerationCache (eor.runs.generation_cache), or the path of its SQLite file; default a fresh
        in-memory cache. Both phases share it, so an end-to-end request that equals an eRAG one (a
        one-document list) is a cache hit. A reader without an identity is not cached (see
        eor.evaluation.erag.generators); a GenerationStage given as `text_generator` brings its own cache.
    templates, max_tokens, batch_size: prompt building and batching for a Reader; `namespace` names the
        generator in `settings` (default from the reader's name, max_tokens and templates), and is the
        cache identity of a callable (default its module and qualified name).
    progress: `(label, total) -> bar` (see `Progress`), shown for the eRAG and the end-to-end generations.
    """
    ids, texts, passages, golds = _check_inputs(retrieval_results, expected_outputs, questions, k, provenance)
    metric = get_downstream_metric(downstream_metric)
    specs = parse_metrics(retrieval_metrics) if retrieval_metrics is not None else _default_specs(k)
    generator = make_generator(
        text_generator, templates=templates, max_tokens=max_tokens, batch_size=batch_size, namespace=namespace
    )
    inputs = _Inputs(ids, texts, passages, golds, metric, generator, generator.stage(as_cache(cache)), progress)
    answers, labels, costs = _erag_labels(inputs)
    e2e, e2e_answers = _end_to_end(inputs, costs) if end_to_end else (None, {})
    erag = _labelling(ids, passages, labels, specs, e2e)
    rows = [
        {**asdict(entry), "question": texts[qid], "answers": answers[qid], "e2e_answer": e2e_answers.get(qid)}
        for qid, entry in zip(ids, erag.questions, strict=True)
    ]
    settings = _settings(inputs, downstream_metric, specs, k)
    baselines = _baselines(inputs, specs, e2e, containment, provenance)
    return EragResult(rows, erag.mean, erag.correlation, baselines, costs, settings)


def _settings(
    inputs: _Inputs, downstream_metric: str | DownstreamMetric, specs: list[MetricSpec], k: int | None
) -> dict[str, Any]:
    """What a result was computed with: the generator, the metrics, the cutoff, the questions and documents."""
    return {
        "generator": inputs.generator.namespace,
        "downstream_metric": downstream_metric if isinstance(downstream_metric, str) else _name(downstream_metric),
        "retrieval_metrics": [spec.name for spec in specs],
        "k": k,
        "questions": len(inputs.ids),
        "documents": sum(len(inputs.passages[qid]) for qid in inputs.ids),
    }


@dataclass(frozen=True)
class _Inputs:
    """What both phases of `evaluate` read: the questions, their documents and gold answers, the metric,
    the generator, the generation stage both go through (one cache) and the progress bars."""

    ids: list[str]
    texts: dict[str, str]
    passages: dict[str, list[Passage]]
    golds: dict[str, list[str]]
    metric: DownstreamMetric
    generator: Generator
    stage: GenerationStage
    progress: Progress | None


def _erag_labels(
    inputs: _Inputs,
) -> tuple[dict[str, list[str]], dict[str, list[float]], dict[str, GenerationStats]]:
    """Each document's answer alone and its label (the downstream metric of that answer), with the cost."""
    pairs = [(qid, rank) for qid in inputs.ids for rank in range(len(inputs.passages[qid]))]
    requests = [
        Request(inputs.texts[qid], ((inputs.passages[qid][r].title, inputs.passages[qid][r].text),)) for qid, r in pairs
    ]
    outputs, cost = generate_on(inputs.stage, requests, inputs.generator, inputs.progress, "eRAG labels")
    answers: dict[str, list[str]] = defaultdict(list)
    for (qid, _), output in zip(pairs, outputs, strict=True):
        answers[qid].append(output)
    labels = {
        qid: check_labels(inputs.metric(answer, inputs.golds[qid]) for answer in answers[qid]) for qid in inputs.ids
    }
    return answers, labels, {"erag": cost}


def _end_to_end(inputs: _Inputs, costs: dict[str, GenerationStats]) -> tuple[dict[str, float], dict[str, str]]:
    """The reader with every document of a question at once: its score and answer per question."""
    full = [Request(inputs.texts[qid], tuple((p.title, p.text) for p in inputs.passages[qid])) for qid in inputs.ids]
    outputs, costs["e2e"] = generate_on(inputs.stage, full, inputs.generator, inputs.progress, "end-to-end")
    answers = dict(zip(inputs.ids, outputs, strict=True))
    scores = {qid: check_labels([inputs.metric(answers[qid], inputs.golds[qid])])[0] for qid in inputs.ids}
    return scores, answers


def _baselines(
    inputs: _Inputs,
    specs: list[MetricSpec],
    e2e: dict[str, float] | None,
    containment: bool,
    provenance: Mapping[str, Iterable[str]] | None,
) -> dict[str, Labelling]:
    """The answer-containment and provenance labellings, as asked for."""
    ids, passages = inputs.ids, inputs.passages
    baselines = {}
    if containment:
        contained = {
            qid: [
                score_answer("contains", _passage_string(p, inputs.generator), inputs.golds[qid]) for p in passages[qid]
            ]
            for qid in ids
        }
        baselines["containment"] = _labelling(ids, passages, contained, specs, e2e)
    if provenance is not None:
        gold_ids = {qid: {str(pid) for pid in provenance[qid]} for qid in ids}
        provided = {qid: [float(p.id in gold_ids[qid]) for p in passages[qid]] for qid in ids}
        baselines["provenance"] = _labelling(ids, passages, provided, specs, e2e)
    return baselines


def _default_specs(k: int | None) -> list[MetricSpec]:
    return default_metrics(k) if k is not None else [MetricSpec(spec.base) for spec in default_metrics()]


def _passage_string(passage: Passage, generator: Generator) -> str:
    return generator.templates.document([(passage.title, passage.text)])


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", type(function).__qualname__)
