"""eRAG evaluation as a Python API: label each retrieved document by the reader's downstream score with
that document alone, G_q[d] = E(M(q, {d}), y) (eq. 1 of the eRAG paper), aggregate the labels with
retrieval metrics, and correlate them across questions with the end-to-end score M(q, R_k).

`evaluate` takes what the reference `erag.eval` takes (retrieval results, expected outputs, a text
generator, a downstream metric, retrieval metrics) but keys everything by question id, so two questions
with the same text never collide. Generation works on requests (question text, passages): all requests
of a run are de-duplicated, looked up in a `GenerationCache` (eor's one generation cache: in memory, or the
SQLite file that every eor command shares), and the rest go to the generator in as few calls as it allows.
Identical (question, document) pairs, e.g. a document that two retrievers both return, are generated once.
A Reader's generations are keyed exactly as the ensemble keys them (reader identity, prompt, max_tokens) and
stored uncleaned, so eRAG reads back what `eor run` generated and the other way round.

The generator is either
- an eor `Reader` (`generate(prompts, max_tokens)`): prompts are built with `PromptTemplates` (the
  reading prompt with the passages as `{document}`; the retrieval-free prompt when there is no passage),
  outputs cleaned with `clean_answer`, every pending request in one call (or those of `batch_size`
  questions per call); or
- a callable like the reference's `text_generator`: `dict[question text, list[passage text]] ->
  dict[question text, output]`. Its keys are question texts, as in the reference, because the generator
  needs the question; each call holds a question text at most once (the reference's rounds), and eor
  maps the outputs back to ids, so duplicate texts are safe.

Besides eRAG labels, the baselines of the paper's table 1 get the same metrics and correlations:
`containment` (1 when a normalised gold answer occurs in the passage, title included) and `provenance`
(1 when the passage id is one of the question's gold passage ids).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eor.correctness import CORRECTNESS, score_answer
from eor.erag.correlation import correlate
from eor.erag.metrics import MetricSpec, check_labels, default_metrics, mean_scores, parse_metrics, score
from eor.errors import InputError, ReaderError
from eor.generation_cache import Generation, GenerationCache, generation_key
from eor.json_ready import json_ready
from eor.prompts import PromptTemplates, clean_answer

DownstreamMetric = Callable[[str, Sequence[str]], float]
TextGenerator = Callable[[dict[str, list[str]]], Mapping[str, str]]
Progress = Callable[[str, int], Any]
"""(label, total) -> a progress bar with `update(n)` and `close()`, e.g. `lambda label, total: tqdm(desc=label,
total=total)`; generation calls it once per phase that has uncached requests and updates it per batch."""


def get_downstream_metric(metric: str | DownstreamMetric) -> DownstreamMetric:
    """A downstream metric `(prediction, golds) -> float`: a function, or a correctness metric's name in
    eor.correctness (em, f1, contains, ...), scored as the best over the gold answers (SQuAD normalisation)."""
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
    if isinstance(document, str):
        text, title, doc_id = document, "", None
    elif isinstance(document, Mapping):
        text = next((document[key] for key in ("text", "page_content", "contents") if key in document), None)
        title, doc_id = document.get("title") or "", document.get("id")
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


# --- generation with a cache -------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One generation: a question text with the (title, text) passages given to the reader, in order."""

    question: str
    passages: tuple[tuple[str, str], ...]


@dataclass
class Cost:
    """Generation bookkeeping of one phase (eRAG labels or end-to-end)."""

    requests: int = 0  # requests asked for, repeats included
    unique: int = 0  # distinct requests among them
    cache_hits: int = 0  # distinct requests answered from the cache
    generated: int = 0  # requests (prompts) sent to the generator
    calls: int = 0  # generator / reader calls
    seconds: float = 0.0  # wall time, cache look-ups included


class ReaderGenerator:
    """Requests -> prompts (PromptTemplates) -> an eor Reader -> cleaned answers, the requests of `batch_size`
    questions per call."""

    def __init__(
        self,
        reader: Any,
        templates: PromptTemplates | None = None,
        max_tokens: int | None = None,
        batch_size: int | None = None,
        clean: bool = True,
        namespace: str | None = None,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise InputError("batch_size must be at least 1")
        from eor.readers.base import reader_identity

        self.reader = reader
        self.templates = templates or PromptTemplates()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.clean = clean
        self.tokens = max_tokens if max_tokens is not None else getattr(reader, "default_max_tokens", None)
        template_hash = hashlib.sha1(repr(self.templates).encode()).hexdigest()[:12]
        self.namespace = namespace or (
            f"reader:{getattr(reader, 'name', type(reader).__name__)}|max_tokens={self.tokens}"
            f"|templates={template_hash}|clean={clean}"
        )
        # The cache keys outputs by the reader's identity (as the generation stage does); a reader without one by the
        # namespace, which names it and the settings of its prompts.
        self.identity = namespace or reader_identity(reader) or self.namespace

    def prompt(self, request: Request) -> str:
        return self.templates.answer_prompt(request.question, list(request.passages))

    def key(self, request: Request) -> str:
        return generation_key(self.identity, self.prompt(request), {"max_tokens": self.tokens})

    def finish(self, output: str) -> str:
        """A stored (raw) output as the answer that is scored."""
        return clean_answer(output) if self.clean else output

    def batches(self, requests: Sequence[Request]) -> Iterator[tuple[list[Request], list[str], list[float]]]:
        """(requests, raw outputs, seconds per output): the requests of `batch_size` questions per reader call
        (of every question in one call when None), as `eor run` batches questions."""
        for batch in _by_questions(requests, self.batch_size):
            started = time.perf_counter()
            outputs = self.reader.generate([self.prompt(request) for request in batch], max_tokens=self.max_tokens)
            elapsed = time.perf_counter() - started
            if len(outputs) != len(batch):
                raise ReaderError(f"reader returned {len(outputs)} outputs for {len(batch)} prompts")
            seconds = list(getattr(self.reader, "last_seconds", None) or [])
            if len(seconds) != len(batch):
                seconds = [elapsed / len(batch)] * len(batch)
            yield batch, list(outputs), seconds


def _by_questions(requests: Sequence[Request], size: int | None) -> Iterator[list[Request]]:
    """Consecutive requests in groups that hold `size` distinct questions each (all in one group for None)."""
    group: list[Request] = []
    questions: set[str] = set()
    for request in requests:
        if size is not None and request.question not in questions and len(questions) == size:
            yield group
            group, questions = [], set()
        group.append(request)
        questions.add(request.question)
    if group:
        yield group


class CallableGenerator:
    """A reference-style `text_generator`: called in rounds, each with a question text at most once."""

    def __init__(
        self, function: TextGenerator, templates: PromptTemplates | None = None, namespace: str | None = None
    ) -> None:
        self.function = function
        self.templates = templates or PromptTemplates()
        name = getattr(function, "__qualname__", type(function).__qualname__)
        self.namespace = namespace or f"callable:{getattr(function, '__module__', '')}.{name}"
        self.identity = self.namespace

    def key(self, request: Request) -> str:
        """Keyed by what the callable receives: the question and its formatted passages."""
        inputs = json.dumps([request.question, self._inputs(request)], ensure_ascii=False)
        return generation_key(self.identity, inputs, {})

    def finish(self, output: str) -> str:
        return output

    def _inputs(self, request: Request) -> list[str]:
        return [self.templates.document([passage]) for passage in request.passages]

    def batches(self, requests: Sequence[Request]) -> Iterator[tuple[list[Request], list[str], list[float]]]:
        by_question: dict[str, list[Request]] = defaultdict(list)
        for request in requests:
            by_question[request.question].append(request)
        rounds = max((len(pending) for pending in by_question.values()), default=0)
        for index in range(rounds):
            batch = [pending[index] for pending in by_question.values() if index < len(pending)]
            inputs = {request.question: self._inputs(request) for request in batch}
            started = time.perf_counter()
            outputs = self.function(inputs)
            elapsed = time.perf_counter() - started
            missing = [request.question for request in batch if request.question not in outputs]
            if missing:
                raise ReaderError(f"text_generator returned no output for {len(missing)} input(s), e.g. {missing[0]!r}")
            texts = [outputs[request.question] for request in batch]
            if not all(isinstance(text, str) for text in texts):
                raise ReaderError("text_generator outputs must be strings")
            yield batch, texts, [elapsed / len(batch)] * len(batch)


Generator = ReaderGenerator | CallableGenerator


def make_generator(
    text_generator: Any,
    *,
    templates: PromptTemplates | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    namespace: str | None = None,
) -> Generator:
    """An eor Reader (anything with `generate`) or a reference-style callable, wrapped for `generate`."""
    if isinstance(text_generator, ReaderGenerator | CallableGenerator):
        return text_generator
    if callable(getattr(text_generator, "generate", None)):
        return ReaderGenerator(
            text_generator, templates=templates, max_tokens=max_tokens, batch_size=batch_size, namespace=namespace
        )
    if callable(text_generator):
        return CallableGenerator(text_generator, templates=templates, namespace=namespace)
    raise InputError("text_generator must be an eor Reader or a callable dict[question, passages] -> dict")


def generate(
    requests: Sequence[Request],
    generator: Generator,
    cache: GenerationCache | None = None,
    *,
    progress: Progress | None = None,
    label: str = "generation",
) -> tuple[list[str], Cost]:
    """One output per request (aligned), generating each distinct uncached request once; `progress` (see
    `Progress`) shows the uncached requests under `label`."""
    started = time.perf_counter()
    cache = cache if cache is not None else GenerationCache()
    unique = list(dict.fromkeys(requests))
    cost = Cost(requests=len(requests), unique=len(unique))
    keys = {request: generator.key(request) for request in unique}
    found = cache.get_many(keys.values())
    outputs = {request: found[key].text for request, key in keys.items() if key in found}
    pending = [request for request in unique if request not in outputs]
    cost.cache_hits = len(unique) - len(pending)
    bar = progress(label, len(pending)) if progress is not None and pending else None
    try:
        for batch, texts, seconds in generator.batches(pending):
            cost.calls += 1
            cost.generated += len(batch)
            cache.put_many(  # after every call, so an interrupted run keeps what it generated
                Generation(keys[request], generator.identity, text, spent)
                for request, text, spent in zip(batch, texts, seconds, strict=True)
            )
            outputs.update(zip(batch, texts, strict=True))
            if bar is not None:
                bar.update(len(batch))
    finally:
        if bar is not None:
            bar.close()
    cost.seconds = time.perf_counter() - started
    return [generator.finish(outputs[request]) for request in requests], cost


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
    cost: dict[str, Cost]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: `questions`, `mean`, `correlation`, `baselines`, `cost`, `settings` (NaN -> None)."""
        return json_ready(
            {
                "questions": self.questions,
                "mean": self.mean,
                "correlation": self.correlation,
                "baselines": {name: labelling.to_dict() for name, labelling in self.baselines.items()},
                "cost": {name: asdict(cost) for name, cost in self.cost.items()},
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
    text_generator: an eor Reader or a reference-style callable (see the module docstring).
    downstream_metric: `(prediction, golds) -> float` in [0, 1], or a correctness metric's name (eor.correctness).
    retrieval_metrics: names such as `NDCG@10` (or a comma-separated string); default P, R, MAP, MRR,
        NDCG and Hit at `k` (over the whole list when `k` is None).
    questions: question id -> question text; without it the ids are the question texts (the reference's
        convention).
    provenance: question id -> gold passage ids, for the provenance baseline (every id needs an entry).
    containment: compute the answer-containment baseline.
    end_to_end: also run the reader with all documents of each question, giving `e2e` and correlations.
    cache: a GenerationCache (eor.generation_cache), or the path of its SQLite file; default a fresh
        in-memory cache. Both phases share it, so an end-to-end request that equals an eRAG one (a
        one-document list) is a cache hit.
    templates, max_tokens, batch_size: prompt building and batching for a Reader; `namespace` names the
        generator in the cache (default from the reader's name, max_tokens and templates).
    progress: `(label, total) -> bar` (see `Progress`), shown for the eRAG and the end-to-end generations.
    """
    ids, texts, passages, golds = _check_inputs(retrieval_results, expected_outputs, questions, k, provenance)
    metric = get_downstream_metric(downstream_metric)
    specs = parse_metrics(retrieval_metrics) if retrieval_metrics is not None else _default_specs(k)
    generator = make_generator(
        text_generator, templates=templates, max_tokens=max_tokens, batch_size=batch_size, namespace=namespace
    )
    store = cache if isinstance(cache, GenerationCache) else GenerationCache(cache)
    inputs = _Inputs(ids, texts, passages, golds, metric, generator, store, progress)
    answers, labels, costs = _erag_labels(inputs)
    e2e, e2e_answers = _end_to_end(inputs, costs) if end_to_end else (None, {})
    erag = _labelling(ids, passages, labels, specs, e2e)
    rows = [
        {**asdict(entry), "question": texts[qid], "answers": answers[qid], "e2e_answer": e2e_answers.get(qid)}
        for qid, entry in zip(ids, erag.questions, strict=True)
    ]
    settings = {
        "generator": generator.namespace,
        "downstream_metric": downstream_metric if isinstance(downstream_metric, str) else _name(downstream_metric),
        "retrieval_metrics": [spec.name for spec in specs],
        "k": k,
        "questions": len(ids),
        "documents": sum(len(passages[qid]) for qid in ids),
    }
    baselines = _baselines(inputs, specs, e2e, containment, provenance)
    return EragResult(rows, erag.mean, erag.correlation, baselines, costs, settings)


@dataclass(frozen=True)
class _Inputs:
    """What both phases of `evaluate` read: the questions, their documents and gold answers, the metric,
    the generator, the cache and the progress bars."""

    ids: list[str]
    texts: dict[str, str]
    passages: dict[str, list[Passage]]
    golds: dict[str, list[str]]
    metric: DownstreamMetric
    generator: Generator
    store: GenerationCache
    progress: Progress | None


def _erag_labels(inputs: _Inputs) -> tuple[dict[str, list[str]], dict[str, list[float]], dict[str, Cost]]:
    """Each document's answer alone and its label (the downstream metric of that answer), with the cost."""
    pairs = [(qid, rank) for qid in inputs.ids for rank in range(len(inputs.passages[qid]))]
    requests = [
        Request(inputs.texts[qid], ((inputs.passages[qid][r].title, inputs.passages[qid][r].text),)) for qid, r in pairs
    ]
    outputs, cost = generate(requests, inputs.generator, inputs.store, progress=inputs.progress, label="eRAG labels")
    answers: dict[str, list[str]] = defaultdict(list)
    for (qid, _), output in zip(pairs, outputs, strict=True):
        answers[qid].append(output)
    labels = {
        qid: check_labels(inputs.metric(answer, inputs.golds[qid]) for answer in answers[qid]) for qid in inputs.ids
    }
    return answers, labels, {"erag": cost}


def _end_to_end(inputs: _Inputs, costs: dict[str, Cost]) -> tuple[dict[str, float], dict[str, str]]:
    """The reader with every document of a question at once: its score and answer per question."""
    full = [Request(inputs.texts[qid], tuple((p.title, p.text) for p in inputs.passages[qid])) for qid in inputs.ids]
    outputs, costs["e2e"] = generate(full, inputs.generator, inputs.store, progress=inputs.progress, label="end-to-end")
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
