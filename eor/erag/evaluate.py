"""eRAG evaluation as a Python API: label each retrieved document by the reader's downstream score with
that document alone, G_q[d] = E(M(q, {d}), y) (eq. 1 of the eRAG paper), aggregate the labels with
retrieval metrics, and correlate them across questions with the end-to-end score M(q, R_k).

`evaluate` takes what the reference `erag.eval` takes (retrieval results, expected outputs, a text
generator, a downstream metric, retrieval metrics) but keys everything by question id, so two questions
with the same text never collide. Generation works on requests (question text, passages): each request
becomes a prompt, and every prompt goes through the generation stage (eor.stages.generation), the one way
into the reader that the ensemble's answers, PK and @CP use too. So there is one cache path, one stats type
and one identity rule: the stage de-duplicates the prompts, reads back what the `GenerationCache` (eor's one
generation cache: in memory, or the SQLite file that every eor command shares) holds, sends the rest to the
reader in the calls the generator cuts them into, and stores them; each phase reports what the stage did as
a `GenerationStats`. Identical (question, document) pairs, e.g. a document that two retrievers both return,
are generated once. Outputs are keyed by (reader identity, prompt, max_tokens) and stored uncleaned, so
eRAG reads back what `eor run` generated and the other way round.

The identity rule is the stage's: a reader without an identity (`eor.readers.base.reader_identity` is None)
is not cached. Within one phase its repeated prompts are still generated once, but a second phase or a
second `evaluate` generates again. A `GenerationStage` may be passed as the reader; it is used as it is,
with its own cache.

The generator is either
- an eor `Reader` (`generate(prompts, max_tokens)`): prompts are built with `PromptTemplates` (the
  reading prompt with the passages as `{document}`; the retrieval-free prompt when there is no passage),
  outputs cleaned with `clean_answer` when read, every pending prompt in one call (or those of
  `batch_size` questions per call); or
- a callable like the reference's `text_generator`: `dict[question text, list[passage text]] ->
  dict[question text, output]`. Its keys are question texts, as in the reference, because the generator
  needs the question; each call holds a question text at most once (the reference's rounds), and eor
  maps the outputs back to ids, so duplicate texts are safe. It goes through the stage as a reader
  (`CallableReader`): its prompt is the JSON of what it receives for a request, and its identity is
  explicit, its `namespace` (default its module and qualified name), so it is cached. Two different
  callables with the same name need different namespaces.

Besides eRAG labels, the baselines of the paper's table 1 get the same metrics and correlations:
`containment` (1 when a normalised gold answer occurs in the passage, title included) and `provenance`
(1 when the passage id is one of the question's gold passage ids).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eor.correctness import CORRECTNESS, score_answer
from eor.erag.correlation import correlate
from eor.erag.metrics import MetricSpec, check_labels, default_metrics, mean_scores, parse_metrics, score
from eor.errors import InputError, ReaderError
from eor.generation_cache import GenerationCache
from eor.json_ready import json_ready
from eor.prompts import PromptTemplates, clean_answer
from eor.stages.generation import GenerationStage, GenerationStats, metering

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


# --- generation through the generation stage ---------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One generation: a question text with the (title, text) passages given to the reader, in order."""

    question: str
    passages: tuple[tuple[str, str], ...]


class _Generator:
    """What `generate` needs of a generator: `reader` (what the generation stage calls), `prompt(request)`,
    `max_tokens`, `calls(prompts, questions)` (the reader calls that the prompts to generate are cut into) and
    `finish(output)` (a stored output as the answer that is scored)."""

    reader: Any
    templates: PromptTemplates
    namespace: str
    max_tokens: int | None = None

    def stage(self, cache: GenerationCache | None = None) -> GenerationStage:
        """The generation stage of the reader over `cache` (a fresh in-memory one when None). A reader that is
        a GenerationStage already (e.g. the one `eor erag` built for PK and @CP) is used as it is, with its
        own cache."""
        if isinstance(self.reader, GenerationStage):
            if cache is not None and self.reader.cache is not None and cache is not self.reader.cache:
                raise InputError("the generation stage given has its own cache: pass cache=None, or that cache")
            return self.reader
        return GenerationStage(self.reader, cache if cache is not None else GenerationCache())

    def prompt(self, request: Request) -> str:
        raise NotImplementedError

    def calls(self, prompts: list[str], questions: Mapping[str, str]) -> list[list[str]]:
        raise NotImplementedError

    def finish(self, output: str) -> str:
        return output


class ReaderGenerator(_Generator):
    """Requests -> prompts (PromptTemplates) -> an eor Reader, through the generation stage -> cleaned answers,
    the prompts of `batch_size` questions per reader call."""

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
        self.reader = reader
        self.templates = templates or PromptTemplates()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.clean = clean
        tokens = max_tokens if max_tokens is not None else getattr(reader, "default_max_tokens", None)
        template_hash = hashlib.sha1(repr(self.templates).encode()).hexdigest()[:12]
        # Names the generator in results (`settings.generator`) only: the cache keys outputs by the reader's
        # identity, as the generation stage does for every component.
        self.namespace = namespace or (
            f"reader:{getattr(reader, 'name', type(reader).__name__)}|max_tokens={tokens}"
            f"|templates={template_hash}|clean={clean}"
        )

    def prompt(self, request: Request) -> str:
        return self.templates.answer_prompt(request.question, list(request.passages))

    def calls(self, prompts: list[str], questions: Mapping[str, str]) -> list[list[str]]:
        """The prompts of `batch_size` questions per reader call (of every question in one call when None), as
        `eor run` batches questions."""
        return _by_questions(prompts, questions, self.batch_size)

    def finish(self, output: str) -> str:
        """A stored (raw) output as the answer that is scored."""
        return clean_answer(output) if self.clean else output


def _by_questions(prompts: Sequence[str], questions: Mapping[str, str], size: int | None) -> list[list[str]]:
    """Consecutive prompts in groups that hold `size` distinct questions each (all in one group for None)."""
    groups: list[list[str]] = []
    group: list[str] = []
    seen: set[str] = set()
    for prompt in prompts:
        question = questions[prompt]
        if size is not None and question not in seen and len(seen) == size:
            groups.append(group)
            group, seen = [], set()
        group.append(prompt)
        seen.add(question)
    if group:
        groups.append(group)
    return groups


def _rounds(prompts: Sequence[str], questions: Mapping[str, str]) -> list[list[str]]:
    """The reference's rounds: round i holds the i-th prompt of every question, so a question text occurs at
    most once per round."""
    by_question: dict[str, list[str]] = defaultdict(list)
    for prompt in prompts:
        by_question[questions[prompt]].append(prompt)
    count = max((len(pending) for pending in by_question.values()), default=0)
    return [[pending[index] for pending in by_question.values() if index < len(pending)] for index in range(count)]


class CallableReader:
    """A reference-style `text_generator` behind the reader protocol, so that it goes through the generation
    stage like any reader. A prompt is the JSON of what the callable receives for one request, `[question text,
    [formatted passages]]`; each call of the callable holds a question text at most once (prompts of one
    question in one batch are cut into rounds). Its identity is the namespace it is given: explicit, since
    eor cannot see what a callable's outputs depend on."""

    default_max_tokens = None

    def __init__(self, function: TextGenerator, identity: str) -> None:
        self.function = function
        self.name = identity
        self.identity = identity

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        """Outputs aligned with `prompts`; `max_tokens` is ignored (a text_generator has no such setting)."""
        inputs = {prompt: _decode(prompt) for prompt in dict.fromkeys(prompts)}
        outputs: dict[str, str] = {}
        for part in _rounds(list(inputs), {prompt: question for prompt, (question, _) in inputs.items()}):
            batch = {inputs[prompt][0]: inputs[prompt][1] for prompt in part}
            answered = self.function(batch)
            missing = [question for question in batch if question not in answered]
            if missing:
                raise ReaderError(f"text_generator returned no output for {len(missing)} input(s), e.g. {missing[0]!r}")
            texts = [answered[inputs[prompt][0]] for prompt in part]
            if not all(isinstance(text, str) for text in texts):
                raise ReaderError("text_generator outputs must be strings")
            outputs.update(zip(part, texts, strict=True))
        return [outputs[prompt] for prompt in prompts]


def _decode(prompt: str) -> tuple[str, list[str]]:
    try:
        question, passages = json.loads(prompt)
    except (ValueError, TypeError):
        raise InputError(f"a text_generator's prompt is the JSON [question, passages], not {prompt!r:.100}") from None
    return str(question), [str(passage) for passage in passages]


class CallableGenerator(_Generator):
    """A reference-style `text_generator` (see CallableReader), called in rounds, each with a question text at
    most once; cached under its namespace (default: its module and qualified name)."""

    def __init__(
        self, function: TextGenerator, templates: PromptTemplates | None = None, namespace: str | None = None
    ) -> None:
        self.function = function
        self.templates = templates or PromptTemplates()
        name = getattr(function, "__qualname__", type(function).__qualname__)
        self.namespace = namespace or f"callable:{getattr(function, '__module__', '')}.{name}"
        self.reader = CallableReader(function, self.namespace)

    def prompt(self, request: Request) -> str:
        """What the callable receives for the request, as JSON: the question and its formatted passages."""
        passages = [self.templates.document([passage]) for passage in request.passages]
        return json.dumps([request.question, passages], ensure_ascii=False)

    def calls(self, prompts: list[str], questions: Mapping[str, str]) -> list[list[str]]:
        """One round per call (so `calls` counts the callable's calls, as the reference makes them)."""
        return _rounds(prompts, questions)


Generator = ReaderGenerator | CallableGenerator


def make_generator(
    text_generator: Any,
    *,
    templates: PromptTemplates | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    namespace: str | None = None,
) -> Generator:
    """An eor Reader (anything with `generate`, a GenerationStage included) or a reference-style callable,
    wrapped for `generate`."""
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
) -> tuple[list[str], GenerationStats]:
    """One output per request (aligned), through the generation stage (`generator.stage(cache)`): each distinct
    prompt is read back from the cache or generated once, in the reader calls the generator cuts them into;
    `progress` (see `Progress`) shows the prompts to generate under `label`. Returns the outputs and what the
    stage did."""
    return _through(generator.stage(cache), requests, generator, progress, label)


def _through(
    stage: GenerationStage,
    requests: Sequence[Request],
    generator: Generator,
    progress: Progress | None,
    label: str,
) -> tuple[list[str], GenerationStats]:
    prompts = {request: generator.prompt(request) for request in dict.fromkeys(requests)}
    questions = {prompt: request.question for request, prompt in prompts.items()}
    with metering() as stats:  # this phase's work only, though the stage may serve others too
        completions = stage.complete(
            [prompts[request] for request in requests],
            generator.max_tokens,
            calls=lambda missing: generator.calls(missing, questions),
            progress=None if progress is None else functools.partial(progress, label),
        )
    return [generator.finish(completion.text) for completion in completions], stats


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
        one-document list) is a cache hit. A reader without an identity is not cached (see the module
        docstring); a GenerationStage given as `text_generator` brings its own cache.
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
    store = cache if cache is None or isinstance(cache, GenerationCache) else GenerationCache(cache)
    inputs = _Inputs(ids, texts, passages, golds, metric, generator, generator.stage(store), progress)
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
    outputs, cost = _through(inputs.stage, requests, inputs.generator, inputs.progress, "eRAG labels")
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
    outputs, costs["e2e"] = _through(inputs.stage, full, inputs.generator, inputs.progress, "end-to-end")
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
