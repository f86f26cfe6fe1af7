"""Generation for eRAG and utility: requests (a question text with the passages given to the reader) become
prompts, and every prompt goes through the generation stage (eor.pipeline.stages.generation), the one way into the
reader that the ensemble's answers, PK and @CP use too. So there is one cache path, one stats type and one
identity rule: the stage de-duplicates the prompts, reads back what the `GenerationCache` (eor's one
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
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eor.core.errors import InputError, ReaderError
from eor.core.prompts import PromptTemplates, clean_answer
from eor.pipeline.jobs import batches
from eor.pipeline.stages.generation import GenerationStage, GenerationStats, metering
from eor.runs.generation_cache import GenerationCache, open_cache, open_cache_or_memory

TextGenerator = Callable[[dict[str, list[str]]], Mapping[str, str]]
Progress = Callable[[str, int], Any]
"""(label, total) -> a progress bar with `update(n)` and `close()`, e.g. `lambda label, total: tqdm(desc=label,
total=total)`; generation calls it once per phase that has uncached requests and updates it per batch."""


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
        return GenerationStage(self.reader, open_cache_or_memory(cache))

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
    """The prompts in groups of `size` distinct questions (all in one group for None), in the order their
    questions first come, each group's prompts in their order: the questions go through the one batching loop
    (eor.pipeline.jobs.batches)."""
    order = list(dict.fromkeys(questions[prompt] for prompt in prompts))
    chunks = list(batches(order, size or max(len(order), 1)))
    group_of = {question: number for number, chunk in enumerate(chunks) for question in chunk}
    groups: list[list[str]] = [[] for _ in chunks]
    for prompt in prompts:
        groups[group_of[questions[prompt]]].append(prompt)
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
    return generate_on(generator.stage(cache), requests, generator, progress, label)


def generate_on(
    stage: GenerationStage,
    requests: Sequence[Request],
    generator: Generator,
    progress: Progress | None,
    label: str,
) -> tuple[list[str], GenerationStats]:
    """`generate` through a stage built already: the phases of one evaluation share theirs."""
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


def as_cache(cache: GenerationCache | str | Path | None) -> GenerationCache | None:
    """The cache an evaluation's `cache` argument names: a GenerationCache as it is, a path as its SQLite file,
    None as None (the generator's stage then holds a fresh in-memory one)."""
    return open_cache(cache)
